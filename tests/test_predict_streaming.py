"""``ltr predict --data STORE|PARQUET`` scores in row blocks (ltr.models.predict.score_data): the
feature matrix is never read whole, and the output is the whole-file path's, byte for byte, for
GBDT and pointwise neural models; listwise models get blocks of whole queries."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("lightgbm")
torch = pytest.importorskip("torch")

import ltr.models.predict as predict_mod  # noqa: E402
import ltr.data.streamed as streamed_mod  # noqa: E402
from ltr.cli import main  # noqa: E402
from ltr.data import convert_to_store, load_svmlight, save_svmlight, to_parquet  # noqa: E402
from ltr.data.streamed import StreamedData, compact_labels, open_streamed, predict_in_blocks, predict_in_query_blocks  # noqa: E402
from ltr.data.synthetic import make_synthetic_splits  # noqa: E402
from ltr.gbdt.lightgbm import save_booster, train_lightgbm  # noqa: E402
from ltr.train.models import build_model, save_model  # noqa: E402


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A test split (200 queries, 2,249 rows, 12 features) as SVMlight, store and Parquet (row groups of
    300 rows, so Parquet's batches fall across the scoring blocks), and three model folders."""
    d = tmp_path_factory.mktemp("predict_stream")
    train, _, test = make_synthetic_splits(400, 12, mean_list_length=10, seed=4, valid_share=0.0001, test_share=0.5)
    save_svmlight(train, d / "train.txt")
    save_svmlight(test, d / "test.txt")
    convert_to_store(d / "test.txt", d / "test.store")
    to_parquet(test, d / "test.parquet", row_group_rows=300)
    booster, info = train_lightgbm(train, None, {"num_threads": 1}, num_boost_round=8, early_stopping_rounds=None)
    save_booster(booster, d / "gbdt", n_features=12, best_iteration=info["best_iteration"])
    torch.manual_seed(0)
    save_model(build_model({"type": "mlp", "n_features": 12, "hidden": [16, 8]}), d / "mlp")
    save_model(build_model({"type": "attention", "n_features": 12, "width": 8, "heads": 2}), d / "attention")
    return d


@pytest.fixture
def small_blocks(monkeypatch):
    """Scoring blocks of about 200 rows, the scorers' own batches 64 rows: about 11 blocks here."""
    import ltr.train.trainer as trainer

    monkeypatch.setattr(streamed_mod, "block_rows", lambda n_features, block_bytes=0: 200)
    monkeypatch.setattr(predict_mod, "SCORE_ROWS", 64)
    monkeypatch.setitem(trainer.predict_scores.__wrapped__.__kwdefaults__, "rows", 64)  # under torch.no_grad


def _refuse_whole_reads(monkeypatch):
    import ltr.data.files as files_mod
    import ltr.data.parquet as parquet_mod

    def refuse(*args, **kwargs):
        raise AssertionError("the whole matrix was read")

    monkeypatch.setattr(files_mod, "load_data_file", refuse)
    monkeypatch.setattr(parquet_mod, "_assemble", refuse)


def _predict(files, model, data, out, *extra):
    assert main(["predict", "--model", str(files / model), "--data", str(files / data), "--out", str(out), *extra]) == 0
    return out.read_bytes()


@pytest.mark.parametrize("model", ["gbdt", "mlp"])
def test_streamed_prediction_is_the_whole_file_prediction(files, tmp_path, monkeypatch, small_blocks, model):
    """The SVMlight file is read whole and scored in one call; the store and the Parquet file are
    scored in blocks (the whole-matrix readers made to fail): the same TSV scores, bit for bit, and
    for the store (no document ids, as the SVMlight file) the same TREC run file."""
    tsv = _predict(files, model, "test.txt", tmp_path / "whole.tsv", "--format", "tsv")
    run = _predict(files, model, "test.txt", tmp_path / "whole.run")
    _refuse_whole_reads(monkeypatch)
    assert _predict(files, model, "test.store", tmp_path / "store.tsv", "--format", "tsv") == tsv
    assert _predict(files, model, "test.parquet", tmp_path / "parquet.tsv", "--format", "tsv") == tsv
    assert _predict(files, model, "test.store", tmp_path / "store.run") == run
    assert len(tsv.splitlines()) == 2249 and len(set(tsv.splitlines())) > 1000  # real scores, not one constant


def test_streamed_listwise_prediction_gets_whole_queries(files, tmp_path, monkeypatch, small_blocks):
    """The context-aware scorer scores each query as a whole (a query cut in two would score
    otherwise): the blocks of whole queries give the one call's scores to float rounding."""
    whole = np.loadtxt(_predict(files, "attention", "test.txt", tmp_path / "whole.tsv", "--format", "tsv").splitlines())
    _refuse_whole_reads(monkeypatch)
    got = np.loadtxt(_predict(files, "attention", "test.parquet", tmp_path / "pq.tsv", "--format", "tsv").splitlines())
    np.testing.assert_allclose(got, whole, rtol=1e-6, atol=1e-6)


def test_predict_in_query_blocks_gives_each_call_whole_queries():
    """A scorer that centres each query's first feature: exact only if no query is cut and each
    block's offsets are right."""
    rng = np.random.default_rng(0)
    offsets = np.concatenate([[0], np.cumsum(rng.integers(1, 30, size=40))])
    x = rng.standard_normal((offsets[-1], 3)).astype(np.float32)

    def blocks(rows):
        for start in range(0, len(x), rows):
            yield start, x[start : start + rows]

    data = StreamedData(labels=np.zeros(len(x)), query_offsets=offsets, query_ids=np.arange(40), n_features=3, blocks=blocks)

    def centred(block, offs):
        lengths = np.diff(offs)
        means = np.add.reduceat(block[:, 0].astype(np.float64), offs[:-1]) / lengths
        return block[:, 0] - np.repeat(means, lengths)

    calls = []
    got = predict_in_query_blocks(lambda b, o: calls.append(len(b)) or centred(b, o), data, 50)
    np.testing.assert_array_equal(got, centred(x, offsets))
    assert len(calls) > 10 and max(calls) <= 50 + 29


def test_streamed_labels_are_held_compact_and_read_as_float64(files):
    ds = open_streamed(files / "test.store", "test")
    assert ds._labels.dtype == np.uint8 and ds.labels.dtype == np.float64
    np.testing.assert_array_equal(ds.labels, np.load(files / "test.store" / "labels.npy"))
    assert compact_labels([0.5, 3.0]).dtype == np.float32 and compact_labels([0.1, 300.0]).dtype == np.float64
    assert compact_labels([np.nan, 1.0]).dtype == np.float64 and compact_labels([256.0]).dtype == np.float32


def test_exact_blocks_hold_exactly_rows_rows_across_parquet_files(files, tmp_path):
    """A Parquet folder of two files: plain blocks end at the first file's end (a short block there),
    exact blocks are 64 rows each (the last the rest); both give the row-wise scores of the whole matrix."""
    test = load_svmlight(files / "test.txt")
    folder = tmp_path / "parts"
    folder.mkdir()
    to_parquet(test.subset(np.arange(100)), folder / "a.parquet")
    to_parquet(test.subset(np.arange(100, test.n_queries)), folder / "b.parquet")
    ds, whole = open_streamed(folder, "test"), test.features
    sizes = {True: [], False: []}
    for exact in (True, False):
        got = predict_in_blocks(lambda b: sizes[exact].append(len(b)) or b[:, 0] * 2.0 - b[:, 1], ds, 64, exact=exact)
        np.testing.assert_array_equal(got, whole[:, 0] * 2.0 - whole[:, 1])
    n, first = len(whole), int(test.query_offsets[100])
    assert sizes[True] == [64] * (n // 64) + ([n % 64] if n % 64 else [])
    assert first % 64 and sizes[False][first // 64] == first % 64 and sum(sizes[False]) == n
