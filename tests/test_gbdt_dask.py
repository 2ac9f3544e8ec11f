"""LightGBM on Dask: query-aligned partitions, the global early-stopping callback, and the end-to-end
comparison with the single-machine baseline (2 local workers)."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

pytest.importorskip("distributed")
dask = pytest.importorskip("dask")
pd = pytest.importorskip("pandas")
pytest.importorskip("pyarrow")

import lightgbm as lgb  # noqa: E402

import metrics  # noqa: E402
from ltr.cli import main  # noqa: E402
from ltr.data import RankingDataset, save_svmlight  # noqa: E402
from ltr.data.synthetic import make_synthetic_splits  # noqa: E402
from ltr.base.errors import LtrError  # noqa: E402
from ltr.gbdt.lightgbm import DEFAULT_PARAMS, label_table, train_lightgbm  # noqa: E402
from ltr.gbdt.lightgbm_dask import ValidationStopping, from_dataset, read_parquet_for_ranking, require_dask  # noqa: E402


def to_frame(ds: RankingDataset, docno: bool = True):
    frame = pd.DataFrame(ds.features, columns=[f"f{j}" for j in range(ds.n_features)])
    frame.insert(0, "qid", np.repeat(np.asarray(ds.query_ids), np.diff(ds.query_offsets)))
    frame.insert(1, "label", ds.labels)
    if docno:
        frame["docno"] = np.arange(len(frame))  # a numeric column that is not a feature
    return frame


def write_parquet_cutting_queries(ds, folder, cuts, docno: bool = True):
    folder.mkdir()
    frame = to_frame(ds, docno)
    for i, (a, b) in enumerate(zip(cuts[:-1], cuts[1:])):
        frame.iloc[a:b].to_parquet(folder / f"part-{i:02d}.parquet", index=False)
    return folder


@pytest.fixture(scope="module")
def small():
    return make_synthetic_splits(n_queries=120, n_features=5, mean_list_length=10, seed=4)


def test_parquet_partitions_are_recut_at_query_boundaries(small, tmp_path):
    train = small[0]
    off = train.query_offsets
    # files cut inside queries, one file inside a single query, one cut exactly on a query boundary
    q5 = int(off[5])
    cuts = [0, q5 + 1, q5 + 2, int(off[40]), int(off[41]) - 1, train.n_items]
    folder = write_parquet_cutting_queries(train, tmp_path / "train", cuts)
    with dask.config.set(scheduler="synchronous"):
        data = read_parquet_for_ranking(folder, exclude=["docno"])
        X, y, group = dask.compute(data.X, data.y, data.group)
        blocks = [b.compute() for b in data.group.to_delayed().ravel()]
    assert data.feature_names == [f"f{j}" for j in range(5)]
    np.testing.assert_array_equal(X, train.features)
    np.testing.assert_array_equal(y, train.labels)
    np.testing.assert_array_equal(group, np.diff(off))  # no query split in two groups
    assert [int(b.sum()) for b in blocks] == list(data.X.chunks[0])  # each chunk's groups cover its rows
    assert data.n_queries == train.n_queries and data.label_values.tolist() == np.unique(train.labels).tolist()


def test_parquet_with_a_query_in_two_places_is_refused(small, tmp_path):
    frame = to_frame(small[0])
    frame.loc[3, "qid"] = frame.loc[40, "qid"]  # query of row 40 now also owns row 3
    (tmp_path / "bad").mkdir()
    frame.to_parquet(tmp_path / "bad" / "p.parquet", index=False)
    with dask.config.set(scheduler="synchronous"), pytest.raises(LtrError, match="not contiguous"):
        read_parquet_for_ranking(tmp_path / "bad")


def test_in_memory_data_is_cut_at_query_boundaries(small):
    train = small[0]
    data = from_dataset(train, 3)
    assert len(data.X.chunks[0]) == 3
    rows = np.cumsum(data.X.chunks[0])
    assert set(rows) <= set(train.query_offsets.tolist())
    assert [int(b.compute().sum()) for b in data.group.to_delayed().ravel()] == list(data.X.chunks[0])


def test_validation_callback_equals_lightgbm_ndcg_and_stops_like_the_baseline(small):
    train, valid, _ = small
    codes, gains, _ = label_table(np.concatenate([train.labels, valid.labels]), "exp2")
    params = {**DEFAULT_PARAMS, "eval_at": [1, 3, 5, 10], "label_gain": gains, "num_leaves": 7, "min_data_in_leaf": 5}
    tr = lgb.Dataset(train.features, label=codes[: train.n_items], group=np.diff(train.query_offsets))
    va = lgb.Dataset(valid.features, label=codes[train.n_items :], group=np.diff(valid.query_offsets), reference=tr)
    own: dict = {}
    mine = ValidationStopping(valid, rounds=None)
    lgb.train(params, tr, num_boost_round=25, valid_sets=[va], valid_names=["valid"], callbacks=[lgb.record_evaluation(own), mine])
    for k in (1, 3, 5, 10):
        ours = [h[f"ndcg@{k}"] for h in mine.history]
        np.testing.assert_allclose(ours[: len(own["valid"][f"ndcg@{k}"])], own["valid"][f"ndcg@{k}"], atol=1e-12)

    # the same stopping rule as train_lightgbm's: the same best round
    base_params = {"num_leaves": 7, "min_data_in_leaf": 5}
    _, info = train_lightgbm(train, valid, base_params, num_boost_round=200, early_stopping_rounds=5)
    stopper = ValidationStopping(valid, rounds=5)
    booster = lgb.train({**params, **base_params, "metric": "None"}, tr, num_boost_round=200, callbacks=[stopper])
    assert booster.best_iteration == info["best_iteration"] and stopper.best == pytest.approx(info["best_score"]["valid"]["ndcg@10"])


def test_missing_dask_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(LtrError, match=r"pip install 'ltr\[dask\]'"):
        require_dask()


def quantized_splits(seed: int = 0, levels: int = 32, n_queries: int = 1000):
    """``n_queries`` synthetic queries (30 documents on average, 30 features) with each feature cut into
    ``levels`` equal-frequency levels. With fewer distinct values than bins, LightGBM's bins do not
    depend on which rows a worker holds, so the comparison below is not blurred by binning."""
    dss = make_synthetic_splits(n_queries=n_queries, n_features=30, mean_list_length=30, seed=seed)
    x = dss[0].features
    edges = [np.quantile(x[:, j], np.linspace(0, 1, levels + 1)[1:-1]) for j in range(x.shape[1])]
    return [d.with_features(np.stack([np.searchsorted(e, d.features[:, j]) for j, e in enumerate(edges)], 1).astype(np.float32)) for d in dss]


def first_trees(model_file, n: int) -> list[str]:
    trees = model_file.read_text().split("Tree=")[1 : n + 1]
    return ["\n".join(line for line in t.splitlines() if not line.startswith(("leaf_count", "internal_count"))) for t in trees]


@pytest.mark.slow
def test_ltr_gbdt_on_two_dask_workers_matches_one_machine(tmp_path):
    train, valid, test = quantized_splits()
    paths = {name: str(tmp_path / f"{name}.txt") for name in ("train", "valid", "test")}
    for name, ds in zip(paths, (train, valid, test)):
        save_svmlight(ds, paths[name])
    folder = write_parquet_cutting_queries(train, tmp_path / "train_parquet", np.linspace(0, train.n_items, 7).astype(int), docno=False)
    common = ["--valid", paths["valid"], "--test", paths["test"], "--num-boost-round", "300", "--early-stopping-rounds", "20",
              "--num-leaves", "7", "--learning-rate", "0.1", "--metrics", "ndcg@10", "--quiet"]
    assert main(["gbdt", "--train", paths["train"], "--out", str(tmp_path / "one"), *common]) == 0
    assert main(["gbdt", "--train", str(folder), "--dask-workers", "2", "--out", str(tmp_path / "dask"), *common]) == 0
    one, two = (json.loads((tmp_path / d / "summary.json").read_text()) for d in ("one", "dask"))
    assert two["dask"]["workers"] == 2 and two["dask"]["n_queries"] == train.n_queries
    assert two["label_gain"] == one["label_gain"]
    (name,) = one["metrics"]["test"]
    assert abs(two["metrics"]["test"][name] - one["metrics"]["test"][name]) < 0.005
    # Stronger: the first trees are the single machine's (splits, thresholds, leaf values; the
    # per-leaf row counts LightGBM records differ). Later trees may part at a near-tie of two splits'
    # gains, as histograms summed over workers round differently.
    assert first_trees(tmp_path / "dask" / "model.txt", 10) == first_trees(tmp_path / "one" / "model.txt", 10)

    # the saved model is LightGBM's text format, read back by ltr predict
    assert (tmp_path / "dask" / "model.txt").read_text().startswith("tree")
    assert main(["predict", "--model", str(tmp_path / "dask"), "--data", paths["test"], "--out", str(tmp_path / "t.run")]) == 0
    rows = [line.split() for line in (tmp_path / "t.run").read_text().splitlines()]
    qpos = {str(q): i for i, q in enumerate(test.query_ids)}
    scores = np.array([float(r[4]) for r in sorted(rows, key=lambda r: (qpos[r[0]], int(r[2])))])
    ndcg = metrics.evaluate(scores, test.labels, test.query_offsets, ["ndcg@10"]).mean[name]
    assert ndcg == pytest.approx(two["metrics"]["test"][name], abs=1e-12)
