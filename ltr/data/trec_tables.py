"""TREC run and qrels files read as columns (Arrow's CSV reader), joined into :class:`AlignedRun` arrays.

:func:`ltr.data.trec.read_run` builds a dictionary of ``(docno, score)`` tuples line by line: on an
MS MARCO-scale run (7,000 queries x 1,000 documents) that parsing alone took 10 s of ``ltr eval``'s
19 s, and the tuples most of its 2 GB. Here a file in the plain shape (single spaces between the
fields, one line per record, the same number of fields on every line, ASCII) is read by
``pyarrow.csv`` into three columns (query id, document id, score or label); the query ids are
dictionary-encoded; document ids of at most 8 bytes (MS MARCO's) are packed into int64 numbers
that keep their byte order, so that no string is sorted or hashed in Python, a repeated (query,
document) pair is found by one sort of 64-bit hashes, and :func:`align_tables` joins run and qrels
by hash look-ups checked exactly (longer ids: Arrow's sort and ``index_in`` over the strings). No
Python object per line.

Anything else goes through the line-by-line readers of :mod:`ltr.data.trec`, which accept every
file trec_eval reads (tabs, runs of spaces, comments, blank lines, a byte order mark, 5 or more run
fields) and word every error with its file and line. So a malformed file is always reported as
before: the fast path never raises about the content, it declines (``None``) and the line-by-line
reader finds and names the bad line. Files under :data:`COLUMNAR_MIN_BYTES` (2 MiB) are read line by
line too (as fast, without importing pyarrow). The fast path declines on: a byte outside ASCII or a tab or
other control whitespace, a comment line, a space at the start or end of a line or two in a row,
lines of different field counts, a field Arrow cannot parse as a number, a non-finite score,
a relevance label that :func:`ltr.data.labels.label_problem` refuses, a document listed twice for
a query.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from ltr.data.labels import LABEL_LIMIT
from ltr.data.trec import AlignedRun, read_qrels, read_run
from ltr.base.errors import LtrError

__all__ = ["RecordTable", "read_run_table", "read_qrels_table", "align_tables"]

#: smaller files are read line by line: as fast, and ``ltr eval`` of a small run does not import pyarrow
COLUMNAR_MIN_BYTES = 1 << 21

_CONTROL_SPACES = (b"\t", b"\x0b", b"\x0c", b"\x1c", b"\x1d", b"\x1e", b"\x1f", b"\x00")


@dataclass
class RecordTable:
    """One TREC file as columns, in file order: run (score) or qrels (relevance label) records.

    query_ids : the distinct query ids, in order of first appearance
    query_code : [N] int64, the query of each record (index into ``query_ids``)
    docs : [N] pyarrow strings, the document id of each record
    doc_code : [N] int64, codes that order the document ids in byte order: within each query for a
        run (all that ties by docno compare), across the file for qrels (equal ids, equal codes)
    values : [N] float64, the score (run) or the relevance label (qrels)
    packed : ``doc_code`` holds the ids themselves (each at most 8 bytes, read as a big-endian
        number: :func:`_packed_ids`), the same codes in every file
    """

    query_ids: list[str]
    query_code: np.ndarray
    docs: Any
    doc_code: np.ndarray
    values: np.ndarray
    packed: bool = False

    @property
    def n_records(self) -> int:
        return int(self.values.size)


def _plain_file(path: str | os.PathLike):
    """The file's path when its bytes can go to the fast reader, else None.

    Declined here: standard input, a small file, a byte outside ASCII, a tab or other control
    whitespace, two spaces in a row (an empty field Arrow would keep and ``str.split`` would not), a
    first line that is blank, a comment or starts with a space. A space at the start or end of
    another line or a comment line are caught on the columns (:func:`_table`). Read in blocks of
    32 MiB, so that checking does not hold the whole file in memory.
    """
    if str(path) == "-":
        return None
    from ltr.base.checks import input_file

    try:
        path = input_file(path)
        if path.stat().st_size < COLUMNAR_MIN_BYTES:
            return None
        with open(path, "rb") as fh:
            block = fh.read(1 << 25)
            if block[:1] in (b" ", b"#", b"\n", b"\r"):
                return None
            previous = b""
            while block:
                if (not block.isascii() or any(c in block for c in _CONTROL_SPACES) or _two_spaces(block)
                        or previous + block[:1] == b"  "):
                    return None
                previous = block[-1:]
                block = fh.read(1 << 25)
            return path
    except (OSError, ValueError, LtrError):
        return None  # the line-by-line reader words the refusal


def _two_spaces(block: bytes) -> bool:
    """Whether ``block`` holds two spaces in a row: 16-bit words equal to two spaces, at even and at
    odd offsets (about 4x faster than ``b"  " in block`` on text with a space every few bytes)."""
    data = np.frombuffer(block, dtype=np.uint8)
    pair = np.uint16(0x2020)
    even = data[:data.size - data.size % 2].view(np.uint16)
    odd = data[1:data.size - (data.size - 1) % 2].view(np.uint16) if data.size > 1 else even[:0]
    return bool((even == pair).any() or (odd == pair).any())


def _read_columns(path, fields: tuple[int, int], value_field: int):
    """(query ids, document ids, values) of a single-space-separated file with
    ``fields`` = (fewest, most) fields per line, by Arrow's CSV reader; None if a line does not fit."""
    import pyarrow as pa
    from pyarrow import csv

    with open(path, "rb") as fh:
        first = fh.readline().rstrip(b"\r\n")
    n_fields = first.count(b" ") + 1
    if not fields[0] <= n_fields <= fields[1] or first.endswith(b" "):
        # a space at the end of the first line; one at the end of a later line gives that line
        # another field count, which Arrow refuses
        return None
    columns = [f"f{i}" for i in range(n_fields)]
    wanted = ["f0", "f2", f"f{value_field}"]
    types = {column: pa.string() for column in columns}
    types[wanted[2]] = pa.float64()
    try:
        table = csv.read_csv(
            path,
            read_options=csv.ReadOptions(column_names=columns, block_size=1 << 23),
            parse_options=csv.ParseOptions(delimiter=" ", quote_char=False, escape_char=False, ignore_empty_lines=True),
            convert_options=csv.ConvertOptions(column_types=types, include_columns=wanted, null_values=[],
                                               strings_can_be_null=False),
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return None  # a line of another field count, a value that is not a number, ...
    return table.column(0), table.column(1), table.column(2)


def _query_codes(column) -> tuple[list[str], np.ndarray]:
    """(distinct query ids in order of first appearance, [N] int64 index of each row's id).

    Chunk by chunk (no combined copy of the strings): Arrow encodes the chunks of a column with one
    dictionary; should they differ, the combined column is encoded instead."""
    import pyarrow as pa

    encoded = column.dictionary_encode()
    chunks = encoded.chunks if isinstance(encoded, pa.ChunkedArray) else [encoded]
    if not chunks:
        return [], np.zeros(0, dtype=np.int64)
    dictionary = chunks[-1].dictionary
    if not all(c.dictionary.equals(dictionary) for c in chunks):
        combined = column.combine_chunks().dictionary_encode()
        dictionary, chunks = combined.dictionary, [combined]
    codes = np.concatenate([c.indices.to_numpy(zero_copy_only=False) for c in chunks]).astype(np.int64)
    return dictionary.to_pylist(), codes


def _doc_codes(column) -> np.ndarray:
    """[N] int64 dense rank of each document id in byte order (= code point order, as trec_eval's
    strcmp and Python compare): equal ids share a code, across queries too (the qrels' join key)."""
    import pyarrow.compute as pc

    return pc.rank(column, sort_keys="ascending", tiebreaker="dense").to_numpy().astype(np.int64) - 1


def _packed_ids(column) -> np.ndarray | None:
    """[N] int64: each id's bytes read as a big-endian number, zero-padded to 8 bytes; None when an id
    is longer than 8 bytes (or empty).

    For ASCII ids without NUL bytes (what :func:`_plain_file` passes) this is exact and keeps the byte
    order: equal ids give equal numbers in any file, and a < b as bytes (a prefix first) iff
    pack(a) < pack(b). MS MARCO's passage and document ids fit. One gather of 8-byte windows.
    """
    import pyarrow as pa

    if isinstance(column, pa.ChunkedArray):  # chunk by chunk: no combined copy of the strings
        parts = [_packed_ids(chunk) for chunk in column.chunks if len(chunk)]
        return np.concatenate(parts) if parts and all(p is not None for p in parts) else None
    n = len(column)
    if n == 0 or column.null_count or not pa.types.is_string(column.type):
        return None
    _, offsets_buffer, data_buffer = column.buffers()
    offsets = np.frombuffer(offsets_buffer, dtype=np.int32, count=n + 1, offset=column.offset * 4)
    lengths = np.diff(offsets)
    if lengths.min() < 1 or lengths.max() > 8:
        return None
    first, end = int(offsets[0]), int(offsets[-1])
    padded = np.zeros((end - first) // 8 + 2, dtype=np.uint64)  # whole words, two spare at the end
    padded.view(np.uint8)[:end - first] = np.frombuffer(data_buffer, dtype=np.uint8)[first:end]
    words = padded.view(">u8").astype(np.uint64)  # big-endian: the first byte is the highest
    # an id's 8 bytes from byte ``start``: the end of word start // 8 and the beginning of the next
    # (in place: every temporary of N words costs its page faults)
    index = offsets[:-1].astype(np.int64)
    index -= first
    shift = (index & 7).view(np.uint64)
    shift <<= np.uint64(3)
    index >>= 3
    value = words[index]
    value <<= shift
    index += 1
    low = words[index]
    low >>= np.uint64(1)  # >> 64 in two steps when the shift is 0
    np.subtract(np.uint64(63), shift, out=shift)
    low >>= shift
    value |= low
    np.subtract(np.uint64(64), lengths.astype(np.uint64) << np.uint64(3), out=shift)  # the next ids' bytes out
    value >>= shift
    value <<= shift
    return value.view(np.int64)


def _pair_hash(query_code: np.ndarray, doc_code: np.ndarray) -> np.ndarray:
    """[N] uint64 mix of (query, document) codes: equal pairs hash equal (distinct ones rarely do)."""
    h = doc_code.view(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    mix = query_code.astype(np.uint64)  # in place from here: two arrays of N words at most
    mix *= np.uint64(0xC2B2AE3D27D4EB4F)
    h ^= mix
    np.right_shift(h, np.uint64(29), out=mix)
    h ^= mix
    return h


def _has_repeated_pair(query_code: np.ndarray, doc_code: np.ndarray) -> bool:
    """Whether some (query, document) pair occurs twice: one sort of 64-bit hashes; equal hashes
    (a repeat, or rarely two pairs that collide) are settled by an exact two-key sort."""
    h = np.sort(_pair_hash(query_code, doc_code))
    if not np.any(h[1:] == h[:-1]):
        return False
    order = np.lexsort((doc_code, query_code))
    same = (query_code[order[1:]] == query_code[order[:-1]]) & (doc_code[order[1:]] == doc_code[order[:-1]])
    return bool(same.any())


def _codes_within_queries(docs, query_code: np.ndarray) -> np.ndarray | None:
    """[N] int64 codes that order each query's document ids in byte order (what ties by docno
    compare), from one sort by (query, id): ~7x faster than ranking all ids together, which a run
    does not need. None when a query lists a document twice (the line-by-line reader names it)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    order = pc.sort_indices(pa.table({"q": query_code, "d": docs}), sort_keys=[("q", "ascending"), ("d", "ascending")])
    order = order.to_numpy()
    if order.size > 1:
        in_order = pc.take(docs, order)
        same_doc = pc.equal(in_order.slice(1), in_order.slice(0, order.size - 1))
        same_query = query_code[order[1:]] == query_code[order[:-1]]
        if np.any(same_query & same_doc.to_numpy(zero_copy_only=False)):
            return None
    codes = np.empty(order.size, dtype=np.int64)
    codes[order] = np.arange(order.size)
    return codes


def _table(path, fields: tuple[int, int], value_field: int, labels: bool) -> RecordTable | None:
    if path is None:
        return None
    columns = _read_columns(path, fields, value_field)
    if columns is None:
        return None
    import pyarrow.compute as pc

    qids, docs, value_column = columns
    values = np.concatenate([c.to_numpy() for c in value_column.chunks] or [np.zeros(0)]).astype(np.float64, copy=False)
    if not np.all(np.isfinite(values)) or (labels and np.any(values >= LABEL_LIMIT)):
        return None  # the line-by-line reader names the line
    if any(pc.min(pc.binary_length(c)).as_py() == 0 for c in (qids, docs)):
        return None  # an empty field: a space at the start or end of a line
    query_ids, query_code = _query_codes(qids)
    if any(q.startswith("#") for q in query_ids):
        return None  # a comment line
    doc_code = _packed_ids(docs)  # short ids: the ids themselves, no sort of the strings
    packed = doc_code is not None
    if packed:
        doc_code = None if _has_repeated_pair(query_code, doc_code) else doc_code
    elif labels:  # qrels: codes shared across queries, the key of the join with a run
        doc_code = _doc_codes(docs)
        key = np.sort(query_code * (int(doc_code.max(initial=0)) + 1) + doc_code)
        doc_code = None if np.any(key[1:] == key[:-1]) else doc_code
    else:
        doc_code = _codes_within_queries(docs, query_code)
    if doc_code is None:
        return None  # a document twice for one query: the line-by-line reader names the line
    return RecordTable(query_ids, query_code, docs, doc_code, values, packed)


def _from_records(records: dict, value_of) -> RecordTable:
    """A :class:`RecordTable` of what a line-by-line reader returned (``{qid: records}``), numpy only."""
    query_ids = list(records)
    docs, values, codes = [], [], []
    for i, q in enumerate(query_ids):
        pairs = list(value_of(records[q]))
        docs.extend(d for d, _ in pairs)
        values.extend(v for _, v in pairs)
        codes.append(np.full(len(pairs), i, dtype=np.int64))
    doc_array = np.array(docs, dtype=object)
    doc_code = np.unique(doc_array, return_inverse=True)[1].reshape(-1).astype(np.int64) if docs \
        else np.zeros(0, dtype=np.int64)  # Python's str order is code point order, as the byte order above
    query_code = np.concatenate(codes) if codes else np.zeros(0, dtype=np.int64)
    return RecordTable(query_ids, query_code, doc_array, doc_code, np.asarray(values, dtype=np.float64))


def _first_index_in(docs, value_set) -> np.ndarray:
    """[N] index of each of ``docs`` in ``value_set`` (its first place), -1 where absent."""
    if isinstance(docs, np.ndarray) and isinstance(value_set, np.ndarray):
        first: dict = {}
        for i, d in enumerate(value_set.tolist()):
            first.setdefault(d, i)
        return np.array([first.get(d, -1) for d in docs.tolist()], dtype=np.int64)
    import pyarrow as pa
    import pyarrow.compute as pc

    docs, value_set = (x if not isinstance(x, np.ndarray) else pa.array(x.tolist(), type=pa.string())
                       for x in (docs, value_set))
    return pc.index_in(docs, value_set=value_set).fill_null(-1).to_numpy().astype(np.int64)


def _lookup(keys: np.ndarray, table_keys: np.ndarray) -> np.ndarray:
    """[K] index of each key in ``table_keys`` (distinct), -1 where absent (sorted search)."""
    if table_keys.size == 0:
        return np.full(keys.size, -1, dtype=np.int64)
    order = np.argsort(table_keys, kind="stable")
    sorted_keys = table_keys[order]
    at = np.minimum(np.searchsorted(sorted_keys, keys), order.size - 1)
    return np.where(sorted_keys[at] == keys, order[at], -1)


def _join_pairs(run_query, run_doc, qrels_query, qrels_doc) -> np.ndarray | None:
    """[N] index of each run (query, document) pair among the qrels pairs (distinct), -1 where absent;
    by 64-bit hashes (sorted search) checked exactly. None if two qrels pairs share a hash."""
    if qrels_doc.size == 0:
        return np.full(run_doc.size, -1, dtype=np.int64)
    table = _pair_hash(qrels_query, qrels_doc)
    order = np.argsort(table, kind="stable")
    table = table[order]
    if np.any(table[1:] == table[:-1]):
        return None
    # a bit per hash prefix of the qrels pairs: most run pairs (never judged) stop at this look-up
    prefix = np.uint64(64 - 22)
    maybe = np.zeros(1 << 22, dtype=bool)
    maybe[(table >> prefix).view(np.int64)] = True
    h = _pair_hash(run_query, run_doc)
    rows = np.flatnonzero(maybe[(h >> prefix).view(np.int64)])
    h = h[rows]
    at = np.minimum(np.searchsorted(table, h), table.size - 1)
    found = order[at]
    same = (table[at] == h) & (qrels_query[found] == run_query[rows]) & (qrels_doc[found] == run_doc[rows])
    out = np.full(run_doc.size, -1, dtype=np.int64)
    out[rows[same]] = found[same]
    return out


def read_run_table(path: str | os.PathLike) -> RecordTable:
    """A run file ``qid Q0 docno rank score [tag ...]`` as columns (scores in ``values``).

    Same records and errors as :func:`ltr.data.trec.read_run`, which reads what the columnar
    reader declines (a malformed line among them: its error names the file and the line).
    """
    table = _table(_plain_file(path), (5, 1 << 20), 4, labels=False)
    return table if table is not None else _from_records(read_run(path), lambda pairs: pairs)


def read_qrels_table(path: str | os.PathLike) -> RecordTable:
    """A qrels file ``qid iter docno rel`` as columns (labels in ``values``), as :func:`ltr.data.trec.read_qrels`."""
    table = _table(_plain_file(path), (4, 4), 3, labels=True)
    return table if table is not None else _from_records(read_qrels(path), lambda docs: docs.items())


def _rows_by_query(table: RecordTable, position: dict[str, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows of the kept queries grouped by query position, file order inside, [N] position of each row, counts).

    The rows are ``slice(None)`` when they are every row in file order (the usual run: queries sorted
    and contiguous, all judged): the arrays are then taken as views, not copied."""
    rank_of_code = np.array([position.get(q, -1) for q in table.query_ids], dtype=np.int64)
    rank = rank_of_code[table.query_code] if table.n_records else np.zeros(0, dtype=np.int64)
    kept = np.flatnonzero(rank >= 0)
    in_order = kept.size < 2 or bool(np.all(rank[kept][1:] >= rank[kept][:-1]))  # usual: queries sorted, contiguous
    rows = kept if in_order else kept[np.argsort(rank[kept], kind="stable")]
    if in_order and kept.size == rank.size:
        rows = slice(None)
    return rows, rank, np.bincount(rank[kept], minlength=len(position))


def align_tables(run: RecordTable, qrels: RecordTable, *, complete: bool = False) -> AlignedRun:
    """:func:`ltr.data.trec.align` of two tables: the same arrays, without a Python object per record.

    Queries in both files (with ``complete``, every query of the qrels) sorted by id; each
    query's retrieved documents in file order with their qrels label (NaN: not judged); the labels
    of every judged document of each query in qrels file order. ``doc_ids`` are int64 codes in
    the documents' id order (all that ties by document id need), not the id strings.
    """
    in_run, in_qrels = set(run.query_ids), set(qrels.query_ids)
    both = sorted(in_qrels if complete else in_run & in_qrels)
    position = {q: i for i, q in enumerate(both)}
    rows, run_rank, counts = _rows_by_query(run, position)
    q_rows, qrels_rank, q_counts = _rows_by_query(qrels, position)
    labels = np.full(int(counts.sum()), np.nan)
    at = None
    if run.packed and qrels.packed:  # both files' codes are the ids: join on (query, id) directly
        at = _join_pairs(run_rank[rows], run.doc_code[rows], qrels_rank[q_rows], qrels.doc_code[q_rows])
        if at is not None:
            labels[at >= 0] = qrels.values[q_rows][at[at >= 0]]
    if at is None:
        # a run row's label: its (query position, qrels document code) looked up among the qrels rows
        # the qrels code of each kept run row's document (-1: judged for no query)
        q_code = np.unique(qrels.doc_code, return_inverse=True)[1].reshape(-1) if qrels.packed else qrels.doc_code
        first = _first_index_in(run.docs, qrels.docs)[rows]
        run_doc = np.where(first >= 0, q_code[np.maximum(first, 0)] if qrels.n_records else -1, -1)
        judged = np.flatnonzero(run_doc >= 0)
        width = int(q_code.max(initial=0)) + 1
        run_key = run_rank[rows][judged] * width + run_doc[judged]
        at = _lookup(run_key, qrels_rank[q_rows] * width + q_code[q_rows])
        labels[judged[at >= 0]] = qrels.values[q_rows][at[at >= 0]]
    return AlignedRun(
        query_ids=both,
        scores=run.values[rows],
        labels=labels,
        doc_ids=run.doc_code[rows],
        query_offsets=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
        qrels_labels=qrels.values[q_rows],
        qrels_offsets=np.concatenate([[0], np.cumsum(q_counts)]).astype(np.int64),
        dropped_run_queries=sorted(in_run - in_qrels),
        dropped_qrels_queries=[] if complete else sorted(in_qrels - in_run),
    )
