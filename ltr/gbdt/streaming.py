"""The GBDT engines on data read in row blocks (:class:`ltr.data.streamed.StreamedData`): a store or a
Parquet file/folder larger than RAM, whose [N, F] float matrix is never held.

LightGBM. ``lgb.Dataset`` takes a ``lightgbm.Sequence`` (random access by row and by slice):
:func:`lightgbm_data` gives it one backed by a :class:`~ltr.data.streamed.RowReader`. LightGBM then
reads the rows twice, in increasing order: (1) its bin sample, ``bin_construct_sample_cnt`` rows
(default 200,000) at the indices LightGBM's C++ side draws with ``data_random_seed`` (given explicitly here, as LightGBM
derives it from ``seed``: :func:`lightgbm_dataset_params`) — the same indices and the same non-zero
filter as for a matrix in memory (``LGBM_DatasetCreateFromMats``), so the bin bounds, and the model,
are those of the in-memory run (tests/test_gbdt_streaming.py checks the model text is identical); (2) batches of ``batch_size`` rows
pushed into the binned dataset (``LGBM_DatasetPushRows``). A validation set built with
``reference=train`` takes the training set's bins and only pushes. Peak memory: LightGBM's binned
dataset, the sample (about ``sample_cnt x F`` values, twice while LightGBM transposes it), one block.
In training (``train_lightgbm``): column-wise histograms by default
(:func:`lightgbm_streamed_defaults`: no row-major copy of the bins), and no copy of the training
labels beside LightGBM's own (:func:`lightgbm_train_set`); what remains is LightGBM's training
state, about 40 bytes a row (docs/benchmarks.md).

XGBoost. :func:`xgboost_matrix` builds a ``QuantileDMatrix`` from an ``xgboost.DataIter`` that hands
XGBoost one block at a time (features, the gains as labels, ``qid`` = the query's position): XGBoost
sketches the quantiles over the blocks, then quantises each block into its histogram index (one
byte per value for ``max_bin`` <= 256); the float matrix is never built. Blocks end at query
boundaries (:func:`ltr.data.streamed.query_blocks`), so a query is never split between two of
XGBoost's batches. A validation matrix takes the training matrix's cuts (``ref=``).

XGBoost, external memory (``cache_prefix``). The same iterator builds an ``ExtMemQuantileDMatrix``:
the same sketch and cuts, but each batch's histogram index becomes a page written to a cache file
(``cache_prefix`` + XGBoost's suffix; read back through ``mmap`` on the CPU) instead of one matrix
in RAM, and training reads the pages in turn for every histogram. Only the features are paged:
labels and ``qid`` are concatenated in memory over the batches (XGBoost's ``MetaInfo``), so ranking
sees whole queries whatever the pages; ``qid`` (the query's position) is non-decreasing over the
batches, as XGBoost requires, and the query-aligned blocks never split a query between pages
anyway. XGBoost's other external-memory knobs (``on_host``, ``min_cache_page_bytes``,
``max_quantile_batches``, ``extmem_single_page``) are for GPU training and are left at their
defaults; the page size is the block size (``rows``).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ltr.data.streamed import RowReader, block_rows, is_streamed, query_blocks

__all__ = ["lightgbm_data", "lightgbm_dataset_class", "lightgbm_data_seed", "lightgbm_dataset_params", "lightgbm_streamed_defaults",
           "lightgbm_train_set", "xgboost_matrix", "any_streamed"]


def any_streamed(*datasets) -> bool:
    return any(ds is not None and is_streamed(ds) for ds in datasets)


_SEED_KEYS = ("seed", "random_seed", "random_state")  # LightGBM's names of seed
_DATA_SEED_KEYS = ("data_random_seed", "data_seed")


def lightgbm_data_seed(seed: int) -> int:
    """The ``data_random_seed`` LightGBM derives from ``seed``: the first draw of its generator
    (x <- 214013 x + 2531011 mod 2^32; a draw is bits 16..30 of x) modulo 32767.

    LightGBM's C++ side derives it when it parses ``seed``; the Python side of a ``Sequence`` draws
    the bin sample from the dataset's own parameters, which leave ``seed`` out, so without this value
    it would sample other rows than the run in memory. (A test pins that the two agree.)

    >>> lightgbm_data_seed(0), lightgbm_data_seed(7)
    (38, 61)
    """
    x = (214013 * (int(seed) & 0xFFFFFFFF) + 2531011) & 0xFFFFFFFF
    return ((x >> 16) & 0x7FFF) % 32767


def lightgbm_dataset_params(ds, params: dict[str, Any]) -> dict[str, Any]:
    """Parameters for the training ``lgb.Dataset`` of ``ds``: for a streamed set whose ``params`` name a
    seed but no data seed, the ``data_random_seed`` that seed gives (:func:`lightgbm_data_seed`), so
    that the bin sample is the one LightGBM draws for the matrix in memory."""
    if not is_streamed(ds) or any(k in params for k in _DATA_SEED_KEYS):
        return {}
    seed = next((params[k] for k in _SEED_KEYS if k in params), None)
    return {} if seed is None else {"data_random_seed": lightgbm_data_seed(int(seed))}


STREAMED_LIGHTGBM_DEFAULTS: dict[str, Any] = {"force_row_wise": False, "force_col_wise": True}


def lightgbm_streamed_defaults(ds, params: dict[str, Any]) -> dict[str, Any]:
    """Defaults for training LightGBM on a streamed ``ds`` (data larger than RAM): column-wise
    histograms, :data:`STREAMED_LIGHTGBM_DEFAULTS`, unless ``params`` (the user's) name
    ``force_row_wise`` or ``force_col_wise``; ``{}`` for a data set in memory.

    Why: with row-wise histograms (the toolkit's default in memory, ``force_row_wise=true``) and
    more than one thread, LightGBM keeps in training a second, row-major copy of the bins (its
    multi-value bin: about N x F bytes more, as much as the binned dataset itself); column-wise it
    reads the dataset's own columns. The trees are grown from histograms summed in another order, so
    the model can differ in the last bits from the row-wise one; the in-memory run with
    ``force_col_wise=true`` gives the streamed model exactly (tests/test_gbdt_streaming.py).
    """
    if not is_streamed(ds) or any(k in params for k in STREAMED_LIGHTGBM_DEFAULTS):
        return {}
    return dict(STREAMED_LIGHTGBM_DEFAULTS)


def lightgbm_train_set(ds, labels: np.ndarray, group: np.ndarray, params: dict[str, Any], **kwargs):
    """The training ``lgb.Dataset`` of ``ds``, constructed with the training ``params`` (the ones
    ``lgb.train`` gets: it then only checks them), with the bins' data seed of a streamed set
    (:func:`lightgbm_dataset_params`).

    Once constructed the Dataset holds LightGBM's binned data and a float32 copy of the labels on the
    C++ side; its Python-side copy of the labels (``Dataset.label``, one more float32 a row) is
    dropped (``get_label()`` fetches it again when asked). The caller should keep no reference to
    ``labels`` either: then the only labels left in memory during training are LightGBM's own.
    """
    params = {**{"verbosity": -1, **lightgbm_dataset_params(ds, params)}, **params}
    dataset = lightgbm_dataset_class(ds)(lightgbm_data(ds), label=labels, group=group, params=params, free_raw_data=True, **kwargs)
    del labels
    dataset.construct()
    dataset.label = None
    return dataset


def lightgbm_data(ds, rows: int | None = None):
    """What ``lgb.Dataset`` is given as ``data``: the [N, F] array of a data set in memory, or a
    ``lightgbm.Sequence`` reading a streamed one in blocks of ``rows`` rows (default about 64 MB)."""
    if not is_streamed(ds):
        return np.asarray(ds.features)
    return _sequence_class()(ds, block_rows(ds.n_features) if rows is None else int(rows))


@functools.cache
def _sequence_class():
    import lightgbm as lgb

    class BlockSequence(lgb.Sequence):
        """Rows of a StreamedData for LightGBM: ``seq[i]`` a row (float64, exact: the values are
        float32), ``seq[a:b]`` rows (float32), ``batch_size`` the rows LightGBM pushes at a time."""

        def __init__(self, data, rows: int):
            self.reader = RowReader(data, rows)
            self.batch_size = int(rows)
            self.n = data.n_items

        def __len__(self) -> int:
            return self.n

        def __getitem__(self, index):
            if isinstance(index, slice):
                start, stop, step = index.indices(self.n)
                if step != 1:
                    raise IndexError("a stepped slice of a streamed data set")
                return self.reader.rows_between(start, max(start, stop))
            i = int(index) + (self.n if int(index) < 0 else 0)
            return self.reader.rows_between(i, i + 1)[0].astype(np.float64)  # LightGBM's sample takes doubles

    return BlockSequence


def lightgbm_dataset_class(ds):
    """``lgb.Dataset``, or for a streamed ``ds`` a subclass whose construction from the Sequence
    samples column-wise (:func:`_column_sample`): the same sample, the same bins, less memory.

    LightGBM's own construction from a Sequence gathers its bin sample as a list of row arrays, then
    one [S, F] array, then a filtered copy of each column: about 2.5 x S x F doubles at the peak
    (545 MB for the default 200,000 rows of 136 features), the largest term of a streamed run's
    memory. The subclass reads the same rows (LightGBM's ``_create_sample_indices``) block by block
    into one [F, S] float64 array whose rows are the columns LightGBM takes (views; a column with
    zeros, which LightGBM leaves out of the sample, is compressed): S x F doubles. Where this
    LightGBM lacks the methods it relies on, LightGBM's own construction is used.
    """
    import lightgbm as lgb

    if not is_streamed(ds):
        return lgb.Dataset
    return _block_dataset_class()


@functools.cache
def _block_dataset_class():
    import lightgbm as lgb

    needed = ("_Dataset__init_from_seqs", "_init_from_sample", "_init_from_ref_dataset", "_push_rows", "_create_sample_indices")
    if not all(hasattr(lgb.Dataset, name) for name in needed):
        return lgb.Dataset

    class BlockDataset(lgb.Dataset):
        _sampling = False

        def _init_from_sample(self, *args, **kwargs):
            # LightGBM's Dataset.get_params leaves the verbosity out, and the native constructor from a
            # sample (LGBM_DatasetCreateFromSampledColumn) resets the library's log level from the params
            # it is given: without the verbosity, to Info, and "Calculating query weights..." then reaches
            # stdout when the weights are set, even with verbosity -1. So get_params adds it for this call
            # only (elsewhere a validation set compares its params with this one's).
            self._sampling = True
            try:
                return super()._init_from_sample(*args, **kwargs)
            finally:
                self._sampling = False

        def get_params(self) -> dict[str, Any]:
            params = super().get_params()
            verbosity = _verbosity(self.params or {}) if self._sampling else None
            return params if verbosity is None else {**params, "verbosity": verbosity}

        # called by lgb.Dataset.construct: by position in LightGBM 4.1, by keyword in 4.7 (both accepted)
        def _Dataset__init_from_seqs(self, seqs, ref_dataset=None):
            if len(seqs) != 1 or not isinstance(seqs[0], _sequence_class()):
                return lgb.Dataset._Dataset__init_from_seqs(self, seqs=seqs, ref_dataset=ref_dataset)
            seq = seqs[0]
            if ref_dataset is not None:
                self._init_from_ref_dataset(len(seq), ref_dataset)
            else:
                indices = np.asarray(self._create_sample_indices(total_nrow=len(seq)), dtype=np.int64)
                values, rows = _column_sample(seq, indices)
                self._init_from_sample(values, rows, len(indices), len(seq))
                del values, rows  # the sample (S x F doubles) is not needed while the rows are pushed
            for start in range(0, len(seq), seq.batch_size):
                self._push_rows(seq[start : start + seq.batch_size])
            return self

    return BlockDataset


def _verbosity(params: dict[str, Any]) -> Any:
    """The value of ``verbosity`` (or of one of its LightGBM aliases) in ``params``; None when absent."""
    for name in ("verbosity", "verbose"):
        if name in params:
            return params[name]
    return None


def _column_sample(seq, indices: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """LightGBM's bin sample of rows ``indices`` (increasing): per column, the values LightGBM keeps
    (|v| > 1e-35 or NaN) as float64 and their positions in the sample as int32."""
    import lightgbm as lgb

    threshold = getattr(lgb.basic, "ZERO_THRESHOLD", 1e-35)
    n_features = seq.reader.data.n_features
    sample = np.empty((n_features, len(indices)), dtype=np.float64)  # row j: column j of the sample
    done = 0
    for start in range(0, len(seq), seq.batch_size):
        stop = min(start + seq.batch_size, len(seq))
        end = int(np.searchsorted(indices, stop))
        if end > done:
            sample[:, done:end] = seq[start:stop][indices[done:end] - start].T
            done = end
    positions = np.arange(len(indices), dtype=np.int32)
    values, rows = [], []
    for col in sample:
        keep = (np.abs(col) > threshold) | np.isnan(col)
        values.append(col if keep.all() else col[keep])
        rows.append(positions if keep.all() else positions[keep])
    return values, rows


def xgboost_matrix(ds, labels: np.ndarray, *, quantile: bool, ref=None, max_bin: int | None = None,
                   nthread: int | None = None, rows: int | None = None, cache_prefix: str | None = None):  # fmt: skip
    """XGBoost's matrix of ``ds`` with ``labels`` (the gains) and ``qid`` (the query's position):
    ``xgb.DMatrix`` of the array in memory; with ``quantile``, a ``QuantileDMatrix`` (cuts from
    ``ref`` when given), built from an iterator of query-aligned blocks when ``ds`` is streamed;
    with ``cache_prefix`` (a streamed ``ds`` only), an ``ExtMemQuantileDMatrix`` whose pages are
    written to files whose names start with ``cache_prefix``."""
    import xgboost as xgb

    from ltr.base.errors import LtrError
    from ltr.gbdt.common import query_ids

    if cache_prefix is not None and not is_streamed(ds):
        raise LtrError("XGBoost's external memory reads a data set in row blocks (a store or Parquet data); "
                       "this one is in memory")  # fmt: skip
    if not is_streamed(ds):
        x, qid = np.asarray(ds.features), query_ids(ds)
        if not quantile:
            return xgb.DMatrix(x, label=labels, qid=qid, nthread=nthread)
        return xgb.QuantileDMatrix(x, label=labels, qid=qid, ref=ref, max_bin=max_bin, nthread=nthread)
    rows = block_rows(ds.n_features) if rows is None else int(rows)
    blocks = _iterator_class()(ds, labels, rows, cache_prefix)
    if cache_prefix is not None:
        return xgb.ExtMemQuantileDMatrix(blocks, ref=ref, max_bin=max_bin, nthread=nthread)
    return xgb.QuantileDMatrix(blocks, ref=ref, max_bin=max_bin, nthread=nthread)


@functools.cache
def _iterator_class():
    import xgboost as xgb

    class BlockIterator(xgb.DataIter):
        """Query-aligned blocks of a StreamedData, with their labels and qid (XGBoost calls ``next``
        until it returns False, then ``reset``; it passes over the data twice). ``cache_prefix``:
        where an external-memory matrix writes its pages (None for one in RAM)."""

        def __init__(self, data, labels: np.ndarray, rows: int, cache_prefix: str | None = None):
            # labels as given and qid block by block: no float32 nor int64 copy of a row count held
            self.data, self.labels, self.rows = data, np.asarray(labels), int(rows)
            self.offsets = np.asarray(data.query_offsets, dtype=np.int64)
            self.blocks: Any = None
            super().__init__(cache_prefix=cache_prefix, release_data=True)

        def next(self, input_data) -> bool:
            if self.blocks is None:
                self.blocks = query_blocks(self.data, self.rows)
            block = next(self.blocks, None)
            if block is None:
                return False
            a, b, x = block
            first, last = np.searchsorted(self.offsets, [a, b])  # the block holds queries first..last-1 whole
            qid = np.repeat(np.arange(first, last, dtype=np.int64), np.diff(self.offsets[first : last + 1]))
            input_data(data=x, label=self.labels[a:b].astype(np.float32), qid=qid)
            return True

        def reset(self) -> None:
            self.blocks = None

    return BlockIterator
