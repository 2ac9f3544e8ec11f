"""Ranking metrics for many queries at once, vectorized over the flat layout (no loop over queries).

Flat layout: ``scores[N]``, ``labels[N]`` and ``query_offsets[Q+1]``; query q owns the rows
``offsets[q]:offsets[q+1]``. The padded form ``[Q, L]`` + ``mask`` is accepted by every public
function and converted to the flat one (the flat layout is the fast path).

Per query, with items ranked by score (rank r = 1, 2, ...), rel_r = [label_r >= threshold],
g_r = gain(label_r), d(r) = 1/log2(r+1) (or the discount given), R = number of relevant items
(in the list, or in the qrels when they are passed) and n the list length:

    DCG@K       = sum_{r<=K} g_r d(r)                 NDCG@K = DCG@K / IDCG@K
    IDCG@K      = DCG@K of the judged positive gains sorted descending (top min(|R|, K) of them)
    AP@K        = sum_{r<=K} rel_r * P@r / (R or min(R, K))
    RR@K        = 1 / (rank of the first relevant item) if that rank <= K else 0
    P@K         = sum_{r<=K} rel_r / K  (or / min(K, n))  Recall@K = sum_{r<=K} rel_r / R
    HitRate@K   = [sum_{r<=K} rel_r > 0]              R-precision = sum_{r<=R} rel_r / R

Without ``k`` the cutoff is the whole list (P then divides by n). A query without relevant items
(R = 0; for NDCG: IDCG = 0) scores according to ``empty`` (NaN for "skip"). DCG is never "empty".

How it is fast: one ordering of all queries is computed once and shared by every metric. For the
default tie rule (input order) the ordering is a single in-place ``np.sort`` of unique 64-bit keys
``query | score bits | position`` from which the permutation is decoded (no argsort); the few
runs whose distinct scores collide in the truncated score bits are re-sorted exactly afterwards.
The metrics then need only the positions of the relevant items in ranked order (collected while
the permutation is decoded), ``np.searchsorted`` on them per query, item counts per (query, grade)
for the ideal DCG, and a ``[Q, K]`` gather for DCG@K. Element-wise work runs over blocks of
2^18 items so that temporaries stay in cache instead of allocating arrays of N elements.
Other tie rules use ``np.lexsort`` (slower, exact).
"""

from __future__ import annotations

from metrics._cached import cached_attribute
from typing import Any

import numpy as np

from metrics.conventions import Conventions, get_conventions
from metrics.discounts import discount_values
from metrics.gains import gain_values, is_torch

__all__ = [
    "KINDS",
    "RankedLists",
    "rank_order",
    "flat_from_padded",
    "ndcg",
    "dcg",
    "average_precision",
    "reciprocal_rank",
    "precision",
    "recall",
    "hit_rate",
    "r_precision",
]

KINDS = ("ndcg", "dcg", "ap", "rr", "p", "recall", "hit", "rprec")

def _numpy(x: Any, dtype: Any = None) -> np.ndarray:
    if is_torch(x):
        x = x.detach().cpu().numpy()
    return np.asarray(x, dtype=dtype)


def _check_offsets(query_offsets: Any, n_items: int, what: str = "query_offsets") -> np.ndarray:
    offsets = _numpy(query_offsets)
    if offsets.ndim != 1 or offsets.size == 0:
        raise ValueError(f"{what} must be a 1-D array [Q+1] starting at 0")
    if not np.issubdtype(offsets.dtype, np.integer):
        if not np.all(offsets == np.floor(offsets)):
            raise ValueError(f"{what} must hold integers")
    offsets = offsets.astype(np.int64)
    if offsets[0] != 0 or offsets[-1] != n_items:
        raise ValueError(f"{what} must start at 0 and end at the number of items ({n_items}), got {offsets[0]}..{offsets[-1]}")
    if np.any(np.diff(offsets) < 0):
        raise ValueError(f"{what} must be non-decreasing")
    return offsets


def flat_from_padded(scores: Any, labels: Any, mask: Any = None, *extra: Any):
    """Padded ``[Q, L]`` arrays (+ ``mask``, true = real item) to the flat layout.

    Returns ``(scores[N], labels[N], query_offsets[Q+1], *extra_flat)``; items keep their column order.

    >>> s, l, o = flat_from_padded([[3., 2., 0.], [1., 0., 0.]], [[1, 0, 0], [2, 0, 0]], [[1, 1, 0], [1, 0, 0]])
    >>> s.tolist(), l.tolist(), o.tolist()
    ([3.0, 2.0, 1.0], [1.0, 0.0, 2.0], [0, 2, 3])
    """
    s = _numpy(scores, np.float64)
    y = _numpy(labels, np.float64)
    if s.ndim != 2 or s.shape != y.shape:
        raise ValueError(f"padded scores and labels must both be [Q, L], got {s.shape} and {y.shape}")
    m = np.ones(s.shape, dtype=bool) if mask is None else _numpy(mask).astype(bool)
    if m.shape != s.shape:
        raise ValueError(f"mask has shape {m.shape}, scores have {s.shape}")
    offsets = np.concatenate([[0], np.cumsum(m.sum(axis=1))]).astype(np.int64)
    out = [s[m], y[m], offsets]
    for e in extra:
        out.append(None if e is None else _numpy(e)[m])
    return tuple(out)


def sum_columns_in_order(matrix: np.ndarray) -> np.ndarray:
    """Row sums of a [Q, K] matrix added left to right: ``(((m[:, 0] + m[:, 1]) + m[:, 2]) + ...)``.

    numpy's ``sum(axis=1)`` adds pairwise in groups that depend on K, so the same row padded with
    zero columns to another width (a share of the queries whose longest list is shorter) could
    differ in the last bit; in order, trailing zeros change nothing, and the sum equals the one a
    ``np.bincount`` over the rank-ordered items accumulates. The rows are the queries, so the loop
    runs over the K columns only.

    >>> sum_columns_in_order(np.array([[0.1, 0.2, 0.3], [1.0, 0.0, 0.0]])).tolist()
    [0.6000000000000001, 1.0]
    """
    if matrix.shape[1] == 0:
        return np.zeros(matrix.shape[0])
    out = matrix[:, 0].astype(np.float64, copy=True)
    for j in range(1, matrix.shape[1]):
        out += matrix[:, j]
    return out


def _bit_length(n: int) -> int:
    return int(n).bit_length()


def _has_nan(x: np.ndarray) -> bool:
    # one pass: a NaN anywhere makes the sum NaN (an overflowing sum falls back to the exact test)
    total = x.sum()
    return bool(np.isnan(total)) and bool(np.isnan(x).any())


# Element-wise work runs over blocks of this many items: the temporaries stay in cache and are
# reused, instead of allocating (and page-faulting in) several arrays of N elements.
_CHUNK = 1 << 18


def _blocks(n: int, chunk: int | None = None):
    chunk = chunk or _CHUNK
    for a in range(0, n, chunk):
        yield a, min(a + chunk, n)


def _whole_segment_blocks(seg_offsets: np.ndarray, n: int):
    """Blocks ``[a, b)`` of about ``_CHUNK`` items that end at segment boundaries (or at ``n``)."""
    a = 0
    while a < n:
        j = int(np.searchsorted(seg_offsets, min(a + _CHUNK, n), side="left"))
        b = int(seg_offsets[j]) if j < seg_offsets.size else n
        yield a, b
        a = b


def _segment_runs(seg_offsets: np.ndarray, n: int, whole: bool = False):
    """Yield ``(a, b, q0, lens)``: block [a, b) of [0, n) holds ``lens[j]`` items of segment q0 + j.

    ``whole=True`` never splits a segment between blocks: float sums per segment then come out of
    one block, the same whatever comes before the segment (a share of the queries alone gives the
    same bits).
    """
    for a, b in (_whole_segment_blocks(seg_offsets, n) if whole else _blocks(n)):
        q0 = int(np.searchsorted(seg_offsets, a, side="right")) - 1
        q1 = int(np.searchsorted(seg_offsets, b - 1, side="right")) - 1
        lens = np.minimum(seg_offsets[q0 + 1:q1 + 2], b) - np.maximum(seg_offsets[q0:q1 + 1], a)
        yield a, b, q0, lens


def _per_segment(values: np.ndarray, lens: np.ndarray, ramp: bool = False) -> np.ndarray:
    """[sum(lens)] int64: ``np.repeat(values, lens)``, plus each item's index when ``ramp``.

    Built as the running sum of its steps (the first value, then at each segment start the jump to
    the next value): ``np.repeat`` holds the GIL for its whole pass, ``np.cumsum`` and the fill do
    not, so threads evaluating other queries keep running (metrics.evaluate's ``threads``).

    >>> _per_segment(np.array([10, 20, 30]), np.array([2, 0, 3])).tolist()
    [10, 10, 30, 30, 30]
    >>> _per_segment(np.array([10, 20, 30]), np.array([2, 0, 3]), ramp=True).tolist()
    [10, 11, 32, 33, 34]
    """
    n = int(lens.sum())
    out = np.full(n, int(ramp), dtype=np.int64)
    if n == 0:
        return out
    nonempty = np.flatnonzero(lens)
    value = values[nonempty].astype(np.int64)
    first = (np.cumsum(lens) - lens)[nonempty]
    out[first[1:]] = np.diff(value) + int(ramp)
    out[0] = value[0]
    return np.cumsum(out)  # into a new array: numpy's in-place cumsum holds the GIL for its whole pass


def _segment_blocks(seg_offsets: np.ndarray, n: int, whole: bool = False):
    """Yield ``(a, b, q0, q)`` over [0, n): ``q`` [b-a] is the segment of each element, q0 its minimum."""
    for a, b, q0, lens in _segment_runs(seg_offsets, n, whole):
        yield a, b, q0, _per_segment(np.arange(q0, q0 + lens.size, dtype=np.int64), lens)


def _stable_order(scores: np.ndarray, offsets: np.ndarray, relevant: tuple | None = None):
    """Permutation ranking each query's items by score descending, ties in input order.

    With ``relevant=(labels, threshold, out)`` the positions (in ranked order) of the items with
    label >= threshold are also collected while the permutation is decoded (the blocks are in
    cache then) and stored in the list ``out`` (left empty if a collision re-sort changed them).

    One ``np.sort`` of unique uint64 keys ``query | truncated descending score bits | position``;
    the permutation is decoded from the key (row start of its query + position). Distinct scores
    that share the truncated bits are then re-sorted exactly (only those runs).
    """
    n = scores.size
    n_q = offsets.size - 1
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    lengths = np.diff(offsets)
    starts = offsets[:-1]
    max_len = int(lengths.max())
    q_bits = _bit_length(n_q - 1)
    p_bits = _bit_length(max_len - 1)
    s_bits = 64 - q_bits - p_bits
    if s_bits < 16:  # absurd shapes only: fall back to a comparison sort
        qidx = np.repeat(np.arange(n_q), lengths)
        pos = np.arange(n) - np.repeat(starts, lengths)
        return np.lexsort((pos, -scores, qidx))
    shift = s_bits + p_bits
    # (q << shift) - start_q, per query: adding the row index gives query | position
    high = (np.arange(n_q, dtype=np.int64) << shift) - starts if q_bits else -starts
    key = np.empty(n, dtype=np.uint64)
    runs = list(_segment_runs(offsets, n))
    top = np.int64(1 << (s_bits - 1)) if s_bits < 64 else np.int64(-(2**63))  # top bit of the score field
    for a, b, q0, lens in runs:
        # Order-preserving map of x = -score to the top s_bits of an integer key (ascending key =
        # descending score): an arithmetic shift keeps the sign; negative x then flip every bit
        # (~t), the others set the top bit. 0.0 - score also turns -0.0 into +0.0 (they tie).
        t = key[a:b].view(np.int64)
        np.subtract(0.0, scores[a:b], out=t.view(np.float64))
        t >>= 64 - s_bits
        flip = t >> 63
        flip |= top
        t ^= flip
        t <<= p_bits
        t |= _per_segment(high[q0:q0 + lens.size] + a, lens, ramp=True)  # query | row - start
    key.sort()
    same_parts, rel_parts = [], []
    pmask = np.uint64((1 << p_bits) - 1)
    # one byte per item: gathered through the permutation below (cheaper than the float labels)
    rel_flag = None if relevant is None else relevant[0] >= relevant[1]
    for a, b, q0, lens in runs:  # queries keep their rows: the sorted blocks hold the same queries
        kc = key[a:b]
        trunc = kc >> np.uint64(p_bits)
        same_parts.append(np.flatnonzero(trunc[1:] == trunc[:-1]) + a)
        if b < n and (key[b - 1] >> np.uint64(p_bits)) == (key[b] >> np.uint64(p_bits)):
            same_parts.append(np.array([b - 1]))
        # decode in place: row = start of the query + position (low bits)
        kc &= pmask
        kc.view(np.int64)[:] += _per_segment(starts[q0:q0 + lens.size], lens)
        if rel_flag is not None:
            rel_parts.append(np.flatnonzero(rel_flag[kc.view(np.int64)]) + a)
    perm = key.view(np.int64)
    same = np.concatenate(same_parts) if same_parts else np.zeros(0, dtype=np.int64)
    if same.size:  # pairs (i, i+1) sharing the query and the truncated score bits
        differs = scores[perm[same]] != scores[perm[same + 1]]
        if differs.any():
            items = _resort_collisions(scores, perm, same, differs, offsets)
            if relevant is not None:
                # a re-sorted run keeps its items, so its number of relevant items: only their
                # positions inside the run change
                ridx = np.concatenate(rel_parts)
                new_run = np.ones(items.size, dtype=bool)
                new_run[1:] = items[1:] != items[:-1] + 1
                run_first = items[new_run]
                run_last = np.append(items[np.flatnonzero(new_run)[1:] - 1], items[-1])
                lo = np.searchsorted(ridx, run_first)
                hi = np.searchsorted(ridx, run_last, side="right")
                where = np.repeat(lo - np.cumsum(np.r_[0, (hi - lo)[:-1]]), hi - lo) + np.arange(int((hi - lo).sum()))
                ridx[where] = items[rel_flag[perm[items]]]
                rel_parts = [ridx]
    if relevant is not None:
        relevant[2].append(np.concatenate(rel_parts) if rel_parts else np.zeros(0, dtype=np.int64))
    return perm


def _resort_collisions(scores, perm, same, differs, offsets) -> None:
    """Re-sort, exactly, the runs of equal truncated keys that hold distinct scores (in place).

    Returns the positions re-sorted (ascending; each run contiguous)."""
    # consecutive pair indices form one run of items [first pair, last pair + 1]
    new_run = np.ones(same.size, dtype=bool)
    new_run[1:] = same[1:] != same[:-1] + 1
    run_of_pair = np.cumsum(new_run) - 1
    bad = np.zeros(int(run_of_pair[-1]) + 1, dtype=bool)
    bad[run_of_pair[differs]] = True
    first = same[new_run]
    # last pair of each run: the pair just before the next run's first pair
    ends = np.empty(first.size, dtype=np.int64)
    ends[:-1] = same[np.flatnonzero(new_run)[1:] - 1]
    ends[-1] = same[-1]
    first, ends = first[bad], ends[bad]
    sizes = ends - first + 2
    items = np.repeat(first - np.cumsum(np.r_[0, sizes[:-1]]), sizes) + np.arange(int(sizes.sum()))
    run_id = np.repeat(np.arange(first.size), sizes)
    rows = perm[items]
    pos = rows - offsets[np.searchsorted(offsets, rows, side="right") - 1]
    perm[items] = rows[np.lexsort((pos, -scores[rows], run_id))]
    return items


def rank_order(
    scores: Any,
    query_offsets: Any,
    *,
    ties: str = "stable",
    labels: Any = None,
    doc_ids: Any = None,
) -> np.ndarray:
    """Permutation ``perm`` [N] such that ``x[perm]`` lists each query's items by descending score.

    Queries keep their rows (query-major); ``ties`` orders equal scores: ``"stable"``/``"average"``
    input order, ``"docid_desc"`` document id descending (needs ``doc_ids``), ``"pessimistic"``
    lowest label first (needs ``labels``).

    >>> rank_order([0.1, 0.9, 0.5, 2.0, 2.0], [0, 3, 5]).tolist()
    [1, 2, 0, 3, 4]
    >>> rank_order([2.0, 2.0], [0, 2], ties="docid_desc", doc_ids=["a", "b"]).tolist()
    [1, 0]
    """
    s = _numpy(scores, np.float64)
    offsets = _check_offsets(query_offsets, s.size)
    if _has_nan(s):
        raise ValueError("scores contain NaN")
    return _order(s, offsets, ties, labels, doc_ids)


def _break_ties_by_id(perm: np.ndarray, s: np.ndarray, ids: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Reorder, in place, each run of equal scores inside a query of the ranking ``perm`` by document
    id descending (then input order): ``perm`` becomes ``np.lexsort((-codes, -s, query))``.

    Only the rows in a tie are touched, so ids are compared (strings ranked, by ``np.unique``) for
    those rows alone: a run file of distinct scores costs one comparison pass.

    >>> _break_ties_by_id(np.array([1, 0, 2, 3]), np.array([1., 2., 1., 0.]), np.array(["a", "b", "c", "d"]),
    ...                   np.array([0, 3, 4])).tolist()
    [1, 2, 0, 3]
    """
    n = perm.size
    if n < 2:
        return perm
    in_order = s[perm]
    tie = in_order[1:] == in_order[:-1]  # -0.0 ties with +0.0
    later = offsets[1:-1]
    tie[later[(later > 0) & (later < n)] - 1] = False  # a query's first item ties with nothing before it
    pairs = np.flatnonzero(tie)
    if pairs.size == 0:
        return perm
    member = np.zeros(n, dtype=bool)
    member[pairs] = True
    member[pairs + 1] = True
    items = np.flatnonzero(member)
    run_start = np.ones(items.size, dtype=bool)
    run_start[1:] = ~tie[items[1:] - 1]
    rows = perm[items]
    sub = ids[rows]
    if sub.dtype == object:  # fixed-width strings sort about twice as fast, in the same (code point) order
        sub = sub.astype(str)
    # integer ids order as they are (ltr.data.trec_tables gives the ids' codes); ~x reverses int64 order
    codes = sub.astype(np.int64) if np.issubdtype(sub.dtype, np.integer) else \
        np.unique(sub, return_inverse=True)[1].reshape(-1).astype(np.int64)
    # rows of one query ascend with their position: ties after the id keep input order
    perm[items] = rows[np.lexsort((rows, ~codes, np.cumsum(run_start)))]
    return perm


def _order(s, offsets, ties, labels, doc_ids):
    if ties in ("stable", "average"):
        return _stable_order(s, offsets)
    if ties == "docid_desc":
        if doc_ids is None:
            raise ValueError("ties='docid_desc' needs doc_ids")
        ids = np.asarray(doc_ids).reshape(-1)
        if ids.size != s.size:
            raise ValueError(f"doc_ids has {ids.size} entries, expected {s.size}")
        # the stable ranking, then the runs of equal scores re-sorted by id (what trec_eval does)
        return _break_ties_by_id(_stable_order(s, offsets), s, ids, offsets)
    if ties == "pessimistic":
        if labels is None:
            raise ValueError("ties='pessimistic' needs labels")
        y = np.nan_to_num(_numpy(labels, np.float64), nan=-np.inf)
        qidx = np.repeat(np.arange(offsets.size - 1, dtype=np.int64), np.diff(offsets))
        return np.lexsort((np.arange(s.size), y, -s, qidx))
    raise ValueError(f"unknown ties rule {ties!r}")


#: up to this many label levels, items are counted one level at a time (a comparison and a
#: ``reduceat`` each: half the time of one ``bincount`` of per-item codes with 5 levels); above, by bincount
FEW_LEVELS = 8


def _counts_per_level(labels: np.ndarray, offsets: np.ndarray, lo: float, n_levels: int) -> np.ndarray | None:
    """[Q, n_levels] items of each query whose label equals ``lo + j``; None unless every judged
    (non-NaN) label is one of those levels.

    >>> _counts_per_level(np.array([0., 2., 2., np.nan, 1.]), np.array([0, 3, 3, 5]), 0.0, 3).tolist()
    [[1, 0, 2], [0, 0, 0], [0, 1, 0]]
    """
    lengths = np.diff(offsets)
    nonempty = lengths > 0
    starts = offsets[:-1][nonempty]  # increasing: reduceat's segments are the non-empty queries
    counts = np.zeros((lengths.size, n_levels), dtype=np.int64)
    total = 0
    for j in range(n_levels):
        part = np.add.reduceat(labels == lo + j, starts, dtype=np.int64)
        counts[nonempty, j] = part
        total += int(part.sum())
    judged = labels.size - (int(np.count_nonzero(np.isnan(labels))) if _has_nan(labels) else 0)
    return counts if total == judged else None


def _counts_by_bincount(labels: np.ndarray, offsets: np.ndarray, lo: float, n_levels: int) -> np.ndarray | None:
    """As :func:`_counts_per_level`, with one ``bincount`` of per-item codes (query, level) per block."""
    n_levels += 1  # the last one collects unjudged items, dropped below
    n_q = offsets.size - 1
    nan = _has_nan(labels)
    counts = np.zeros((n_q, n_levels), dtype=np.int64)
    for a, b, q0, lens in _segment_runs(offsets, labels.size):
        block = labels[a:b] - lo if lo else labels[a:b]
        if nan:
            block = np.where(np.isnan(block), n_levels - 1, block)
        code = block.astype(np.int64)
        if not np.array_equal(code, block):
            return None
        code += _per_segment(np.arange(0, lens.size * n_levels, n_levels, dtype=np.int64), lens)
        part = np.bincount(code, minlength=lens.size * n_levels)
        counts[q0:q0 + lens.size] += part.reshape(-1, n_levels)
    return counts[:, :-1]


class RankedLists:
    """Many ranked lists in the flat layout, ordered once; every metric reads the shared ordering.

    Parameters
    ----------
    scores, labels : [N] (labels may be graded, negative, or NaN = unjudged).
    query_offsets : [Q+1].
    conventions : a :class:`~metrics.conventions.Conventions`.
    doc_ids : [N] document ids (needed for ``ties="docid_desc"``).
    item_gain : [N] per-item gains replacing ``gain(label)`` (e.g. a price).
    qrels_labels, qrels_offsets : optional labels of *every judged document* of each query (flat,
        [M] and [Q+1]), including judged documents that were not retrieved: |R| and the ideal DCG
        are then counted over them, as trec_eval and ranx do.
    """

    def __init__(
        self,
        scores: Any,
        labels: Any,
        query_offsets: Any,
        conventions: Conventions | None = None,
        *,
        doc_ids: Any = None,
        item_gain: Any = None,
        qrels_labels: Any = None,
        qrels_offsets: Any = None,
    ) -> None:
        conv = conventions if conventions is not None else get_conventions()
        s = _numpy(scores, np.float64).reshape(-1)
        y = _numpy(labels, np.float64).reshape(-1)
        if s.shape != y.shape:
            raise ValueError(f"scores has {s.size} items but labels has {y.size}")
        offsets = _check_offsets(query_offsets, s.size)
        if _has_nan(s):
            raise ValueError("scores contain NaN")
        ids = None if doc_ids is None else np.asarray(doc_ids).reshape(-1)
        if ids is not None and ids.size != s.size:
            raise ValueError(f"doc_ids has {ids.size} entries, expected {s.size}")
        ig = None if item_gain is None else _numpy(item_gain, np.float64).reshape(-1)
        if ig is not None and ig.size != s.size:
            raise ValueError(f"item_gain has {ig.size} entries, expected {s.size}")
        if (qrels_labels is None) != (qrels_offsets is None):
            raise ValueError("qrels_labels and qrels_offsets go together")
        if conv.unjudged_below is not None:
            y = np.where(y < conv.unjudged_below, np.nan, y)
        if conv.unjudged == "remove":
            keep = ~np.isnan(y)
            if not keep.all():
                ck = np.concatenate([[0], np.cumsum(keep)])
                offsets = ck[offsets].astype(np.int64)
                s, y = s[keep], y[keep]
                ids = None if ids is None else ids[keep]
                ig = None if ig is None else ig[keep]
        if conv.score_dtype == "float32":
            s = s.astype(np.float32).astype(np.float64)
        self.conventions = conv
        self.scores, self.labels, self.offsets = s, y, offsets
        self.doc_ids, self.item_gain = ids, ig
        self.n_items = s.size
        self.n_queries = offsets.size - 1
        self.lengths = np.diff(offsets)
        self.starts = offsets[:-1]
        self.has_qrels = qrels_labels is not None
        if self.has_qrels:
            ql = _numpy(qrels_labels, np.float64).reshape(-1)
            if conv.unjudged_below is not None:
                ql = np.where(ql < conv.unjudged_below, np.nan, ql)
            qo = _check_offsets(qrels_offsets, ql.size, "qrels_offsets")
            if qo.size != offsets.size:
                raise ValueError(f"qrels_offsets describes {qo.size - 1} queries, the run {offsets.size - 1}")
            if ig is not None:
                raise ValueError("item_gain cannot be combined with qrels (unretrieved items have no item gain)")
            self.qrels_labels, self.qrels_offsets = ql, qo
        self._cache: dict = {}

    # ---- the shared ordering -------------------------------------------------------------
    @cached_attribute
    def qidx(self) -> np.ndarray:
        """[N] query index of each row (also of each row of the ranked order: queries keep their rows)."""
        return np.repeat(np.arange(self.n_queries, dtype=np.int64), self.lengths)

    @cached_attribute
    def pos(self) -> np.ndarray:
        """[N] 0-based position of each row inside its query (= rank - 1 in the ranked order)."""
        return np.arange(self.n_items, dtype=np.int64) - np.repeat(self.starts, self.lengths)

    @cached_attribute
    def perm(self) -> np.ndarray:
        """[N] rows in ranked order (query-major)."""
        if self.conventions.ties in ("stable", "average"):
            # the relevant positions for the convention's threshold come out of the same pass
            t = float(self.conventions.threshold)
            out: list = []
            perm = _stable_order(self.scores, self.offsets, (self.labels, t, out))
            if out:
                self._cache[("ridx", t)] = out[0]
            return perm
        return _order(self.scores, self.offsets, self.conventions.ties, self.labels, self.doc_ids)

    @cached_attribute
    def max_len(self) -> int:
        return int(self.lengths.max()) if self.n_queries else 0

    # ---- relevance ------------------------------------------------------------------------
    def _relevant_sorted_index(self, threshold: float) -> np.ndarray:
        """Positions (in ranked order) of the items with label >= threshold, ascending."""
        key = ("ridx", threshold)
        perm = self.perm  # may fill the cache for the conventions' threshold
        if key not in self._cache:
            flag = self.labels >= threshold  # NaN (unjudged) is never relevant
            parts = [np.flatnonzero(flag[perm[a:b]]) + a for a, b in _blocks(self.n_items)]
            self._cache[key] = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
        return self._cache[key]

    def _first_rel(self, threshold: float) -> np.ndarray:
        key = ("first", threshold)
        if key not in self._cache:
            self._cache[key] = np.searchsorted(self._relevant_sorted_index(threshold), self.starts)
        return self._cache[key]

    def hits(self, k: Any, threshold: float) -> np.ndarray:
        """[Q] relevant items among the top min(k, n) (k may be a [Q] array; None = whole list)."""
        if self.conventions.ties == "average":
            return self._avg_hits(k, threshold)
        ridx = self._relevant_sorted_index(threshold)
        end = self.starts + (self.lengths if k is None else np.minimum(k, self.lengths))
        return (np.searchsorted(ridx, end) - self._first_rel(threshold)).astype(np.float64)

    def _rel_in_list(self, threshold: float) -> np.ndarray:
        """[Q] relevant items in each ranked list (int)."""
        key = ("inlist", threshold)
        if key not in self._cache:
            ridx = self._relevant_sorted_index(threshold)
            self._cache[key] = np.searchsorted(ridx, self.offsets[1:]) - self._first_rel(threshold)
        return self._cache[key]

    def n_relevant(self, threshold: float) -> np.ndarray:
        """[Q] |R|: relevant items in the list, or in the qrels when they were given."""
        key = ("R", threshold)
        if key not in self._cache:
            if self.has_qrels:
                qo = self.qrels_offsets
                qq = _per_segment(np.arange(qo.size - 1), np.diff(qo))
                r = np.bincount(qq, weights=self.qrels_labels >= threshold, minlength=qo.size - 1)
            else:
                r = self._rel_in_list(threshold)
            self._cache[key] = np.asarray(r, dtype=np.float64)
        return self._cache[key]

    # ---- gains ----------------------------------------------------------------------------
    def _gains_of(self, labels: np.ndarray, item_gain: np.ndarray | None = None) -> np.ndarray:
        """Gains of ``labels``; unjudged (NaN) labels and labels below the gain floor are worth 0."""
        conv = self.conventions
        nan = _has_nan(labels)
        with np.errstate(invalid="ignore", over="ignore"):
            g = gain_values(np.nan_to_num(labels, nan=0.0) if nan else labels, conv.gain, item_gain)
        floor = conv.gain_floor
        if nan or floor is not None:
            if np.may_share_memory(g, labels) or (item_gain is not None and np.may_share_memory(g, item_gain)):
                g = g.copy()  # a callable gain may hand its input back; never write into it
            zero = np.isnan(labels)
            if floor is not None:
                zero |= labels < floor
            g[zero] = 0.0
        return g

    def _sorted_gains_full(self) -> np.ndarray:
        if "gains_full" not in self._cache:
            rows = self.perm
            ig = None if self.item_gain is None else self.item_gain[rows]
            g = self._gains_of(self.labels[rows], ig)
            if self.conventions.ties == "average":
                g = self._tie_average(g)
            self._cache["gains_full"] = g
        return self._cache["gains_full"]

    # ---- tie averaging (scikit-learn's ndcg_score) ----------------------------------------
    @cached_attribute
    def _tie_groups(self) -> np.ndarray:
        """[N] tie-group id of each item in ranked order (equal score within one query)."""
        s = self.scores[self.perm]
        start = np.ones(self.n_items, dtype=bool)
        if self.n_items:
            start[1:] = s[1:] != s[:-1]
            start[self.starts[self.lengths > 0]] = True
        return np.cumsum(start) - 1

    def _tie_average(self, values: np.ndarray) -> np.ndarray:
        """Replace each value (in ranked order) by the mean over its tie group."""
        gid = self._tie_groups
        if gid.size == 0:
            return values.astype(np.float64)
        sums = np.bincount(gid, weights=values)
        counts = np.bincount(gid)
        return (sums / counts)[gid]

    def _avg_hits(self, k: Any, threshold: float) -> np.ndarray:
        """[Q] expected relevant items in the top k when each tie group is in random order.

        Whole groups inside the cutoff count their relevant items (an integer count); the group the
        cutoff cuts adds ``w * r_g / m_g`` for its ``w`` places inside. Per query, from integer
        prefix counts: no float running sum over all queries, whose rounding would depend on the
        queries before.
        """
        key = ("avgcum", threshold)
        if key not in self._cache:
            rel = (self.labels >= threshold)[self.perm]
            gid = self._tie_groups
            g_start = np.flatnonzero(np.r_[True, gid[1:] != gid[:-1]]) if gid.size else np.zeros(0, np.int64)
            g_size = np.diff(np.r_[g_start, gid.size])
            g_rel = np.bincount(gid, weights=rel, minlength=g_start.size)
            hits = np.concatenate([[0], np.cumsum(rel, dtype=np.int64)])
            self._cache[key] = (hits, g_start, g_size, g_rel)
        hits, g_start, g_size, g_rel = self._cache[key]
        end = self.starts + (self.lengths if k is None else np.minimum(k, self.lengths))
        out = (hits[end] - hits[self.starts]).astype(np.float64)
        q = np.flatnonzero(end > self.starts)
        g = self._tie_groups[end[q] - 1]  # the group of the last place inside the cutoff
        inside = end[q] - g_start[g]
        cut = inside < g_size[g]
        q, g, inside = q[cut], g[cut], inside[cut]
        out[q] = (hits[g_start[g]] - hits[self.starts[q]]) + inside * g_rel[g] / g_size[g]
        return out

    def _avg_first_hit(self, kind: str, k: int | None, threshold: float) -> np.ndarray:
        """[Q] expected RR@k or HitRate@k over uniformly random orders inside each tie group.

        Only the first tie group holding a relevant item matters: s items rank above it, it has m
        items of which r relevant, and the first relevant one sits at its j-th place with
        probability C(m-j, r-1) / C(m, r).
        """
        from scipy.special import gammaln  # only this tie rule needs it

        out = np.zeros(self.n_queries)
        ridx = self._relevant_sorted_index(threshold)
        if ridx.size == 0:
            return out
        first = self._first_rel(threshold)
        q = np.flatnonzero((first < ridx.size) & (ridx[np.minimum(first, ridx.size - 1)] < self.offsets[1:]))
        gid = self._tie_groups
        g_start = np.flatnonzero(np.r_[True, gid[1:] != gid[:-1]])
        g_size = np.diff(np.r_[g_start, gid.size])
        g_rel = np.bincount(gid[ridx], minlength=g_start.size)
        g = gid[ridx[first[q]]]
        before, m, r = g_start[g] - self.starts[q], g_size[g], g_rel[g]

        def log_comb(n, c):
            return gammaln(n + 1.0) - gammaln(c + 1.0) - gammaln(n - c + 1.0)

        if kind == "hit":
            if k is None:
                out[q] = 1.0
                return out
            w = np.clip(k - before, 0, m)  # places of the group inside the cutoff
            miss = np.where(m - w >= r, np.exp(log_comb(m - w, r) - log_comb(m, r)), 0.0)
            out[q] = np.where(w > 0, 1.0 - miss, 0.0)
            return out
        # RR: sum over the first relevant item's possible places j = 1 .. m - r + 1 (and <= k - s)
        last = m - r + 1 if k is None else np.minimum(m - r + 1, np.maximum(k - before, 0))
        terms = np.repeat(np.arange(q.size), last)
        j = np.arange(terms.size) - np.repeat(np.cumsum(last) - last, last) + 1.0
        mt, rt = m[terms], r[terms]
        prob = np.exp(log_comb(mt - j, rt - 1.0) - log_comb(mt, rt))
        out[q] = np.bincount(terms, weights=prob / (before[terms] + j), minlength=q.size)
        return out

    def _ap_tie_steps(self, threshold: float) -> np.ndarray:
        """[Q] sum over tie groups of (relevant in group) * precision at the group's end.

        Divided by |R| this is scikit-learn's average_precision_score: one step per distinct score.
        """
        gid = self._tie_groups
        if gid.size == 0:
            return np.zeros(self.n_queries)
        rel = (self.labels >= threshold)[self.perm].astype(np.float64)
        hits = np.cumsum(rel)
        ends = np.flatnonzero(np.r_[gid[1:] != gid[:-1], True])  # last item of each group
        q = self.qidx[ends]
        before = np.r_[0.0, hits][self.starts[q]]  # relevant items before the query starts
        in_group = np.bincount(gid, weights=rel)
        step = in_group * (hits[ends] - before) / (ends - self.starts[q] + 1)
        return np.bincount(q, weights=step, minlength=self.n_queries)

    # ---- DCG and ideal DCG ----------------------------------------------------------------
    def _discount_table(self, length: int, k: int | None) -> np.ndarray:
        return discount_values(np.arange(1, length + 1), self.conventions.discount, k)

    def dcg(self, k: int | None) -> np.ndarray:
        """[Q] DCG@k of the ranked lists."""
        key = ("dcg", k)
        if key in self._cache:
            return self._cache[key]
        n_q = self.n_queries
        kc = self.max_len if k is None else min(int(k), self.max_len)
        if kc == 0:
            out = np.zeros(n_q)
        elif self.conventions.ties != "average" and n_q * kc <= self.n_items // 2:
            # the top-K rows only, in a [Q, K] gather (positions past a list's end read row 0)
            cols = np.arange(kc)
            valid = cols < self.lengths[:, None]
            idx = self.starts[:, None] + cols
            idx[~valid] = 0
            rows = self.perm[idx]
            ig = None if self.item_gain is None else self.item_gain[rows]
            g = self._gains_of(self.labels[rows], ig)
            g[~valid] = 0.0
            g *= self._discount_table(kc, k)
            out = sum_columns_in_order(g)  # in rank order, as the bincount paths add
        elif self.conventions.ties != "average":
            # block by block over the ranked items, keeping ranks <= k
            disc = self._discount_table(kc, k)
            out = np.zeros(n_q)
            for a, b, q0, q in _segment_blocks(self.offsets, self.n_items, whole=True):
                pos = np.arange(a, b) - self.starts[q]
                rows = self.perm[a:b]
                if kc < self.max_len:
                    keep = pos < kc
                    q, pos, rows = q[keep], pos[keep], rows[keep]
                ig = None if self.item_gain is None else self.item_gain[rows]
                part = np.bincount(q - q0, weights=self._gains_of(self.labels[rows], ig) * disc[pos])
                out[q0:q0 + part.size] += part
        else:
            g = self._sorted_gains_full()
            disc = self._discount_table(self.max_len, k)
            out = np.bincount(self.qidx, weights=g * disc[self.pos], minlength=n_q)
        self._cache[key] = out
        return out

    def _ideal_source(self):
        if self.has_qrels:
            return self.qrels_labels, self.qrels_offsets
        return self.labels, self.offsets

    @cached_attribute
    def _level_counts(self):
        """Items per (query, grade) when the judged labels are a few integer grades, else None.

        Returns ``(counts [Q, G] ordered by decreasing positive gain, gains [G])``.
        """
        labels, offsets = self._ideal_source()
        if self.item_gain is not None or labels.size == 0:
            return None
        lo, hi = np.fmin.reduce(labels), np.fmax.reduce(labels)  # NaN (unjudged) ignored
        if not (np.isfinite(lo) and np.isfinite(hi)) or hi - lo > 64:
            return None
        n_levels = int(hi - lo) + 1
        count = _counts_per_level if n_levels <= FEW_LEVELS else _counts_by_bincount
        counts = count(labels, offsets, lo, n_levels)
        if counts is None:
            return None  # non-integer grades: the general path sorts the gains
        g_level = self._gains_of(np.arange(lo, hi + 1, dtype=np.float64))
        order = np.argsort(-g_level, kind="stable")
        order = order[g_level[order] > 0]  # the ideal ranking holds the positive gains only
        return counts[:, order], g_level[order]

    def ideal_dcg(self, k: int | None) -> np.ndarray:
        """[Q] ideal DCG@k: positive judged gains sorted descending, top min(|R|, k)."""
        key = ("idcg", k)
        if key in self._cache:
            return self._cache[key]
        labels, offsets = self._ideal_source()
        lengths = np.diff(offsets)
        n_q = lengths.size
        max_len = int(lengths.max()) if n_q else 0
        by_level = self._level_counts if max_len else None
        if n_q == 0 or max_len == 0:
            out = np.zeros(n_q)
        elif by_level is not None:
            # grades sorted by gain fill the ideal ranks in order: grade j takes ranks (lo_j, hi_j]
            counts, gains = by_level
            if gains.size == 0:
                out = np.zeros(n_q)
            else:
                hi = np.cumsum(counts, axis=1)
                dcum = np.concatenate([[0.0], np.cumsum(self._discount_table(max_len, k))])
                out = sum_columns_in_order((dcum[hi] - dcum[hi - counts]) * gains)
        else:
            ig = self.item_gain if not self.has_qrels else None
            g = self._gains_of(labels, ig)
            g = np.where(g > 0, g, 0.0)
            qq = np.repeat(np.arange(n_q, dtype=np.int64), lengths)
            pos = np.arange(g.size, dtype=np.int64) - np.repeat(offsets[:-1], lengths)
            perm = _stable_order(g, offsets)
            disc = self._discount_table(max_len, k)
            out = np.bincount(qq, weights=g[perm] * disc[pos], minlength=n_q)
        self._cache[key] = out
        return out

    def _ndcg_rescaled(self, q: int, k: int | None) -> float:
        """NDCG@k of query ``q`` whose ideal DCG overflows float64 (exp2 gains of labels near 1023).

        NDCG does not change when every gain of the query is multiplied by the same factor, so the
        gains are taken as ``2^(y - m) - 2^(-m)`` = ``(2^y - 1) / 2^m``, m = the query's largest
        label (ranked or judged); the same rules as :meth:`_gains_of` zero unjudged and floored labels.
        """
        conv = self.conventions
        if conv.gain != "exp2" or self.item_gain is not None:
            return float("nan")  # other gains do not overflow from labels the readers accept
        a, n = int(self.starts[q]), int(self.lengths[q])
        ranked = self.labels[self.perm[a:a + n]]
        labels, offsets = self._ideal_source()
        judged = labels[offsets[q]:offsets[q + 1]]
        m = max(0.0, float(np.fmax.reduce(np.concatenate([ranked, judged]), initial=0.0)))

        def gains(y):
            with np.errstate(invalid="ignore"):
                g = np.exp2(np.nan_to_num(y, nan=-np.inf) - m) - np.exp2(-m)
            floor = conv.gain_floor
            zero = np.isnan(y) if floor is None else np.isnan(y) | (y < floor)
            return np.where(zero, 0.0, g)

        g = gains(ranked)
        if conv.ties == "average" and n:
            gid = self._tie_groups[a:a + n]
            gid = gid - gid[0]
            g = (np.bincount(gid, weights=g) / np.bincount(gid))[gid]
        ideal_g = -np.sort(-np.maximum(gains(judged), 0.0))
        dcg = float(np.sum(g * self._discount_table(n, k)))
        ideal = float(np.sum(ideal_g * self._discount_table(ideal_g.size, k)))
        return dcg / ideal if ideal > 0 else float("nan")

    # ---- the metrics ----------------------------------------------------------------------
    def _empty(self, values: np.ndarray, is_empty: np.ndarray) -> np.ndarray:
        rule = self.conventions.empty
        fill = {"skip": np.nan, "zero": 0.0, "one": 1.0}[rule]
        return np.where(is_empty, fill, values)

    def metric(self, kind: str, k: int | None = None) -> np.ndarray:
        """[Q] per-query values of metric ``kind`` (one of :data:`KINDS`) at cutoff ``k``."""
        if k is not None:
            if int(k) != k or k < 1:
                raise ValueError(f"cutoff k must be a positive integer, got {k!r}")
            k = int(k)
        conv = self.conventions
        t = float(conv.threshold)
        if conv.ties == "average" and kind == "ap" and k is not None:
            raise ValueError(f"ties='average' is defined for AP without a cutoff only (not ap@{k})")
        # over: exp2 gains of labels near 1023 overflow to inf; NDCG handles it (_ndcg_rescaled)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            if kind == "dcg":
                return self.dcg(k).copy()
            if kind == "ndcg":
                ideal = self.ideal_dcg(k)
                dcg = self.dcg(k)
                values = dcg / ideal
                overflow = ~np.isfinite(ideal) | ~np.isfinite(dcg)  # (a tie group's summed gains may overflow)
                if overflow.any():
                    values = values.copy()
                    values[overflow] = [self._ndcg_rescaled(q, k) for q in np.flatnonzero(overflow)]
                return self._empty(values, ideal <= 0)
            r = self.n_relevant(t)
            empty = r <= 0
            if kind == "p":
                if k is None:
                    denom = self.lengths
                elif conv.p_denominator == "min(K,n)":  # the items shown (TF-Ranking, Rax)
                    denom = np.minimum(k, self.lengths)
                else:
                    denom = np.full(self.n_queries, k)
                value = np.where(denom > 0, self.hits(k, t) / np.maximum(denom, 1), 0.0)
                return self._empty(value, empty)
            if kind == "recall":
                return self._empty(self.hits(k, t) / r, empty)
            if kind == "hit":
                if conv.ties == "average":
                    return self._empty(self._avg_first_hit("hit", k, t), empty)
                return self._empty((self.hits(k, t) > 0).astype(np.float64), empty)
            if kind == "rprec":
                return self._empty(self.hits(r.astype(np.int64), t) / r, empty)
            if kind == "rr" and conv.ties == "average":
                return self._empty(self._avg_first_hit("rr", k, t), empty)
            if kind == "rr":
                ridx = self._relevant_sorted_index(t)
                first = self._first_rel(t)
                found = first < ridx.size
                at = ridx[np.minimum(first, max(ridx.size - 1, 0))] if ridx.size else np.zeros_like(first)
                found &= at < self.offsets[1:]
                rank = (at - self.starts + 1).astype(np.float64)
                ok = found & (True if k is None else rank <= k)
                return self._empty(np.where(ok, 1.0 / rank, 0.0), empty)
            if kind == "ap" and conv.ties == "average":
                return self._empty(self._ap_tie_steps(t) / r, empty)
            if kind == "ap":
                ridx = self._relevant_sorted_index(t)
                first = self._first_rel(t)
                # precision at each relevant item: (hits so far) / rank, both from its position
                seg = np.append(first, ridx.size)
                total = np.zeros(self.n_queries)
                for a, b, q0, lens in _segment_runs(seg, ridx.size, whole=True):
                    qs = slice(q0, q0 + lens.size)
                    rank = ridx[a:b] - _per_segment(self.starts[qs] - 1, lens)
                    prec = np.arange(a, b, dtype=np.float64)
                    prec -= _per_segment(first[qs] - 1, lens)  # hits so far (this item included)
                    prec /= rank
                    if k is not None:
                        prec[rank > k] = 0.0
                    nonempty = lens > 0
                    at = np.concatenate([[0], np.cumsum(lens)[:-1]])[nonempty]
                    total[q0:q0 + lens.size][nonempty] += np.add.reduceat(prec, at)
                norm = r if (conv.map_norm == "R" or k is None) else np.minimum(r, k)
                return self._empty(total / norm, empty)
        raise ValueError(f"unknown metric kind {kind!r}: use one of {', '.join(KINDS)}")


def _flat_inputs(scores, labels, query_offsets, mask, doc_ids, item_gain):
    """Either input layout to the flat one: ``(scores [N] float64, labels, query_offsets, doc_ids, item_gain)``.

    Padded ``[Q, L]`` scores take ``mask`` (not ``query_offsets``); flat scores without
    ``query_offsets`` are one list.
    """
    s = _numpy(scores, np.float64)
    if s.ndim == 2:
        if query_offsets is not None:
            raise ValueError("padded [Q, L] scores take a mask, not query_offsets")
        return flat_from_padded(s, labels, mask, doc_ids, item_gain)
    if query_offsets is None:
        query_offsets = [0, s.size]  # one list
    return s, labels, query_offsets, doc_ids, item_gain


def _one(kind: str, scores, labels, query_offsets, k, mask, preset, doc_ids, item_gain, qrels_labels, qrels_offsets, conventions):
    s, labels, query_offsets, doc_ids, item_gain = _flat_inputs(scores, labels, query_offsets, mask, doc_ids, item_gain)
    conv = get_conventions(preset, **conventions)
    rl = RankedLists(
        s, labels, query_offsets, conv, doc_ids=doc_ids, item_gain=item_gain,
        qrels_labels=qrels_labels, qrels_offsets=qrels_offsets,
    )
    return rl.metric(kind, k)


def _make(kind: str, doc: str):
    def fn(scores, labels, query_offsets=None, k=None, *, mask=None, preset=None, doc_ids=None,
           item_gain=None, qrels_labels=None, qrels_offsets=None, **conventions):
        return _one(kind, scores, labels, query_offsets, k, mask, preset, doc_ids, item_gain,
                    qrels_labels, qrels_offsets, conventions)

    fn.__doc__ = doc + """

    Parameters: ``scores``, ``labels`` flat [N] with ``query_offsets`` [Q+1] (None: a single list),
    or padded [Q, L] with an optional ``mask``; ``k`` the cutoff (None: whole list); ``preset`` and
    keyword conventions as in :class:`metrics.conventions.Conventions`; ``doc_ids``, ``item_gain``,
    ``qrels_labels``/``qrels_offsets`` as in :class:`RankedLists`. Returns a float64 array [Q].
    """
    return fn


ndcg = _make("ndcg", """NDCG@k per query: DCG@k / ideal DCG@k (top min(|R|, k) judged gains).

    >>> ndcg([3., 2., 1.], [3, 0, 2], k=3).round(4)
    array([0.9558])
    >>> ndcg([[3., 2., 1.], [1., 2., 0.]], [[3, 0, 2], [0, 0, 0]], gain="linear", empty="zero").round(4)
    array([0.9386, 0.    ])""")
ndcg.__name__ = ndcg.__qualname__ = "ndcg"
dcg = _make("dcg", """DCG@k per query: sum over the top k of gain(label) * discount(rank).

    >>> dcg([3., 2., 1.], [3, 0, 2], k=3)
    array([8.5])""")
dcg.__name__ = dcg.__qualname__ = "dcg"
average_precision = _make("ap", """AP@k per query (mean over queries = MAP).

    >>> average_precision(np.arange(10.0)[::-1], [0, 0, 0, 1, 1, 1, 0, 0, 0, 0]).round(4)
    array([0.3833])""")
average_precision.__name__ = average_precision.__qualname__ = "average_precision"
reciprocal_rank = _make("rr", """Reciprocal rank of the first relevant item (0 beyond k); mean = MRR.

    >>> float(reciprocal_rank([[3., 2., 1.], [3., 2., 1.], [3., 2., 1.]], [[1, 0, 0], [0, 0, 1], [0, 0, 0]],
    ...                       empty="zero").mean().round(4))
    0.4444""")
reciprocal_rank.__name__ = reciprocal_rank.__qualname__ = "reciprocal_rank"
precision = _make("p", """Precision@k per query: relevant items in the top k, divided by k.

    >>> precision(np.arange(10.0)[::-1], [1, 0, 1, 0, 1, 0, 0, 0, 0, 0], k=5)
    array([0.6])""")
precision.__name__ = precision.__qualname__ = "precision"
recall = _make("recall", """Recall@k per query: relevant items in the top k, divided by |R|.""")
recall.__name__ = recall.__qualname__ = "recall"
hit_rate = _make("hit", """HitRate@k per query: 1 if a relevant item is in the top k, else 0.""")
hit_rate.__name__ = hit_rate.__qualname__ = "hit_rate"
r_precision = _make("rprec", """R-precision per query: relevant items in the top |R|, divided by |R|.""")
r_precision.__name__ = r_precision.__qualname__ = "r_precision"
