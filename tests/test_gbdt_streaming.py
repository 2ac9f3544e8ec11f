"""GBDT engines on data read in row blocks (ltr.data.streamed, ltr.gbdt.streaming): the models equal
the in-memory ones bit for bit, the whole matrix is never read, and the resident set stays below the
in-memory run's."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("lightgbm")

import ltr.gbdt.streaming as streaming  # noqa: E402
from ltr.data import open_store  # noqa: E402
from ltr.data.streamed import RowReader, StreamedData, open_streamed, predict_in_blocks, query_blocks  # noqa: E402
from ltr.base.errors import LtrError  # noqa: E402
from ltr.gbdt.engines import predict_gbdt, train_gbdt  # noqa: E402
from ltr.gbdt.lightgbm import predict_booster, train_lightgbm  # noqa: E402


@pytest.fixture(scope="module")
def files(gbdt_data_files):
    """train / valid / test as SVMlight, store and Parquet (tests/conftest.py)."""
    return gbdt_data_files


def in_ram(path):
    ds = open_store(path)
    return ds.with_features(np.array(ds.features))


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of 500 rows: LightGBM's pushes, XGBoost's batches and the RowReader cross many boundaries."""
    monkeypatch.setattr(streaming, "block_rows", lambda n_features: 500)


# ---- reading rows in blocks -------------------------------------------------------------------
def _streamed(x, labels, offsets):
    def blocks(rows):
        for start in range(0, len(x), rows):
            yield start, x[start : start + rows]

    return StreamedData(labels=labels, query_offsets=offsets, query_ids=np.arange(len(offsets) - 1),
                        n_features=x.shape[1], blocks=blocks, name="toy")  # fmt: skip


def test_row_reader_serves_ranges_across_blocks_in_one_pass_when_read_forward():
    x = np.arange(40, dtype=np.float32).reshape(20, 2)
    data = _streamed(x, np.zeros(20), np.array([0, 3, 9, 10, 20]))
    reader = RowReader(data, 6)
    for a, b in [(0, 1), (2, 3), (5, 13), (13, 13), (13, 20)]:  # forward: one pass
        np.testing.assert_array_equal(reader.rows_between(a, b), x[a:b])
    assert reader.passes == 1
    np.testing.assert_array_equal(reader.rows_between(4, 7), x[4:7])  # backwards: a second pass
    assert reader.passes == 2
    with pytest.raises(IndexError):
        reader.rows_between(19, 21)
    with pytest.raises(LtrError, match="read in row blocks"):
        data.features  # noqa: B018


def test_query_blocks_end_at_query_boundaries():
    x = np.arange(40, dtype=np.float32).reshape(20, 2)
    data = _streamed(x, np.zeros(20), np.array([0, 3, 9, 10, 20]))
    cuts = [(a, b) for a, b, block in query_blocks(data, 7) if np.array_equal(block, x[a:b])]
    # at most 7 rows, or one query longer than that (rows 10..20)
    assert cuts == [(0, 3), (3, 10), (10, 20)]


def test_open_streamed_checks_what_load_data_file_checks(files, tmp_path):
    from ltr.data import load_parquet

    with pytest.raises(LtrError, match="only a store or a Parquet"):
        open_streamed(files / "train.txt", "train")
    with pytest.raises(LtrError, match="--valid .* has 20 features; 11 expected"):
        open_streamed(files / "valid.store", "valid", 11)
    streamed, ram = open_streamed(files / "valid.parquet", "valid"), load_parquet(files / "valid.parquet")
    for name in ("labels", "query_offsets", "query_ids", "feature_names"):
        np.testing.assert_array_equal(getattr(streamed, name), getattr(ram, name))
    import pyarrow.parquet as pq

    table = pq.read_table(files / "valid.parquet")
    pq.write_table(table.take(list(range(5, table.num_rows)) + list(range(5))), tmp_path / "split.parquet")
    with pytest.raises(LtrError, match="not contiguous"):  # the first query comes back at the end
        open_streamed(tmp_path / "split.parquet", "valid")


def test_predict_in_blocks_equals_one_call(files):
    ds = in_ram(files / "test.store")
    streamed = open_streamed(files / "test.parquet", "test")
    row_wise = lambda b: 2.0 * b[:, 0] - b[:, 3]  # noqa: E731  (elementwise: exact whatever the block)
    np.testing.assert_array_equal(predict_in_blocks(row_wise, streamed, 77), row_wise(ds.features))


# ---- the models equal the in-memory ones --------------------------------------------------------
@pytest.mark.parametrize("kind", ["store", "parquet"])
@pytest.mark.parametrize("seed", [0, 7])
def test_streamed_lightgbm_model_is_the_in_memory_model(files, small_blocks, kind, seed):
    """LightGBM samples 1,000 of the 4,405 rows for its bins here: the streamed dataset draws the same
    rows only because it is given the data seed LightGBM derives from ``seed`` (lightgbm_data_seed);
    with it the model text is identical, not merely close. The streamed run trains column-wise by
    default (STREAMED_LIGHTGBM_DEFAULTS): the in-memory run is given the same setting."""
    train, valid = in_ram(files / "train.store"), in_ram(files / "valid.store")
    s_train = open_streamed(files / f"train.{kind}", "train")
    s_valid = open_streamed(files / f"valid.{kind}", "valid", s_train.n_features)
    params = {"num_threads": 1, "bin_construct_sample_cnt": 1000, "num_leaves": 15}
    kw = dict(num_boost_round=25, early_stopping_rounds=5, seed=seed, record_train=True)
    a, info_a = train_lightgbm(train, valid, {**params, **streaming.STREAMED_LIGHTGBM_DEFAULTS}, **kw)
    b, info_b = train_lightgbm(s_train, s_valid, params, **kw)
    assert info_b["params"]["force_col_wise"] is True and info_b["params"]["force_row_wise"] is False
    assert a.model_to_string() == b.model_to_string()
    assert info_a["evals_result"] == info_b["evals_result"] and info_a["best_iteration"] == info_b["best_iteration"]
    np.testing.assert_array_equal(predict_in_blocks(lambda x: predict_booster(b, x), s_valid, 333), predict_booster(a, valid.features))


def test_streamed_lightgbm_takes_the_users_histogram_setting(files, small_blocks):
    """Column-wise is only a default: ``force_row_wise=True`` from the user trains row-wise, and the
    model is then the in-memory default run's (the toolkit's ``force_row_wise=true``), text and all;
    an in-memory set gets no streamed default."""
    train, s_train = in_ram(files / "train.store"), open_streamed(files / "train.store", "train")
    params = {"num_threads": 2, "bin_construct_sample_cnt": 1000, "num_leaves": 15}
    a, info_a = train_lightgbm(train, None, params, num_boost_round=10, seed=3)
    b, info_b = train_lightgbm(s_train, None, {**params, "force_row_wise": True}, num_boost_round=10, seed=3)
    assert "force_col_wise" not in info_a["params"] and info_b["params"]["force_row_wise"] is True
    assert a.model_to_string() == b.model_to_string()
    assert streaming.lightgbm_streamed_defaults(train, {}) == {}
    assert streaming.lightgbm_streamed_defaults(s_train, {"force_col_wise": False}) == {}
    # in memory, force_col_wise alone overrides the row-wise default (LightGBM refuses both true) and
    # trains as the streamed set's column-wise default does
    c, info_c = train_lightgbm(train, None, {**params, "force_col_wise": "true"}, num_boost_round=10, seed=3)
    d, _ = train_lightgbm(s_train, None, params, num_boost_round=10, seed=3)
    assert info_c["params"]["force_row_wise"] is False and c.model_to_string() == d.model_to_string()


def test_train_set_keeps_only_lightgbms_own_labels(files):
    """lightgbm_train_set returns a constructed Dataset without its Python-side copy of the labels
    (4 bytes a row less while training); LightGBM's C++ copy is intact and comes back on request."""
    s_train = open_streamed(files / "train.store", "train")
    labels = s_train.labels.astype(np.float32)
    ds = streaming.lightgbm_train_set(s_train, labels, np.diff(s_train.query_offsets), {"num_threads": 1, "seed": 0})
    assert ds.label is None and ds.data is None  # no labels nor rows kept on the Python side
    np.testing.assert_array_equal(ds.get_label(), labels)
    assert ds.num_data() == 4405 and ds.get_params()["data_random_seed"] == streaming.lightgbm_data_seed(0)


def test_weighted_streamed_train_set_prints_nothing(files, capfd):
    """A weighted set built from the Sequence with verbosity -1 writes nothing: LightGBM's own
    construction from a sample resets its log level without the verbosity and printed "[LightGBM]
    [Info] Calculating query weights..." on stdout when the weights were set."""
    s_train = open_streamed(files / "train.store", "train")
    weights = np.linspace(0.5, 2.0, s_train.n_items)
    capfd.readouterr()
    ds = streaming.lightgbm_train_set(s_train, s_train.labels.astype(np.float32), np.diff(s_train.query_offsets),
                                      {"num_threads": 1, "seed": 0, "verbosity": -1}, weight=weights)  # fmt: skip
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")
    np.testing.assert_allclose(ds.get_weight(), weights, rtol=1e-6)


def test_column_sample_is_lightgbms_own_sample(files):
    """The column-wise sample of the streamed dataset holds exactly what LightGBM's own Sequence
    construction gathers (its private ``_Dataset__sample``): the same values and positions per column."""
    import lightgbm as lgb

    s_train = open_streamed(files / "train.store", "train")
    assert streaming.lightgbm_dataset_class(s_train) is not lgb.Dataset  # this LightGBM has the methods it needs
    seq = streaming.lightgbm_data(s_train, 700)
    x = in_ram(files / "train.store").features.copy()
    x[::3, 2] = 0.0  # a column with zeros, which LightGBM leaves out of the sample
    seq.reader.data._blocks = lambda rows: ((a, x[a : a + rows]) for a in range(0, len(x), rows))
    ds = lgb.Dataset(seq, params={"bin_construct_sample_cnt": 1500, "data_random_seed": 3, "verbosity": -1})
    indices = np.asarray(ds._create_sample_indices(total_nrow=len(seq)), dtype=np.int64)
    theirs = ds._Dataset__sample(seqs=[seq], total_nrow=len(seq))
    ours = streaming._column_sample(seq, indices)
    assert len(indices) == 1500 and len(ours[0]) == x.shape[1]
    for mine, their in zip(ours, theirs):
        for a, b in zip(mine, their):
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a, b)
    assert len(ours[0][2]) < 1500


def test_lightgbm_sample_seed_matters(files, small_blocks):
    """The check above can fail: without the derived data seed the 1,000 sampled rows, and the bins, differ."""
    train = in_ram(files / "train.store")
    s_train = open_streamed(files / "train.store", "train")
    params = {"num_threads": 1, "bin_construct_sample_cnt": 1000, "data_random_seed": 1}  # LightGBM's default data seed
    a, _ = train_lightgbm(train, None, {**params, "data_random_seed": streaming.lightgbm_data_seed(0)}, num_boost_round=5, seed=0)
    b, _ = train_lightgbm(s_train, None, params, num_boost_round=5, seed=0)
    assert a.model_to_string() != b.model_to_string()


@pytest.mark.parametrize("kind", ["store", "parquet"])
def test_streamed_xgboost_model_is_the_in_memory_model(files, small_blocks, kind):
    """A QuantileDMatrix from 500-row, query-aligned batches against a DMatrix of the whole matrix:
    on data this small XGBoost's quantile sketch keeps every distinct value, so the cuts, and the
    saved model, are the same byte for byte (on large data the sketches are summaries merged across
    batches and could differ within the sketch's error)."""
    pytest.importorskip("xgboost")
    train, valid = in_ram(files / "train.store"), in_ram(files / "valid.store")
    s_train = open_streamed(files / f"train.{kind}", "train")
    s_valid = open_streamed(files / f"valid.{kind}", "valid", s_train.n_features)
    kw = dict(objective="rank:ndcg", num_boost_round=15, early_stopping_rounds=5, seed=1)
    a, info_a = train_gbdt("xgboost", train, valid, {"nthread": 1, "max_depth": 4}, **kw)
    b, info_b = train_gbdt("xgboost", s_train, s_valid, {"nthread": 1, "max_depth": 4}, **kw)
    assert bytes(a.save_raw(raw_format="json")) == bytes(b.save_raw(raw_format="json"))
    assert info_a["curve"] == info_b["curve"]
    streamed_scores = predict_in_blocks(lambda x: predict_gbdt("xgboost", b, x), s_valid, 333)
    np.testing.assert_array_equal(streamed_scores, predict_gbdt("xgboost", a, valid.features))


# ---- the command ------------------------------------------------------------------------------
@pytest.mark.parametrize("engine", ["lightgbm", "xgboost"])
def test_cli_gbdt_on_stores_never_reads_the_whole_matrix(files, tmp_path, monkeypatch, engine):
    """``ltr gbdt`` on a store (train, valid) and Parquet (test) with every whole-matrix reader made
    to fail, and the same run on the SVMlight files: the same test metrics, to the last bit."""
    pytest.importorskip(engine)
    import ltr.data.files as files_mod
    import ltr.data.parquet as parquet_mod
    from ltr.cli import main

    def run(train, valid, test, out):
        argv = ["gbdt", "--engine", engine, "--train", str(train), "--valid", str(valid), "--test", str(test),
                "--num-boost-round", "20", "--seed", "2", "--out", str(out), "--quiet", "--param",
                "num_threads=1" if engine == "lightgbm" else "nthread=1"]  # fmt: skip
        assert main(argv) == 0
        return json.loads((out / "summary.json").read_text())

    ram = run(files / "train.txt", files / "valid.txt", files / "test.txt", tmp_path / "ram")

    def refuse(*args, **kwargs):
        raise AssertionError("the whole matrix was read")

    monkeypatch.setattr(files_mod, "load_data_file", refuse)
    monkeypatch.setattr(parquet_mod, "_assemble", refuse)
    streamed = run(files / "train.store", files / "valid.store", files / "test.parquet", tmp_path / "streamed")
    assert streamed["metrics"] == ram["metrics"] and streamed["best_iteration"] == ram["best_iteration"]
    assert streamed["data"]["train"]["n_items"] == ram["data"]["train"]["n_items"] == 4405


# ---- memory -----------------------------------------------------------------------------------
_RSS_CHILD = r"""
import os, sys, traceback
import numpy as np
import lightgbm  # the libraries both trainings use, imported once: each training runs in a child forked below
from ltr.data import open_store
import ltr.data.files  # the streamed reader imports it
from ltr.data.streamed import open_streamed
from ltr.gbdt.lightgbm import train_lightgbm
import ltr.gbdt.streaming
ltr.gbdt.streaming.block_rows = lambda n_features: 10_000  # 4 MB blocks (the default, 64 MB, is the whole matrix here)
path = sys.argv[1]
for how in sys.argv[2:]:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            ds = open_streamed(path, "train") if how == "streamed" else open_store(path)
            train_lightgbm(ds, None, {"num_threads": 1, "bin_construct_sample_cnt": 5000}, num_boost_round=2)
            # VmHWM, not ru_maxrss: getrusage keeps the parent's peak across fork + exec; VmHWM counts the
            # pages this child maps, from the imports it inherits onwards
            os.write(write, next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM:")).encode())
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush(), sys.stderr.flush()
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as answer:
        print(how, int(answer.read() or 0) * 1024, flush=True)
    os.waitpid(pid, 0)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="peak RSS as Linux reports it")
def test_streamed_training_peak_rss_stays_below_the_matrix(tmp_path):
    """150,000 x 100 features (60 MB): training from the memory-mapped store in memory maps every page
    (the peak holds the matrix); streamed, the pages are released block by block and the peak is at
    least 0.6 x the matrix lower."""
    from ltr.data.blocks import Block
    from ltr.data.store import StoreWriter

    class Source:
        name, feature_names, n_features = "synthetic", None, 100

        def describe(self, row):
            return f"row {row}"

        def error_at(self, row, message):
            return RuntimeError(message)

    rng = np.random.default_rng(0)
    with StoreWriter(tmp_path / "big.store", Source()) as w:
        for start in range(0, 150_000, 25_000):
            x = rng.standard_normal((25_000, 100), dtype=np.float32)
            w.append(Block(features=x, labels=(x[:, 0] > 0).astype(float), query_keys=np.arange(start, start + 25_000) // 50,
                           positions=np.arange(start, start + 25_000)))  # fmt: skip
        w.close()
    # one interpreter imports LightGBM and the readers, then trains in a forked child per way (one after the other)
    out = subprocess.run([sys.executable, "-c", _RSS_CHILD, str(tmp_path / "big.store"), "mapped", "streamed"], check=True,
                         capture_output=True, text=True, env={**__import__("os").environ, "OMP_NUM_THREADS": "1"})  # fmt: skip
    peaks = {how: int(value) for how, value in (line.split() for line in out.stdout.splitlines() if line.startswith(("mapped ", "streamed ")))}
    assert sorted(peaks) == ["mapped", "streamed"] and all(peaks.values()), out.stderr
    matrix = 150_000 * 100 * 4
    assert peaks["streamed"] < peaks["mapped"] - 0.6 * matrix, peaks
