"""Which data-set rows a click log's ``query`` and ``doc`` columns name: indices or the data set's own ids.

A log written by ``ltr clicks simulate`` holds *indices*: ``query`` is the query's position in the
data set (0..Q-1) and ``doc`` the item's row (0..N-1). A log from outside holds *ids*:

* ``query``: the data set's query id, the ``qid:`` of an SVMlight/LETOR file or the value of the
  query column of a Parquet data set (``--query-column``); compared as text, so the integer 7 in
  the log matches ``qid:7``;
* ``doc``: the document id, the ``#docid = ...`` comment of a LETOR line or the value of the
  ``--doc-id-column`` of a Parquet data set; looked up *within its query* (a LETOR document may
  be judged for several queries), so the pair (query id, doc id) must name exactly one row.

``mode="auto"`` reads ids when either column holds text and indices otherwise; arbitrary integer
ids need ``mode="id"``. Every value that names no row is an :class:`LtrError` giving the file, the
row of the log and the value.
"""

from __future__ import annotations

import numpy as np

from ltr.clicks.logs.reader import row_text
from ltr.base.errors import LtrError

__all__ = ["ID_MODES", "LogIds"]

ID_MODES = ("auto", "index", "id")


class LogIds:
    """Maps a log's (query, doc) values to (query index, row) of ``dataset`` (see the module docstring)."""

    def __init__(self, dataset, mode: str = "index"):
        if mode not in ("index", "id"):
            raise LtrError(f"unknown log id mode {mode!r}: use index or id")
        self.mode = mode
        self.offsets = np.asarray(dataset.query_offsets, dtype=np.int64)
        self.n_queries, self.n_rows = len(self.offsets) - 1, int(self.offsets[-1])
        self.row_query = np.repeat(np.arange(self.n_queries), np.diff(self.offsets))
        if mode == "id":
            self._build_id_tables(dataset)

    def _build_id_tables(self, dataset) -> None:
        if dataset.doc_ids is None:
            raise LtrError("the log names documents by id, but the data set has no document ids: give them as "
                           "'#docid = ...' comments (SVMlight/LETOR) or with --doc-id-column (Parquet data)")
        qids = np.asarray(dataset.query_ids).astype(str)
        order = np.argsort(qids, kind="stable")
        if len(qids) > 1 and (qids[order][1:] == qids[order][:-1]).any():
            dup = qids[order][1:][qids[order][1:] == qids[order][:-1]][0]
            raise LtrError(f"the data set has query id {dup!r} twice: a log cannot name its queries by id")
        self.qid_sorted, self.qid_order = qids[order], order
        docs = np.asarray(dataset.doc_ids).astype(str)
        self.doc_names, doc_code = np.unique(docs, return_inverse=True)
        key = self.row_query * len(self.doc_names) + doc_code.ravel()
        order = np.argsort(key, kind="stable")
        same = key[order][1:] == key[order][:-1]
        if same.any():
            row = int(order[1:][same][0])
            raise LtrError(f"the data set has document id {docs[row]!r} twice in query {qids[self.row_query[row]]!r}: "
                           "a log cannot name that document by id")
        self.key_sorted, self.key_rows = key[order], order

    @staticmethod
    def _lookup(sorted_values: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Positions of ``values`` in ``sorted_values`` and whether each was found."""
        at = np.searchsorted(sorted_values, values)
        inside = at < len(sorted_values)
        found = np.zeros(len(values), dtype=bool)
        found[inside] = sorted_values[at[inside]] == values[inside]
        return np.minimum(at, max(len(sorted_values) - 1, 0)), found

    @staticmethod
    def check(bad: np.ndarray, values, where: tuple[str, int], what: str, why: str) -> None:
        if bad.any():
            i = int(np.argmax(bad))
            value = values[i].item() if isinstance(values[i], np.generic) else values[i]
            raise LtrError(f"{row_text(where, i)}: {what} {value!r} {why}")

    def rows(self, query, doc, where: tuple[str, int]) -> tuple[np.ndarray, np.ndarray]:
        """``(query index [M], row [M])`` of one batch; ``where`` = (file, the batch's first row in it)."""
        if self.mode == "index":
            return self._index_rows(query, doc, where)
        q = np.asarray(query).astype(str)
        at, found = self._lookup(self.qid_sorted, q)
        self.check(~found, q, where, "query id", "is not a query of the data set")
        qidx = self.qid_order[at]
        d = np.asarray(doc).astype(str)
        code, found = self._lookup(self.doc_names, d)
        self.check(~found, d, where, "document id", "is not a document of the data set")
        at, found = self._lookup(self.key_sorted, qidx * len(self.doc_names) + code)
        pairs = np.char.add(np.char.add(q, " / "), d) if (~found).any() else q
        self.check(~found, pairs, where, "query / document", "names no row of the data set (the document is "
                   "not in that query)")
        return qidx, self.key_rows[at]

    def _index_rows(self, query, doc, where) -> tuple[np.ndarray, np.ndarray]:
        try:
            q = np.asarray(query, dtype=np.int64)
            d = np.asarray(doc, dtype=np.int64)
        except (TypeError, ValueError):
            raise LtrError(f"{where[0]}: the query and doc columns are not integer indices; for ids from outside "
                           "use --log-ids id") from None
        self.check((q < 0) | (q >= self.n_queries), q, where, "query index",
                   f"is outside the data set's 0..{self.n_queries - 1} (ids from outside: --log-ids id)")
        self.check((d < 0) | (d >= self.n_rows), d, where, "doc row",
                   f"is outside the data set's 0..{self.n_rows - 1} (ids from outside: --log-ids id)")
        self.check(self.row_query[d] != q, d, where, "doc row", "is not a row of the entry's query")
        return q, d
