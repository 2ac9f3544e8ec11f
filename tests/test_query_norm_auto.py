"""``query_norm = "auto"``, the MLP's default: a per-query z-score when the training features are already
min-max normalised within each query (LETOR's QueryLevelNorm), none otherwise; decided on the training
split alone, recorded in summary.json, saved in the model, scored by ``ltr predict`` and the ONNX export
alike, and in ``NeuralRanker``."""

from __future__ import annotations

import json

import numpy as np
import onnxruntime as ort
import pytest
from test_cli_train import read_run, run_scores
from test_export import padded_test_set

from ltr.cli import main
from ltr.data import RankingDataset, load_svmlight, save_svmlight
from ltr.data.query_level import check_query_minmax
from ltr.data.synthetic import make_synthetic_splits
from ltr.train.settings import MODEL_DEFAULTS, resolve_query_norm


def minmax_per_query(ds: RankingDataset) -> RankingDataset:
    """``ds`` with every feature rescaled to [0, 1] within each query (a constant one becomes 0), as LETOR 4.0
    publishes MQ2008, rounded to six decimals as its files are."""
    x = np.asarray(ds.features, dtype=np.float64).copy()
    for a, b in zip(ds.query_offsets[:-1], ds.query_offsets[1:]):
        low, high = x[a:b].min(axis=0), x[a:b].max(axis=0)
        span = np.where(high > low, high - low, 1.0)
        x[a:b] = np.where(high > low, (x[a:b] - low) / span, 0.0)
    return ds.with_features(np.round(x, 6).astype(np.float32))


@pytest.fixture(scope="module")
def splits(tmp_path_factory):
    """Raw synthetic splits and the same splits normalised per query, as SVMlight files."""
    d = tmp_path_factory.mktemp("qnorm_auto")
    raw = make_synthetic_splits(60, 8, mean_list_length=12, seed=7)
    paths = {}
    for kind, sets in (("raw", raw), ("letor", [minmax_per_query(s) for s in raw])):
        for name, ds in zip(("train", "valid", "test"), sets):
            paths[kind, name] = d / f"{kind}-{name}.txt"
            save_svmlight(ds, paths[kind, name])
    return d, paths


def test_the_check_counts_each_feature_as_a_hand_computation():
    offsets = np.array([0, 3, 6, 8])
    x = np.array([  # f0: min-max per query; f1: raw; f2: 0/1 flag (not checked); f3: constant (not checked)
        [0.0, 5.0, 1.0, 2.0], [1.0, 7.0, 0.0, 2.0], [0.4, 6.0, 0.0, 2.0],
        [0.2, 1.0, 1.0, 2.0], [0.0, 3.0, 1.0, 2.0], [1.0, 9.0, 0.0, 2.0],
        [1.0, 4.0, 0.0, 2.0], [0.0, 4.0, 0.0, 2.0],
    ])
    check = check_query_minmax(x, offsets)
    assert (check.queries_read, check.features_checked, check.features_minmax) == (3, 2, 1)
    assert not check.normalised  # 1 of 2 checked features is below the 90% share
    assert check_query_minmax(x[:, [0, 2, 3]], offsets).normalised  # f0 alone is checked, and passes
    # one query of three off the [0, 1] ends is below the 99% share of a feature's queries
    shifted = x[:, [0]].copy()
    shifted[6:8] += 0.5
    assert not check_query_minmax(shifted, offsets).normalised
    # a query where the feature is constant does not count against it
    flat = x[:, [0]].copy()
    flat[6:8] = 0.3
    assert check_query_minmax(flat, offsets).normalised


def test_the_check_reads_a_bounded_sample_of_queries_in_blocks():
    offsets = np.arange(0, 3 * 5000 + 1, 3)
    x = np.tile(np.array([[0.0], [0.5], [1.0]]), (5000, 1))
    check = check_query_minmax(x, offsets, sample_queries=100)
    assert check.queries_read == 100 and check.normalised
    # long lists: the row budget (MAX_ROWS) caps the queries read, 500,000 // 2,500 = 200 of 400
    long_offsets = np.arange(0, 2500 * 400 + 1, 2500)
    column = np.zeros((2500 * 400, 1), dtype=np.float32)
    column[1::2500] = 1.0
    column[2::2500] = 0.5
    assert check_query_minmax(column, long_offsets).queries_read == 200
    # one block of rows or many: the same counts (a block of 1 row holds one query at a time)
    rng = np.random.default_rng(3)
    lengths = rng.integers(1, 9, size=300)
    offs = np.concatenate([[0], np.cumsum(lengths)])
    mixed = rng.random((offs[-1], 4))
    mixed[:, 0] = np.concatenate([np.linspace(0.0, 1.0, n) if n > 1 else [0.0] for n in lengths])
    mixed[:, 1] = rng.integers(0, 2, offs[-1])
    assert check_query_minmax(mixed, offs, block_rows=1) == check_query_minmax(mixed, offs, block_rows=10**6)
    assert check_query_minmax(mixed, offs).features_checked == 3  # the 0/1 column is left out


def test_mq2008_is_normalised_and_the_other_shared_sets_are_not(shared_data):
    mq = load_svmlight(shared_data("letor4-mq2008", "S1.txt"), cache=False)
    check = check_query_minmax(mq.features, mq.query_offsets)
    assert check.normalised and check.features_checked == check.features_minmax == 40  # 46 less 6 constant
    news = load_svmlight(shared_data("trec-news-2018-fastrank", "trec_news_2018.train"), cache=False)
    assert not check_query_minmax(news.features, news.query_offsets).normalised


def test_resolve_chooses_from_the_training_split_and_leaves_explicit_choices():
    raw, _, _ = make_synthetic_splits(30, 6, mean_list_length=10, seed=3)
    letor = minmax_per_query(raw)
    assert MODEL_DEFAULTS["query_norm"] == "auto"
    cfg, facts = resolve_query_norm({"type": "mlp", "query_norm": "auto"}, letor)
    assert cfg["query_norm"] == "zscore" and facts["chosen"] == "zscore" and facts["normalised"]
    cfg, facts = resolve_query_norm({"type": "mlp", "query_norm": "auto"}, raw)
    assert cfg["query_norm"] == "none" and facts["features_minmax"] == 0
    assert resolve_query_norm({"type": "mlp", "query_norm": "minmax"}, letor) == ({"type": "mlp", "query_norm": "minmax"}, None)


@pytest.mark.slow  # two ltr train runs and an ONNX export
def test_ltr_train_default_on_per_query_normalised_data(splits, tmp_path, capsys):
    d, paths = splits
    # the validation split is raw: only the training split decides
    run = tmp_path / "letor"
    assert main(["train", "--train", str(paths["letor", "train"]), "--valid", str(paths["raw", "valid"]),
                 "--epochs", "1", "--ensemble", "2", "--quiet", "--out", str(run)]) == 0  # two members, one epoch each
    summary = json.loads((run / "summary.json").read_text())
    rule = summary["config"]["model"]["query_norm_rule"]
    assert summary["config"]["model"]["query_norm"] == "zscore"
    # 7 of 8: the generator's fourth feature is constant within each query, so 0 everywhere once normalised
    assert rule["rule"] == "auto" and rule["chosen"] == "zscore" and rule["features_checked"] == rule["features_minmax"] == 7
    members = json.loads((run / "model.json").read_text())["members"]
    assert [m["query_norm"] for m in members] == ["zscore", "zscore"]
    # ltr predict and the ONNX graph score the test file alike (the z-score is inside both)
    assert main(["predict", "--model", str(run), "--data", str(paths["letor", "test"]), "--out", str(tmp_path / "t.run")]) == 0
    ds, x, mask = padded_test_set(paths["letor", "test"])
    expected = run_scores(read_run(tmp_path / "t.run"), ds)
    assert main(["export", "--model", str(run), "--format", "onnx", "--out", str(tmp_path / "m.onnx")]) == 0
    session = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(session.run(["scores"], {"features": x, "mask": mask})[0][mask], expected, rtol=1e-5, atol=1e-5)

    raw_run = tmp_path / "raw"  # raw training features: no per-query normalisation, and the model says so
    capsys.readouterr()
    assert main(["train", "--train", str(paths["raw", "train"]), "--valid", str(paths["letor", "valid"]),
                 "--epochs", "1", "--ensemble", "1", "--out", str(raw_run)]) == 0
    assert "query-norm auto: none (training features not normalised per query: 0 of 7 checked" in capsys.readouterr().err
    summary = json.loads((raw_run / "summary.json").read_text())
    assert summary["config"]["model"]["query_norm"] == "none"
    assert summary["config"]["model"]["query_norm_rule"]["chosen"] == "none"
    assert "query_norm" not in json.loads((raw_run / "model.json").read_text())


def test_an_explicit_query_norm_none_reproduces_the_raw_default(splits, tmp_path):
    """On raw data "auto" chooses none: the same model, digit for digit, as --query-norm none."""
    d, paths = splits
    scores = []
    for name, extra in (("auto", []), ("none", ["--query-norm", "none"])):
        assert main(["train", "--train", str(paths["raw", "train"]), "--valid", str(paths["raw", "valid"]), "--epochs", "2",
                     "--ensemble", "1", "--quiet", "--out", str(tmp_path / name), *extra]) == 0
        assert main(["predict", "--model", str(tmp_path / name), "--data", str(paths["raw", "test"]),
                     "--out", str(tmp_path / f"{name}.run")]) == 0
        scores.append(run_scores(read_run(tmp_path / f"{name}.run"), load_svmlight(paths["raw", "test"], cache=False)))
    np.testing.assert_array_equal(scores[0], scores[1])


def test_neural_ranker_resolves_auto_and_needs_query_ids_to_predict(splits):
    from ltr import NeuralRanker

    _, paths = splits
    train = load_svmlight(paths["letor", "train"], cache=False)
    qid = np.repeat(np.arange(train.n_queries), np.diff(train.query_offsets))
    ranker = NeuralRanker(epochs=1, ensemble=1).fit(np.asarray(train.features), train.labels, qid)
    assert ranker.get_params()["query_norm"] == "auto" and ranker.query_norm_ == "zscore"
    with pytest.raises(ValueError, match="query_norm_='zscore'.*pass qid="):
        ranker.predict(np.asarray(train.features))
    scores = ranker.predict(np.asarray(train.features), qid=qid)
    a, b = train.query_offsets[1], train.query_offsets[2]  # a query scored alone gives the same scores
    alone = ranker.predict(np.asarray(train.features[a:b]), qid=np.zeros(b - a))
    np.testing.assert_allclose(scores[a:b], alone, rtol=1e-5, atol=1e-6)  # float32 padding of a batch
    assert 0.0 <= ranker.score(np.asarray(train.features), train.labels, qid=qid) <= 1.0
    raw = NeuralRanker(epochs=1, ensemble=1).fit(np.asarray(train.features) * 3 + 1, train.labels, qid)
    assert raw.query_norm_ == "none" and raw.predict(np.asarray(train.features)).shape == (train.labels.size,)


def test_neural_ranker_defaults_are_ltr_train_defaults():
    """NeuralRanker() is `ltr train` with no option: every model default, the loss and the ensemble size."""
    from ltr import NeuralRanker
    from ltr.train.settings import DEFAULT_ENSEMBLE, DEFAULT_LOSS

    params = NeuralRanker().get_params()
    for key, value in MODEL_DEFAULTS.items():
        expected = tuple(value) if key == "hidden" else value
        assert params["model" if key == "type" else key] == expected, key
    assert (params["loss"], params["ensemble"], params["batch_size"]) == (DEFAULT_LOSS, DEFAULT_ENSEMBLE, "auto")
