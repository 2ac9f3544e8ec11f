"""Scoring new data with any model folder: features and query ids in, one score per row out.

Served data has no labels, so nothing here needs them: a Parquet or CSV table without the label
column is read with placeholder labels (``labels="optional"``, :func:`ltr.data.files.is_labelled` is
then False) and an SVMlight file's label field is read and ignored. The feature columns of a table
are picked by the model's feature names when it has them (never by position), and a data set whose
feature count is not the model's is refused (:func:`ltr.models.folder.check_width`: a narrower file
is never zero-padded).

Each score maps back to its row: :func:`predict` returns the rows in the data's order with the row
index, the query id, the document id (the ``doc_id_column``'s, else the row's index within its
query, :func:`doc_ids_of`), the rank within the query and the score.

>>> import numpy as np
>>> from ltr.data import RankingDataset
>>> doc_ids_of(RankingDataset(np.zeros((3, 1)), [0, 0, 0], [0, 2, 3], [5, 6])).tolist()
['0', '1', '0']
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

__all__ = ["SCORE_ROWS", "open_for_scoring", "score_data", "doc_ids_of", "ranks_in_queries", "predict"]

SCORE_ROWS = 65536  # the rows load_scorer's scorers take at a time (ltr.train.trainer.predict_scores, the GBDT scorer)


def doc_ids_of(ds) -> np.ndarray:
    """The data set's ``doc_ids``, or each row's index within its query ("0", "1", ...)."""
    if getattr(ds, "doc_ids", None) is not None:
        return np.asarray(ds.doc_ids)
    offsets = np.asarray(ds.query_offsets)
    return (np.arange(offsets[-1]) - np.repeat(offsets[:-1], np.diff(offsets))).astype(str)


def ranks_in_queries(scores: np.ndarray, query_offsets) -> np.ndarray:
    """[N] 1-based rank of each row within its query by descending score (ties keep row order)."""
    import metrics

    off = np.asarray(query_offsets)
    perm = metrics.rank_order(scores, off)
    ranks = np.empty(len(scores), dtype=np.int64)
    ranks[perm] = np.arange(len(scores)) - np.repeat(off[:-1], np.diff(off)) + 1
    return ranks


def open_for_scoring(path: str | os.PathLike, model: str | os.PathLike, options=None, *, option: str = "data",
                     zero_based: bool = False, query_file: str | os.PathLike | None = None):
    """``--<option> path`` read to be scored by the model folder ``model``: labels optional, a table's
    feature columns by the model's feature names. A store or a Parquet file/folder (without
    ``sort_by_query``) is opened to be read in row blocks (:func:`ltr.data.streamed.open_streamed`:
    never the whole feature matrix); anything else is read into memory."""
    import dataclasses

    from ltr.data.files import DataOptions, data_format, load_data_file
    from ltr.data.streamed import open_streamed
    from ltr.models.folder import model_feature_names

    options = dataclasses.replace(options or DataOptions(), labels="optional")
    names = model_feature_names(model)
    where = Path(path).expanduser()  # a FIFO or device is left to the reader, which refuses it unopened
    if (where.is_file() or where.is_dir()) and data_format(path) in ("store", "parquet") and not options.sort_by_query:
        return open_streamed(path, option, None, options, feature_names=names)
    return load_data_file(path, option, None, options, feature_names=names, zero_based=zero_based, query_file=query_file)


def score_data(score, ds, rows: int | None = None) -> np.ndarray:
    """Scores [N] of ``ds`` by ``score`` (:func:`ltr.models.folder.load_scorer`'s).

    A data set in memory is scored in one call. A streamed one (:mod:`ltr.data.streamed`) is scored
    in blocks of about ``rows`` rows (default: about 64 MB of features), so that the features are
    never held whole: blocks of whole queries for a scorer that needs them (``score.whole_queries``:
    a listwise model, a blend); otherwise blocks of a multiple of :data:`SCORE_ROWS` rows, so that
    the scorer's own batches are those of the one call on the whole matrix and the scores are the
    same bit for bit. (A listwise model pads the queries of a block into batches that can differ
    from the one call's at the blocks' edges: the same scores to float rounding.)
    """
    from ltr.data.streamed import block_rows, is_streamed, predict_in_blocks, predict_in_query_blocks

    if not is_streamed(ds):
        return score(ds.features, ds.query_offsets)
    rows = block_rows(ds.n_features) if rows is None else int(rows)
    if getattr(score, "whole_queries", True):
        return predict_in_query_blocks(score, ds, rows)
    # exact blocks of a multiple of SCORE_ROWS rows, whatever the sizes of a Parquet file's batches
    return predict_in_blocks(score, ds, max(1, rows // SCORE_ROWS) * SCORE_ROWS, exact=True)


def predict(model: str | os.PathLike, data: str | os.PathLike, *, device: str = "cpu", **columns):
    """Score the data file ``data`` (SVMlight, Parquet, CSV or a store) with the model folder ``model``
    (any kind: ``ltr train``, ``ltr gbdt``, ``ltr blend``); no labels needed.

    ``columns``: the column roles of a table (``query_column``, ``feature_columns``,
    ``doc_id_column``, ...: :class:`ltr.data.files.DataOptions`). Returns a pandas data frame in the
    data's row order with the columns ``row`` (0-based row of the data), ``qid``, ``docid``, ``rank``
    (1-based within the query, by descending score; ties keep row order) and ``score`` (float64).
    """
    import pandas as pd

    from ltr.data.files import DataOptions
    from ltr.models.folder import check_width, load_scorer

    score, n_features = load_scorer(model, device)
    ds = open_for_scoring(data, model, DataOptions(**columns))
    check_width(ds, n_features, "data", data)
    scores = score_data(score, ds)
    off = np.asarray(ds.query_offsets)
    return pd.DataFrame({
        "row": np.arange(ds.n_items), "qid": np.repeat(np.asarray(ds.query_ids), np.diff(off)),
        "docid": doc_ids_of(ds).astype(str), "rank": ranks_in_queries(scores, off), "score": np.asarray(scores, dtype=np.float64),
    })  # fmt: skip
