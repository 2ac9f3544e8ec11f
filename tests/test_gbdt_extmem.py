"""XGBoost with external memory (``train_xgboost(external_memory=FOLDER)``, ``ltr gbdt --external-memory``):
an ``ExtMemQuantileDMatrix`` whose pages are files in a temporary folder, removed afterwards; the
model equals the one of the in-RAM ``QuantileDMatrix`` built from the same blocks."""

from __future__ import annotations

import gc
import json
import weakref

import numpy as np
import pytest

pytest.importorskip("pyarrow")
xgb = pytest.importorskip("xgboost")

import ltr.gbdt.streaming as streaming  # noqa: E402
import ltr.gbdt.xgboost as ltr_xgboost  # noqa: E402
from ltr.data import open_store  # noqa: E402
from ltr.data.streamed import open_streamed  # noqa: E402
from ltr.base.errors import LtrError  # noqa: E402
from ltr.gbdt.engines import predict_gbdt, train_gbdt  # noqa: E402

PARAMS = {"nthread": 1, "max_depth": 4}
KW = dict(objective="rank:ndcg", num_boost_round=15, early_stopping_rounds=5, seed=1)


@pytest.fixture(scope="module")
def files(gbdt_data_files):
    """train / valid / test as SVMlight, store and Parquet (tests/conftest.py)."""
    return gbdt_data_files


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of 500 rows: the training set becomes 9 or more pages of XGBoost's cache."""
    monkeypatch.setattr(streaming, "block_rows", lambda n_features: 500)


class CacheWatch:
    """Folders to look into when ``xgboost.train`` starts (``parents``), and what each held then:
    ``seen``, one {relative path: bytes} of its files per call and folder."""

    def __init__(self):
        self.parents: list = []
        self.seen: list[dict[str, int]] = []

    def look(self) -> None:
        for parent in self.parents:
            self.seen.append({p.relative_to(parent).as_posix(): p.stat().st_size for p in parent.rglob("*") if p.is_file()})


@pytest.fixture
def watch_cache(monkeypatch):
    watch, real = CacheWatch(), xgb.train

    def train(*args, **kwargs):
        watch.look()
        return real(*args, **kwargs)

    monkeypatch.setattr(xgb, "train", train)
    return watch


def _model(booster) -> bytes:
    return bytes(booster.save_raw(raw_format="json"))


@pytest.mark.parametrize("kind", ["store", "parquet"])
@pytest.mark.parametrize("valid_kind", ["streamed", "in memory"])
def test_external_memory_model_is_the_quantile_dmatrix_model(files, small_blocks, watch_cache, tmp_path, kind, valid_kind):
    """One thread, the same query-aligned 500-row batches: the same quantile sketch, hence the same
    cuts, and histograms summed over the same rows in the same order whether the index is one matrix
    or 9 pages read back from disk: the saved model is the same byte for byte, so are the curve and
    the scores. The pages existed while XGBoost trained, and are gone after."""
    s_train = open_streamed(files / f"train.{kind}", "train")
    if valid_kind == "streamed":
        s_valid = open_streamed(files / f"valid.{kind}", "valid", s_train.n_features)
    else:
        s_valid = open_store(files / "valid.store")
        s_valid = s_valid.with_features(np.array(s_valid.features))
    ram, info_ram = train_gbdt("xgboost", s_train, s_valid, PARAMS, **KW)
    watch_cache.parents.append(tmp_path)
    ext, info_ext = train_gbdt("xgboost", s_train, s_valid, PARAMS, external_memory=tmp_path, **KW)
    assert _model(ram) == _model(ext)
    assert info_ram["curve"] == info_ext["curve"] and info_ram["best_iteration"] == info_ext["best_iteration"]
    test = open_store(files / "test.store")
    np.testing.assert_array_equal(predict_gbdt("xgboost", ram, test.features), predict_gbdt("xgboost", ext, test.features))
    # while training: one folder xgboost-pages-*, train-* pages (and valid-* when the valid set is streamed)
    (during,) = watch_cache.seen
    folders = {name.split("/")[0] for name in during}
    assert len(folders) == 1 and folders.pop().startswith("xgboost-pages-")
    prefixes = sorted({name.split("/")[1].split("-")[0] for name in during})
    assert prefixes == (["train", "valid"] if valid_kind == "streamed" else ["train"])
    facts = info_ext["external_memory"]
    assert facts["cache_files"] == len(during) and facts["cache_bytes"] == sum(during.values())
    # the histogram index holds at least one byte per value of the 4,405 x 20 training matrix
    assert facts["cache_bytes"] >= s_train.n_items * s_train.n_features
    assert list(tmp_path.iterdir()) == []  # the cache folder is removed
    assert info_ram["external_memory"] is None


def test_the_cache_is_removed_when_xgboost_fails(files, watch_cache, tmp_path):
    """``tree_method=exact`` cannot train on quantised pages: XGBoost fails after the pages were
    written; the error is an LtrError and the cache folder is gone."""
    s_train = open_streamed(files / "train.store", "train")
    watch_cache.parents.append(tmp_path)
    with pytest.raises(LtrError, match="XGBoost refused"):
        train_gbdt("xgboost", s_train, None, {**PARAMS, "tree_method": "exact"}, external_memory=tmp_path, **KW)
    assert len(watch_cache.seen) == 1 and any(name.split("/")[1].startswith("train-") for name in watch_cache.seen[0])
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("tree_method", ["hist", "exact"])
def test_the_matrices_are_freed_with_the_collector_off(files, monkeypatch, tmp_path, tree_method):
    """Nothing refers to a matrix once training returns or fails: with the garbage collector off, every
    matrix built (the paged training set, the streamed validation set) is already freed when
    ``train_gbdt`` returns ("hist") or raises ("exact" refuses pages), and the cache folder is gone. A
    reference cycle that held one (a callback class made per call did) would keep it alive here."""
    built, real = [], ltr_xgboost._matrices

    def matrices(*args, **kwargs):
        pair = real(*args, **kwargs)
        built.extend(weakref.ref(m) for m in pair if m is not None)
        return pair

    monkeypatch.setattr(ltr_xgboost, "_matrices", matrices)
    s_train = open_streamed(files / "train.store", "train")
    s_valid = open_streamed(files / "valid.store", "valid", s_train.n_features)
    was_on = gc.isenabled()
    gc.disable()
    try:
        try:
            train_gbdt("xgboost", s_train, s_valid, {**PARAMS, "tree_method": tree_method}, external_memory=tmp_path, **KW)
        except LtrError:
            assert tree_method == "exact"
        assert len(built) == 2 and [ref() for ref in built] == [None, None]
    finally:
        if was_on:
            gc.enable()
    assert list(tmp_path.iterdir()) == []


def test_external_memory_refuses_what_it_cannot_page(files, tmp_path):
    in_memory = open_store(files / "train.store")
    in_memory = in_memory.with_features(np.array(in_memory.features))
    with pytest.raises(LtrError, match=r"training set is in memory .*ltr convert"):
        train_gbdt("xgboost", in_memory, None, PARAMS, external_memory=tmp_path, **KW)
    s_train = open_streamed(files / "train.store", "train")
    with pytest.raises(LtrError, match="option of the xgboost engine, not of lightgbm"):
        train_gbdt("lightgbm", s_train, None, {"num_threads": 1}, external_memory=tmp_path, num_boost_round=2)
    with pytest.raises(LtrError, match="option of the xgboost engine, not of catboost"):
        train_gbdt("catboost", s_train, None, {}, external_memory=tmp_path, num_boost_round=2)
    assert list(tmp_path.iterdir()) == []


def test_cli_external_memory(files, tmp_path, capsys):
    """``ltr gbdt --engine xgboost --external-memory`` on a store: the metrics of the run without it,
    to the last bit; summary.json says the pages were on disk; the run folder keeps no cache. An
    SVMlight --train, or another engine, is refused before anything is read or written."""
    from ltr.cli import main

    def run(out, *extra):
        argv = ["gbdt", "--engine", "xgboost", "--train", str(files / "train.store"), "--valid", str(files / "valid.store"),
                "--test", str(files / "test.parquet"), "--num-boost-round", "12", "--seed", "3", "--quiet",
                "--param", "nthread=1", "--out", str(out), *extra]  # fmt: skip
        assert main(argv) == 0
        return json.loads((out / "summary.json").read_text())

    plain = run(tmp_path / "plain")
    ext = run(tmp_path / "ext", "--external-memory")
    assert ext["metrics"] == plain["metrics"] and ext["best_iteration"] == plain["best_iteration"]
    assert plain["external_memory"] is None and ext["arguments"]["external_memory"] is True
    assert ext["external_memory"]["matrix"] == "ExtMemQuantileDMatrix" and ext["external_memory"]["cache_files"] == 2
    assert (tmp_path / "ext" / "xgboost.json").read_bytes() == (tmp_path / "plain" / "xgboost.json").read_bytes()
    assert not [p for p in (tmp_path / "ext").rglob("*") if "xgboost-pages" in p.name]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ext", "plain"]  # no partial folder left beside
    capsys.readouterr()

    svm = ["gbdt", "--engine", "xgboost", "--external-memory", "--train", str(files / "train.txt"),
           "--valid", str(files / "valid.store"), "--out", str(tmp_path / "svm")]  # fmt: skip
    assert main(svm) == 2
    assert "--external-memory: --train" in capsys.readouterr().err
    assert main(svm[:5] + [str(files / "train.store"), "--sort-by-query"] + svm[6:]) == 2
    assert "without --sort-by-query" in capsys.readouterr().err
    lgb = ["gbdt", "--external-memory", "--train", str(files / "train.store"), "--valid", str(files / "valid.store"),
           "--out", str(tmp_path / "lgb")]  # fmt: skip
    assert main(lgb) == 2
    assert "option of --engine xgboost" in capsys.readouterr().err
    assert not (tmp_path / "svm").exists() and not (tmp_path / "lgb").exists()
