"""Every data-taking command reads Parquet files and stores: ``ltr convert``, ``ltr train --train
STORE``, ``--train x.parquet`` with its column options, ``ltr predict`` on Parquet data (and its
``--out x.parquet`` meaning ``--format parquet``)."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("pyarrow")
import pyarrow.parquet as pq  # noqa: E402
from test_training import make_ds  # noqa: E402

from ltr.cli import main  # noqa: E402
from ltr.data import load_parquet, open_store, save_svmlight, to_frame  # noqa: E402
from ltr.train.models import load_model  # noqa: E402
from ltr.train.trainer import predict_scores  # noqa: E402


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The same splits as SVMlight files and as Parquet files with named, renamed columns."""
    d = tmp_path_factory.mktemp("formats")
    paths = {}
    for name, (nq, seed) in {"train": (30, 31), "valid": (10, 32), "test": (10, 33)}.items():
        ds = make_ds(nq, seed)
        save_svmlight(ds, d / f"{name}.txt")
        df = to_frame(ds).rename(columns={"qid": "query", "label": "grade"})
        df = df.rename(columns={f"f{j + 1}": f"signal_{j}" for j in range(ds.n_features)})
        df.insert(2, "url", [f"http://x/{i}" for i in range(len(df))])  # a string column: not a feature
        df.to_parquet(d / f"{name}.parquet", index=False)  # pandas' own metadata, not ltr's
        paths[name], paths[name + "_pq"] = d / f"{name}.txt", d / f"{name}.parquet"
    return paths


COLUMNS = ["--query-column", "query", "--label-column", "grade", "--doc-id-column", "url"]


def test_train_on_parquet_with_column_options(files, tmp_path):
    out = tmp_path / "run"
    code = main(["train", "--train", str(files["train_pq"]), "--valid", str(files["valid_pq"]), *COLUMNS,
                 "--model", "linear", "--epochs", "2", "--out", str(out), "--quiet"])  # fmt: skip
    assert code == 0
    names = [f"signal_{j}" for j in range(6)]
    assert json.loads((out / "model.json").read_text())["feature_names"] == names
    summary = json.loads((out / "summary.json").read_text())
    assert summary["data"]["train"]["feature_names"] == names and summary["data"]["train"]["n_queries"] == 30

    # the same training from the SVMlight files gives the same metrics (same values, same order)
    ref = tmp_path / "ref"
    assert main(["train", "--train", str(files["train"]), "--valid", str(files["valid"]), "--model", "linear",
                 "--epochs", "2", "--out", str(ref), "--quiet"]) == 0  # fmt: skip
    assert json.loads((ref / "summary.json").read_text())["metrics"] == summary["metrics"]


def test_convert_then_train_on_the_store(files, tmp_path, capsys):
    store = tmp_path / "train.store"
    assert main(["convert", str(files["train_pq"]), "--out", str(store), *COLUMNS, "--block-rows", "50"]) == 0
    assert "wrote" in capsys.readouterr().out
    ds = open_store(store)
    assert ds.equals(load_parquet(files["train_pq"], "query", "grade", doc_id_column="url"))
    out = tmp_path / "run"
    code = main(["train", "--train", str(store), "--valid", str(files["valid_pq"]), "--test", str(files["test"]), *COLUMNS,
                 "--model", "linear", "--epochs", "2", "--normalize", "standard", "--out", str(out), "--quiet"])  # fmt: skip
    assert code == 0
    ref = tmp_path / "ref"
    assert main(["train", "--train", str(files["train_pq"]), "--valid", str(files["valid_pq"]), "--test", str(files["test"]), *COLUMNS,
                 "--model", "linear", "--epochs", "2", "--normalize", "standard", "--out", str(ref), "--quiet"]) == 0  # fmt: skip
    got, want = (json.loads((p / "summary.json").read_text()) for p in (out, ref))
    assert got["metrics"] == want["metrics"] and got["history"][0]["train_loss"] == want["history"][0]["train_loss"]


def test_predict_writes_parquet_scores(files, tmp_path):
    run = tmp_path / "run"
    assert main(["train", "--train", str(files["train_pq"]), "--valid", str(files["valid_pq"]), *COLUMNS,
                 "--model", "linear", "--epochs", "1", "--out", str(run), "--quiet"]) == 0  # fmt: skip
    out = tmp_path / "scores.parquet"
    assert main(["predict", "--model", str(run), "--data", str(files["test_pq"]), "--out", str(out), *COLUMNS]) == 0
    table = pq.read_table(out)  # --format parquet, from the name
    assert table.column_names == ["qid", "docid", "rank", "score"]
    test = load_parquet(files["test_pq"], "query", "grade", doc_id_column="url")
    assert table["docid"].to_pylist() == test.doc_ids.tolist()
    assert table["qid"].to_pylist() == np.repeat(test.query_ids, test.query_lengths).astype(str).tolist()
    assert np.array_equal(table["score"].to_numpy(), predict_scores(load_model(run), test.features))


def test_predict_picks_the_models_columns_by_name(files, tmp_path):
    """A model trained on named columns scores a file whose columns are in another order."""
    run = tmp_path / "run"
    assert main(["train", "--train", str(files["train_pq"]), "--valid", str(files["valid_pq"]), *COLUMNS,
                 "--model", "linear", "--epochs", "1", "--out", str(run), "--quiet"]) == 0  # fmt: skip
    df = pq.read_table(files["test_pq"]).to_pandas()
    shuffled = tmp_path / "shuffled.parquet"
    df[["grade", "signal_3", "query", "signal_5", "signal_0", "signal_4", "url", "signal_2", "signal_1"]].to_parquet(shuffled, index=False)
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    assert main(["predict", "--model", str(run), "--data", str(files["test_pq"]), "--out", str(a), *COLUMNS]) == 0
    assert main(["predict", "--model", str(run), "--data", str(shuffled), "--out", str(b), *COLUMNS]) == 0
    assert pq.read_table(a).equals(pq.read_table(b))


def test_missing_column_is_a_one_line_error(files, tmp_path, capsys):
    code = main(["train", "--train", str(files["train_pq"]), "--valid", str(files["valid_pq"]), "--out", str(tmp_path / "r"), "--quiet"])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "no query column 'qid' (set query_column= or --query-column); its columns are: query, grade, url" in err
    assert not (tmp_path / "r").exists()


def test_convert_refusals_are_one_line(files, tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    (data / "notes.txt").write_text("mine")
    cases = [
        (["convert", str(tmp_path / "missing.txt"), "--out", str(tmp_path / "s")], "file not found"),
        (["convert", str(files["train"]), "--out", str(data), "--force"], "is a folder that is not a store, which --force never replaces"),
        (["convert", str(files["train_pq"]), "--out", str(tmp_path / "s"), "--sort-by-query"], "cannot regroup rows"),
        (["convert", str(files["train_pq"]), "--out", str(tmp_path / "s")], "no query column 'qid'"),
    ]
    for argv, expected in cases:
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and expected in err, err
    assert (data / "notes.txt").read_text() == "mine" and not (tmp_path / "s").exists()
    with pytest.raises(SystemExit):
        main(["convert", str(files["train"]), "--out", str(tmp_path / "s"), "--block-rows", "0"])
