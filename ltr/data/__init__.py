"""ltr.data: ranking data sets and their files.

The flat data set type (:mod:`~ltr.data.dataset`), the SVMlight/LETOR reader and writer
(:mod:`~ltr.data.svmlight`) with its binary cache (:mod:`~ltr.data.cache`), TREC run and qrels files
(:mod:`~ltr.data.trec`), Parquet files and data frames (:mod:`~ltr.data.parquet`, through pyarrow),
memory-mapped stores for data larger than RAM (:mod:`~ltr.data.store`), one-value-per-line column files (:mod:`~ltr.data.columns`), feature
normalisation (:mod:`~ltr.data.normalize`), the seeded synthetic generator (:mod:`~ltr.data.synthetic`)
and padded torch batches (:mod:`~ltr.data.batching`, imported on first use so that reading data does
not import torch). ``ltr.data`` imports nothing from ``ltr.train`` or above.
"""

from ltr.data.cache import default_cache_dir
from ltr.data.columns import read_id_column, read_number_column
from ltr.data.dataset import RankingDataset, concat_datasets, feature_names_of, split_by_query
from ltr.data.normalize import Normalizer
from ltr.data.parquet import dataset_from_frame, load_parquet, to_frame, to_parquet
from ltr.data.store import convert_to_store, open_store
from ltr.data.svmlight import load_svmlight, read_query_file, save_svmlight
from ltr.data.synthetic import make_mslr_like, make_synthetic_splits
from ltr.data.trec import read_qrels, read_run, write_qrels, write_run

_BATCHING = ("PaddedBatch", "BucketBatchSampler", "iterate_batches", "make_batch", "padding_ratio", "pad_flat")

__all__ = [
    "RankingDataset", "concat_datasets", "split_by_query", "feature_names_of",
    "load_svmlight", "save_svmlight", "read_query_file", "default_cache_dir",
    "load_parquet", "dataset_from_frame", "to_frame", "to_parquet", "open_store", "convert_to_store",
    "read_qrels", "read_run", "write_qrels", "write_run",
    "read_number_column", "read_id_column",
    "Normalizer", "make_mslr_like", "make_synthetic_splits",
    *_BATCHING,
]  # fmt: skip


def __getattr__(name: str):
    if name in _BATCHING:
        from ltr.data import batching

        return getattr(batching, name)
    raise AttributeError(f"module 'ltr.data' has no attribute {name!r}")
