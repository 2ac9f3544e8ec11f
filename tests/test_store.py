"""Memory-mapped stores (ltr.data.store): conversion, equality with the in-RAM readers, and training,
normalisation, batching and prediction on mapped features giving bit-identical results."""

from __future__ import annotations

import dataclasses
import sys

import numpy as np
import pytest

pytest.importorskip("pyarrow")

import losses  # noqa: E402
import ltr.data.normalize as normalize_mod  # noqa: E402
import ltr.data.svmlight as svmlight_mod  # noqa: E402
from ltr.data import convert_to_store, load_parquet, load_svmlight, open_store, save_svmlight, to_parquet  # noqa: E402
from ltr.data.batching import iterate_batches  # noqa: E402
from ltr.data.normalize import Normalizer  # noqa: E402
from ltr.data.store import is_mapped, release_pages  # noqa: E402
from ltr.data.synthetic import make_mslr_like, make_synthetic_splits  # noqa: E402
from ltr.base.errors import DataFormatError, LtrError  # noqa: E402
from ltr.train.models import FeatureTransform, MLPScorer  # noqa: E402
from ltr.train.trainer import Trainer, TrainConfig, predict_scores, seed_everything  # noqa: E402


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of 7 SVMlight lines, so that a small file crosses many block boundaries."""
    monkeypatch.setattr(svmlight_mod, "_BLOCK_LINES", 7)


def with_ids(ds):
    return dataclasses.replace(ds, doc_ids=np.array([f"d{i}" for i in range(ds.n_items)]))


# ---- conversion -------------------------------------------------------------------------------
def test_svmlight_store_equals_load_svmlight(tmp_path, small_blocks):
    ds = with_ids(make_mslr_like(30, 9, mean_list_length=6, n_users=4, seed=2))
    save_svmlight(ds, tmp_path / "a.txt")
    convert_to_store(tmp_path / "a.txt", tmp_path / "a.store")
    store = open_store(tmp_path / "a.store")
    assert store.equals(load_svmlight(tmp_path / "a.txt", cache=False))
    assert store.user_ids.dtype == np.int64 and store.doc_ids[3] == "d3"
    assert is_mapped(store.features) and not store.features.flags.writeable
    assert sorted(p.name for p in (tmp_path / "a.store").iterdir()) == [
        "doc_ids.txt", "features.npy", "labels.npy", "query_ids.npy", "query_offsets.npy", "store.json", "user_ids.npy"]  # fmt: skip
    assert not list(tmp_path.glob(".a.store.partial-*"))


def test_sparse_svmlight_widens_as_wider_blocks_come(tmp_path, small_blocks):
    lines = [f"{i % 3} qid:{i // 4} 1:{i}.5 3:1" for i in range(20)] + ["2 qid:5 2:1 9:0.25", "0 qid:5 4:-1"]
    (tmp_path / "s.txt").write_text("\n".join(lines) + "\n")
    convert_to_store(tmp_path / "s.txt", tmp_path / "s.store")
    store, ref = open_store(tmp_path / "s.store"), load_svmlight(tmp_path / "s.txt", cache=False)
    assert store.n_features == 9 and store.equals(ref)
    convert_to_store(tmp_path / "s.txt", tmp_path / "w.store", n_features=12)
    assert open_store(tmp_path / "w.store").equals(load_svmlight(tmp_path / "s.txt", n_features=12, cache=False))


def test_query_sidecar(tmp_path, small_blocks):
    lines = [f"{i % 2} 1:{i} 2:{i * 0.5}" for i in range(17)]
    (tmp_path / "g.txt").write_text("\n".join(lines) + "\n")
    (tmp_path / "g.txt.query").write_text("5\n4\n8\n")
    convert_to_store(tmp_path / "g.txt", tmp_path / "g.store")
    store = open_store(tmp_path / "g.store")
    assert store.query_offsets.tolist() == [0, 5, 9, 17] and store.query_ids.tolist() == [0, 1, 2]
    assert store.equals(load_svmlight(tmp_path / "g.txt", cache=False))


def test_parquet_store_equals_load_parquet(tmp_path):
    ds = with_ids(make_mslr_like(20, 5, mean_list_length=9, n_users=3, seed=4))
    ds = dataclasses.replace(ds, weights=np.linspace(0.5, 2.0, ds.n_items), feature_names=tuple("abcde"))
    to_parquet(ds, tmp_path / "p.parquet", row_group_rows=11)
    convert_to_store(tmp_path / "p.parquet", tmp_path / "p.store", block_rows=7)
    store = open_store(tmp_path / "p.store")
    assert store.equals(load_parquet(tmp_path / "p.parquet")) and store.equals(ds)
    assert store.feature_names == tuple("abcde")


def test_conversion_refusals_leave_nothing_behind(tmp_path, small_blocks):
    lines = [f"0 qid:{q} 1:1" for q in (1, 1, 2, 2, 1)]
    (tmp_path / "bad.txt").write_text("\n".join(lines) + "\n")
    with pytest.raises(DataFormatError, match=r"bad.txt:5: rows of query 1 are not contiguous: the query starts at line 1"):
        convert_to_store(tmp_path / "bad.txt", tmp_path / "bad.store")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.txt"]
    (tmp_path / "nan.txt").write_text("0 qid:1 1:1\n" * 9 + "0 qid:1 1:nan\n")
    with pytest.raises(DataFormatError, match="nan.txt:10: feature 1 is NaN"):
        convert_to_store(tmp_path / "nan.txt", tmp_path / "nan.store")
    (tmp_path / "ok.txt").write_text("0 qid:1 1:1\n")
    convert_to_store(tmp_path / "ok.txt", tmp_path / "ok.store")
    with pytest.raises(LtrError, match="already exists"):
        convert_to_store(tmp_path / "ok.txt", tmp_path / "ok.store")
    with pytest.raises(LtrError, match="cannot regroup rows"):
        convert_to_store(tmp_path / "ok.txt", tmp_path / "x.store", sort_by_query=True)


def test_damaged_store_is_refused(tmp_path):
    save_svmlight(make_mslr_like(3, 2, mean_list_length=4, seed=0), tmp_path / "a.txt")
    convert_to_store(tmp_path / "a.txt", tmp_path / "a.store")
    (tmp_path / "a.store" / "features.npy").write_bytes(b"\x93NUMPY garbage")
    with pytest.raises(LtrError, match="damaged store"):
        open_store(tmp_path / "a.store")
    with pytest.raises(LtrError, match="not a store"):
        open_store(tmp_path)


# ---- computing on mapped features -------------------------------------------------------------
@pytest.fixture(scope="module")
def store_and_ram(tmp_path_factory):
    d = tmp_path_factory.mktemp("store")
    train, valid, _ = make_synthetic_splits(60, 12, mean_list_length=20, seed=5)
    save_svmlight(train, d / "train.txt")
    ram = load_svmlight(d / "train.txt", cache=False)
    convert_to_store(d / "train.txt", d / "train.store")
    return open_store(d / "train.store"), ram, valid


@pytest.mark.parametrize("kind", ["standard", "log1p_standard", "log1p"])
def test_streaming_normaliser_on_a_store_is_bit_identical(store_and_ram, monkeypatch, kind):
    store, ram, _ = store_and_ram
    one = Normalizer(kind).fit(ram)
    assert Normalizer(kind).fit(store).to_dict() == one.to_dict()
    # several blocks (merged pairwise): the same on both, and numpy's one-shot statistics to 1e-12
    monkeypatch.setattr(normalize_mod, "fit_rows", lambda f: 97)
    a, b = Normalizer(kind).fit(store), Normalizer(kind).fit(ram)
    assert a.to_dict() == b.to_dict()
    if kind != "log1p":
        z = np.sign(ram.features.astype(np.float64)) * np.log1p(np.abs(ram.features.astype(np.float64))) if kind != "standard" else ram.features.astype(np.float64)
        np.testing.assert_allclose(a.mean_, z.mean(axis=0), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(a.scale_, np.where(z.std(axis=0) > 0, z.std(axis=0), 1), rtol=1e-12)
    assert np.array_equal(a.transform(store).features, b.transform(ram).features)


def test_batches_and_predictions_on_a_store_equal_ram(store_and_ram):
    store, ram, _ = store_and_ram
    for b1, b2 in zip(iterate_batches(store, 8, shuffle=True, seed=1), iterate_batches(ram, 8, shuffle=True, seed=1), strict=True):
        assert (b1.features == b2.features).all() and (b1.labels == b2.labels).all() and (b1.mask == b2.mask).all()
    model = MLPScorer(12, hidden=(8,))
    assert np.array_equal(predict_scores(model, store.features, rows=50), predict_scores(model, ram.features, rows=50))


def test_training_from_a_store_is_bit_identical_to_ram(store_and_ram):
    store, ram, valid = store_and_ram
    runs = []
    for data in (ram, store):
        seed_everything(0)
        model = MLPScorer(12, hidden=(16, 8))
        model.set_normalizer(FeatureTransform.fit(data.features, "log1p_standard"))
        cfg = TrainConfig(epochs=2, batch_size=8, progress=False, metrics=("ndcg@10", "map"))
        result = Trainer(model, losses.get_loss("lambdarank"), cfg).fit(data, valid)
        runs.append((result, {k: v.clone() for k, v in result.model.state_dict().items()}))
    (r1, w1), (r2, w2) = runs
    assert [(h["train_loss"], h["valid"]) for h in r1.history] == [(h["train_loss"], h["valid"]) for h in r2.history]
    assert all(bool((w1[k] == w2[k]).all()) for k in w1)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_release_pages_leaves_the_resident_set(tmp_path):
    def rss_file_kb():
        with open("/proc/self/status") as fh:
            return next(int(line.split()[1]) for line in fh if line.startswith("RssFile:"))

    np.save(tmp_path / "x.npy", np.ones((4096, 2048), dtype=np.float32))  # 32 MiB
    x = np.load(tmp_path / "x.npy", mmap_mode="r")
    before = rss_file_kb()
    assert float(x.sum(dtype=np.float64)) == 4096 * 2048  # every page read
    touched = rss_file_kb()
    release_pages(x)
    after = rss_file_kb()
    assert touched - before > 24 << 10  # most of the 32 MiB became resident ...
    assert touched - after > 24 << 10  # ... and left the resident set again
    assert float(x[-1, -1]) == 1.0  # still readable
