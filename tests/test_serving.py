"""Serving: new rows score without labels from every format, every model kind exports to one ONNX graph
whose onnxruntime scores equal ``ltr predict``'s, and model folders score from wherever they are moved.

The oracle of every export test is ``ltr predict`` itself (the folder's own scorer: the engine's
predict, the torch model, the blend's float64 z-scores) on a test file the export never saw."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
torch = pytest.importorskip("torch")

import pyarrow.parquet as pq  # noqa: E402

from ltr.cli import main  # noqa: E402
from ltr.data import load_svmlight, save_svmlight  # noqa: E402
from ltr.data.synthetic import make_synthetic_splits  # noqa: E402
from ltr.base.errors import LtrError  # noqa: E402

NAMES = ("bm25", "clicks", "age", "length", "pagerank", "title_match")
ENGINES = ("lightgbm", "xgboost", "catboost")
TOL = 1e-5


def _engine_available(engine: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(engine) is not None


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """data/{train,valid,test}.txt (60 queries, 6 named features), runs/<engine> for each installed
    engine, runs/mlp (an untrained MLP: export and predict need no training) and runs/blend of them all."""
    from ltr.gbdt.engines import save_gbdt, train_gbdt
    from ltr.train.models import build_model, save_model

    root = tmp_path_factory.mktemp("serving")
    splits = make_synthetic_splits(60, len(NAMES), mean_list_length=8, seed=3, valid_share=0.25, test_share=0.25)
    splits = [dataclasses.replace(ds, feature_names=NAMES) for ds in splits]
    (root / "data").mkdir()
    for name, ds in zip(("train", "valid", "test"), splits):
        save_svmlight(ds, root / "data" / f"{name}.txt")
    members = []
    for engine in ENGINES:
        if not _engine_available(engine):
            continue
        params = {"depth": 3} if engine == "catboost" else {}
        model, info = train_gbdt(engine, splits[0], None, params, num_boost_round=12, early_stopping_rounds=None, threads=1)
        save_gbdt(engine, model, root / "runs" / engine, info, n_features=len(NAMES), feature_names=NAMES)
        members.append(str(root / "runs" / engine))
    torch.manual_seed(0)
    save_model(build_model({"type": "mlp", "n_features": len(NAMES), "hidden": [8]}), root / "runs" / "mlp")
    members.append(str(root / "runs" / "mlp"))
    assert main(["blend", "--models", *members, "--valid", str(root / "data" / "valid.txt"), "--weights", "equal",
                 "--out", str(root / "runs" / "blend")]) == 0
    return root


def _table(ds, *, labels: bool) -> dict:
    """The data set as columns with names of the user's choosing (and an extra numeric column that is no feature)."""
    off = ds.query_offsets
    columns = {"session": np.repeat(np.asarray(ds.query_ids), np.diff(off)),
               "item": np.array([f"doc-{i}" for i in range(ds.n_items)]), "price": np.arange(ds.n_items, dtype=np.float64)}
    for j, name in reversed(list(enumerate(NAMES))):  # another column order than training's: read by name
        columns[name] = ds.features[:, j]
    if labels:
        columns["grade"] = ds.labels
    return columns


def _tsv_scores(model, data, *extra) -> np.ndarray:
    import tempfile

    # a new file each call: ltr predict replaces an existing file only with --force
    out = Path(tempfile.mkdtemp(dir=Path(data).parent)) / f"scores-{Path(model).name}.tsv"
    assert main(["predict", "--model", str(model), "--data", str(data), "--format", "tsv", "--out", str(out), *extra]) == 0
    return np.loadtxt(out, ndmin=1)


def test_unlabelled_parquet_and_csv_score_as_the_labelled_file(served, tmp_path, capsys):
    test = load_svmlight(served / "data" / "test.txt")
    pq.write_table(pa.table(_table(test, labels=False)), tmp_path / "new.parquet")
    import pandas as pd

    pd.DataFrame(_table(test, labels=False)).to_csv(tmp_path / "new.csv", index=False)
    options = ["--query-column", "session", "--doc-id-column", "item"]
    expected = _tsv_scores(served / "runs" / "lightgbm", served / "data" / "test.txt")
    for path in (tmp_path / "new.parquet", tmp_path / "new.csv"):
        out = tmp_path / f"{path.suffix[1:]}-scores.parquet"
        capsys.readouterr()
        assert main(["predict", "--model", str(served / "runs" / "lightgbm"), "--data", str(path), "--out", str(out), *options]) == 0
        said = capsys.readouterr().out
        assert f"wrote {test.n_items} rows for {test.n_queries} queries" in said and "no metrics computed" in said
        table = pq.read_table(out).to_pandas()
        assert table.columns.tolist() == ["qid", "docid", "rank", "score"]  # in the data's row order
        assert table["docid"].tolist() == [f"doc-{i}" for i in range(test.n_items)]  # each score maps back to its row
        assert table["qid"].tolist() == [str(q) for q in np.repeat(test.query_ids, np.diff(test.query_offsets))]
        np.testing.assert_array_equal(table["score"].to_numpy(), expected)  # read by name, not by position
    # --feature-columns picks the same columns by hand; a labelled table with --label-column reads its labels too
    pq.write_table(pa.table(_table(test, labels=True)), tmp_path / "labelled.parquet")
    got = _tsv_scores(served / "runs" / "lightgbm", tmp_path / "labelled.parquet", *options, "--label-column", "grade",
                      "--feature-columns", ",".join(NAMES))
    np.testing.assert_array_equal(got, expected)
    assert main(["predict", "--model", str(served / "runs" / "lightgbm"), "--data", str(tmp_path / "new.parquet"), *options,
                 "--out", str(tmp_path / "x.run"), "--qrels", str(tmp_path / "x.qrels")]) == 2
    assert "--qrels: --data" in capsys.readouterr().err and not (tmp_path / "x.qrels").exists()


def test_the_python_predict_function_needs_no_labels(served, tmp_path):
    from ltr.models.predict import predict

    test = load_svmlight(served / "data" / "test.txt")
    pq.write_table(pa.table(_table(test, labels=False)), tmp_path / "new.parquet")
    frame = predict(served / "runs" / "blend", tmp_path / "new.parquet", query_column="session", doc_id_column="item")
    np.testing.assert_array_equal(frame["score"].to_numpy(), _tsv_scores(served / "runs" / "blend", served / "data" / "test.txt"))
    assert frame["row"].tolist() == list(range(test.n_items)) and frame["docid"].tolist() == [f"doc-{i}" for i in range(test.n_items)]
    first = frame[frame["qid"] == test.query_ids[0]]
    assert sorted(first["rank"]) == list(range(1, len(first) + 1))
    assert first.sort_values("rank")["score"].is_monotonic_decreasing


def test_importance_on_unlabelled_data_says_it_needs_labels(served, tmp_path, capsys):
    test = load_svmlight(served / "data" / "test.txt")
    pq.write_table(pa.table(_table(test, labels=False)), tmp_path / "new.parquet")
    assert main(["importance", "--model", str(served / "runs" / "lightgbm"), "--data", str(tmp_path / "new.parquet"),
                 "--query-column", "session", "--doc-id-column", "item"]) == 2
    err = capsys.readouterr().err
    assert "no label column 'label'; permutation importance measures the drop of ndcg@10, which needs labels" in err


def _onnx_scores(path, ds) -> np.ndarray:
    import onnxruntime as ort

    from ltr.models.onnx_graph import padded

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    batch, mask = padded(ds.features, ds.query_offsets)  # one query per list
    scores = session.run(["scores"], {"features": batch, "mask": mask})[0]
    assert scores.dtype == np.float32 and scores.shape == mask.shape and np.all(scores[~mask] == 0)
    return scores[mask].astype(np.float64)


@pytest.mark.parametrize("kind", [*ENGINES, "mlp", "blend"])
def test_onnx_graph_equals_ltr_predict(served, tmp_path, kind, capsys):
    pytest.importorskip("onnxruntime")
    if kind in ("lightgbm", "xgboost"):
        pytest.importorskip("onnxmltools")
    if kind in ENGINES and not _engine_available(kind):
        pytest.skip(f"{kind} is not installed")
    model, out = served / "runs" / kind, tmp_path / f"{kind}.onnx"
    assert main(["export", "--model", str(model), "--format", "onnx", "--out", str(out)]) == 0
    assert f"wrote {out} (onnx of a {'neural' if kind == 'mlp' else kind} model" in capsys.readouterr().out
    test = load_svmlight(served / "data" / "test.txt")
    expected = _tsv_scores(model, served / "data" / "test.txt")
    got = _onnx_scores(out, test)
    assert np.all(np.abs(got - expected) <= TOL * (1 + np.abs(expected))), np.abs(got - expected).max()
    facts = json.loads((tmp_path / f"{kind}.onnx.json").read_text())
    assert facts["inputs"]["features"]["shape"] == ["batch", "list_length", len(NAMES)]
    assert facts["outputs"]["scores"]["shape"] == ["batch", "list_length"] and facts["file"] == f"{kind}.onnx"
    assert facts["feature_names"] == (None if kind == "mlp" else list(NAMES)) and facts["ltr_version"]
    if kind == "blend":
        assert [m["kind"] for m in facts["members"]][-1] == "neural" and facts["one_list_is_one_query"]


def test_blend_graph_standardises_each_list_over_its_mask(served, tmp_path):
    """The blend graph on a batch of one query padded to a longer list gives the same scores as the
    query alone (the padding takes no part in the means and deviations), and a list whose items are
    all alike scores 0 (every member gives them one score: z = 0)."""
    pytest.importorskip("onnxruntime")
    import onnxruntime as ort

    from ltr.models.export_folder import export_folder

    export_folder(served / "runs" / "blend", tmp_path / "blend.onnx", "onnx")
    session = ort.InferenceSession(str(tmp_path / "blend.onnx"), providers=["CPUExecutionProvider"])
    test = load_svmlight(served / "data" / "test.txt")
    rows = test.features[test.query_offsets[0]:test.query_offsets[1]]
    alone = session.run(["scores"], {"features": rows[None], "mask": np.ones((1, len(rows)), bool)})[0][0]
    padded_batch = np.concatenate([rows, np.full((5, rows.shape[1]), 1e6, np.float32)])[None]
    mask = np.arange(len(rows) + 5)[None] < len(rows)
    np.testing.assert_allclose(session.run(["scores"], {"features": padded_batch, "mask": mask})[0][0][: len(rows)], alone, atol=1e-6)
    same = np.repeat(rows[:1], 4, axis=0)[None]
    assert np.all(session.run(["scores"], {"features": same, "mask": np.ones((1, 4), bool)})[0] == 0)


def test_export_refuses_what_it_cannot_write(served, tmp_path, capsys):
    blend = tmp_path / "blend"
    shutil.copytree(served / "runs" / "blend", blend)
    doc = json.loads((blend / "blend.json").read_text())
    doc["members"] = [{**m, "path": str((served / "runs" / "blend" / m["path"]).resolve())} for m in doc["members"]]
    doc["feature_names"] = ["query_len", *NAMES[1:]]  # members trained on other names than the blend says
    (blend / "blend.json").write_text(json.dumps(doc))
    assert main(["export", "--model", str(blend), "--format", "onnx", "--out", str(tmp_path / "b.onnx")]) == 2
    err = capsys.readouterr().err
    assert re.search(r"member 0 \(.*\) was trained on other feature names than the blend \(feature 0: 'bm25' vs 'query_len'\)", err)
    assert not (tmp_path / "b.onnx").exists() and not (tmp_path / "b.onnx.json").exists()
    assert main(["export", "--model", str(served / "runs" / "lightgbm"), "--format", "torchscript", "--out", str(tmp_path / "m.pt")]) == 2
    assert "a lightgbm model exports to ONNX only (--format onnx)" in capsys.readouterr().err


def test_model_folders_travel_and_messages_name_paths_as_given(served, tmp_path, monkeypatch, capsys):
    """The whole tree (data, runs, the blend referring to its members by relative paths) moved to
    another place scores there as it did, and exports; with a member deleted the blend is refused,
    naming the member by the path the user gave, not a resolved absolute one."""
    expected = {k: _tsv_scores(served / "runs" / k, served / "data" / "test.txt") for k in ("lightgbm", "mlp", "blend")}
    shutil.copytree(served, tmp_path / "first")
    shutil.move(tmp_path / "first", tmp_path / "elsewhere")  # the folder it was copied to is gone too
    monkeypatch.chdir(tmp_path / "elsewhere")
    for kind, scores in expected.items():
        np.testing.assert_array_equal(_tsv_scores(Path("runs") / kind, Path("data") / "test.txt"), scores)
    assert main(["export", "--model", "runs/blend", "--format", "onnx", "--out", "blend.onnx"]) == 0
    assert json.loads(Path("blend.onnx.json").read_text())["model"] == "runs/blend"
    shutil.rmtree("runs/lightgbm")
    capsys.readouterr()
    assert main(["predict", "--model", "runs/blend", "--data", "data/test.txt", "--out", "x.run"]) == 2
    err = capsys.readouterr().err
    assert "member 0's folder runs/blend/../lightgbm is missing" in err and str(tmp_path) not in err
    with pytest.raises(LtrError, match="member 0's folder runs/blend/../lightgbm is missing"):
        from ltr.models.export_folder import export_folder

        export_folder("runs/blend", "b.onnx", "onnx")


def test_bad_new_rows_are_refused_in_one_line(served, tmp_path, capsys):
    """An empty table, a missing or renamed feature column, a narrower SVMlight file, a NaN feature:
    each refused with exit status 2, naming the file and what differs from the model."""
    import pandas as pd

    test = load_svmlight(served / "data" / "test.txt")
    frame = pd.DataFrame(_table(test, labels=False))
    frame.iloc[:0].to_csv(tmp_path / "empty.csv", index=False)
    frame.drop(columns=["age"]).to_parquet(tmp_path / "no-age.parquet")
    frame.assign(clicks=np.where(np.arange(len(frame)) == 4, np.nan, frame["clicks"])).to_csv(tmp_path / "nan.csv", index=False)
    narrow = dataclasses.replace(test, features=test.features[:, :5], feature_names=None)
    save_svmlight(narrow, tmp_path / "narrow.txt")
    cases = [("empty.csv", "empty.csv: no rows"),
             ("no-age.parquet", "no-age.parquet: no feature column 'age'; its columns are: session, item, price, title_match"),
             ("nan.csv", "nan.csv: row 4: column 'clicks' is missing a value"),
             ("narrow.txt", "narrow.txt has 5 features, the model expects 6")]
    for name, message in cases:
        argv = ["predict", "--model", str(served / "runs" / "blend"), "--data", str(tmp_path / name), "--out", str(tmp_path / "x.run")]
        assert main([*argv, "--query-column", "session", "--doc-id-column", "item"]) == 2, name
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1 and err.startswith("ltr predict: error: "), err
