"""One pass over a table larger than memory: binned sufficient statistics of (score, label, fields, weight).

``ltr calibrate --table PATH --stream`` reads the named columns of a Parquet file / folder (or a CSV
file) in record batches (``pyarrow.dataset``, only those columns) and keeps, for the fit part and the
evaluation part separately, one row of sums per occupied **entry** = (cell, score bin):

* cell: the combination of the values of all field columns (one cell when there are none); values are
  compared as values (:mod:`ltr.calibrate.field_values`: 3, 3.0 and "3" are one value);
* score bin: ``x`` is the logit of the score (``logit(clip(s, 1e-15, 1 - 1e-15))`` for probability
  scores, the score itself for logit scores), cut into bins of width ``bin_width`` on
  ``[-x_limit, x_limit)``, plus one bin below and one above (the tails).

The sums of an entry (``COLUMNS``; without a weight column only ``PLAIN_COLUMNS``, the others being equal to them): ``rows`` and ``pos`` (rows and clicks, unweighted), ``sx`` (sum of
``x``), ``sp`` (sum of the probability ``p``), ``w``, ``wy``, ``wp`` (weighted rows, clicks, predicted
clicks), ``wll`` (weighted log loss ``-(y ln p + (1 - y) ln(1 - p))`` with ``p`` clipped to float64 eps as
:func:`metrics.log_loss`), and ``ww``, ``wwpp``, ``wwpy``, ``wwy`` (``sum w^2``, ``sum w^2 p^2``, ``sum w^2 p y``, ``sum w^2 y``: the
delta-method variance of a PCOC). Every one of them is a sum over rows, so a batch adds its own sums
and the result does not depend on how the rows are cut into batches (up to the order of floating-point
additions: a few units in the last place).

**What is exact and what is binned.** Counts, clicks, predicted clicks, log-loss sums and the variance
sums are exact per cell, so everything computed from them before calibration is exact: normalized
entropy, PCOC, per-field-value count / clicks / PCOC, F-RCE and field ECE. What needs the score of each
row is approximated by its entry's mean ``x`` (``sx / rows``): the calibrator fits (Platt, beta, spline,
field-aware: weighted fits on the entries; isotonic: PAV on the entries), every number after
calibration (the map applied at the entry's mean, its error within a bin of width ``h`` about
``h^2 / 8`` times the map's curvature), the AUCs (rows of one entry counted as tied) and the value ECE.

The split into fit and evaluation rows is a seeded hash of the row's position in the table
(:func:`hash_split`), so it too does not depend on the batch size.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ltr.calibrate.field_values import value_key
from ltr.base.errors import LtrError

__all__ = ["COLUMNS", "PLAIN_COLUMNS", "BinGrid", "BinnedTable", "BinnedStats", "hash_split", "hash_split_rows", "stream_table", "LOGIT_EPS"]

COLUMNS = ("rows", "pos", "sx", "sp", "w", "wy", "wp", "wll", "ww", "wwpp", "wwpy", "wwy")
# without a weight column (w = 1) five sums repeat others: only these are stored, the rest are aliases
PLAIN_COLUMNS = ("rows", "pos", "sx", "sp", "wll", "wwpp", "wwpy")
_ALIASES = {"w": "rows", "wy": "pos", "wp": "sp", "ww": "rows", "wwy": "pos"}
LOGIT_EPS = 1e-15  # = PlattCalibrator's logit_eps: the binned x is the x Platt sees


def hash_split(start: int, n: int, fit_fraction: float, seed: int) -> np.ndarray:
    """Whether rows ``start .. start + n - 1`` belong to the fit part (:func:`hash_split_rows`)."""
    return hash_split_rows(np.arange(start, start + n, dtype=np.uint64), fit_fraction, seed)


def hash_split_rows(rows, fit_fraction: float, seed: int) -> np.ndarray:
    """Whether the rows at positions ``rows`` (0-based, in the table) belong to the fit part:
    ``u(row) < fit_fraction`` with ``u`` the top 53 bits of SplitMix64(row + seed * 0x9E3779B97F4A7C15)
    over 2^53, a function of the row's position only (the same rows whatever the batch size, and in
    memory as in a streamed pass; rows left out as invalid do not move the others)."""
    with np.errstate(over="ignore"):
        z = np.asarray(rows, dtype=np.uint64) + np.uint64((seed * 0x9E3779B97F4A7C15) % 2**64)
        z = z + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) * 2.0**-53 < fit_fraction


@dataclass(frozen=True)
class BinGrid:
    """Bins of width ``width`` on ``[-limit, limit)`` in the logit, bin 0 and bin ``n - 1`` the tails."""

    width: float = 0.05
    limit: float = 16.0

    @property
    def n(self) -> int:
        return int(round(2 * self.limit / self.width)) + 2

    def index(self, x: np.ndarray) -> np.ndarray:
        b = np.floor((x + self.limit) / self.width)
        return (np.clip(b, -1, self.n - 2) + 1).astype(np.int64)

    def edges(self, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Lower and upper edge of bins ``b`` (``-inf`` / ``inf`` for the tails)."""
        lo = -self.limit + (b - 1) * self.width
        hi = lo + self.width
        return np.where(b == 0, -np.inf, lo), np.where(b == self.n - 1, np.inf, hi)


@dataclass
class BinnedTable:
    """The entries of one part: sorted ``keys = cell * grid.n + bin`` and their sums ``[K, len(COLUMNS)]``."""

    columns: tuple = COLUMNS
    keys: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    sums: np.ndarray | None = None

    def __post_init__(self):
        if self.sums is None:
            self.sums = np.zeros((0, len(self.columns)))
        self._pending: list = []
        self._pending_rows = 0

    def add(self, keys: np.ndarray, sums: np.ndarray) -> None:
        """Add the sums of (unique, sorted) ``keys``: in place where the key is in the table, else kept
        aside and inserted in one merge once they reach a quarter of the table (:meth:`flush`), so that
        the table is not copied at every batch."""
        pos = np.searchsorted(self.keys, keys)
        known = pos < self.keys.shape[0]
        known[known] = self.keys[pos[known]] == keys[known]
        self.sums[pos[known]] += sums[known]
        if not known.all():
            self._pending.append((keys[~known], sums[~known]))
            self._pending_rows += int((~known).sum())
            if self._pending_rows > max(self.keys.shape[0] // 4, 50_000):
                self.flush()

    def flush(self) -> "BinnedTable":
        """Insert the entries kept aside (their sums combined per key) into the sorted table."""
        if not self._pending:
            return self
        keys = np.concatenate([k for k, _ in self._pending])
        uk, inv = np.unique(keys, return_inverse=True)
        inv = inv.reshape(-1)
        add = np.empty((uk.shape[0], len(self.columns)))
        for j in range(len(self.columns)):
            add[:, j] = np.bincount(inv, weights=np.concatenate([s[:, j] for _, s in self._pending]), minlength=uk.shape[0])
        self._pending, self._pending_rows = [], 0
        at = np.searchsorted(self.keys, uk) + np.arange(uk.shape[0])  # where the new keys go in the merged table
        old = np.ones(self.keys.shape[0] + uk.shape[0], dtype=bool)
        old[at] = False
        keys_out = np.empty(old.shape[0], dtype=np.int64)
        keys_out[old], keys_out[at] = self.keys, uk
        sums_out = np.empty((old.shape[0], len(self.columns)))
        sums_out[old], sums_out[at] = self.sums, add
        self.keys, self.sums = keys_out, sums_out
        return self

    def col(self, name: str) -> np.ndarray:
        if name not in self.columns:
            name = _ALIASES[name]
        return self.sums[:, self.columns.index(name)]

    def digest(self) -> str:
        h = hashlib.sha256(b"binned:")
        h.update(np.ascontiguousarray(self.keys).tobytes())
        h.update(np.ascontiguousarray(self.sums).tobytes())
        return h.hexdigest()


def _row_sums(x, p, y, w) -> np.ndarray:
    """The quantities that ``COLUMNS`` (``w`` given) or ``PLAIN_COLUMNS`` (``w`` None) sum, one row each: ``[columns, n]``."""
    e = np.finfo(np.float64).eps
    pc = np.clip(p, e, 1.0 - e)
    ll = -(y * np.log(pc) + (1.0 - y) * np.log1p(-pc))
    if w is None:
        return np.vstack([np.ones_like(x), y, x, p, ll, p * p, p * y])
    wp, wy = w * p, w * y
    return np.vstack([np.ones_like(x), y, x, p, w, wy, wp, w * ll, w * w, wp * wp, wp * wy, w * wy])


class BinnedStats:
    """The accumulator: field vocabularies, cells, and a :class:`BinnedTable` for the fit and evaluation parts.

    ``add_batch`` takes one batch (numpy scores, labels, weights or None, and per field an array of
    values as text); rows are numbered in the order they arrive.
    """

    def __init__(self, fields=(), *, probabilities: bool = True, grid: BinGrid = BinGrid(),
                 fit_fraction: float = 0.5, seed: int = 0, weighted: bool = False):
        self.fields, self.weighted = tuple(fields), bool(weighted)
        self.probabilities, self.grid = bool(probabilities), grid
        self.fit_fraction, self.seed = float(fit_fraction), int(seed)
        self.vocab: list[dict] = [{} for _ in self.fields]
        self.cell_index: dict = {}
        self.cell_codes: list = []
        cols = COLUMNS if self.weighted else PLAIN_COLUMNS
        self.fit, self.eval = BinnedTable(cols), BinnedTable(cols)
        self.n_rows, self._canonical = 0, False
        self.n_read, self.dropped = 0, None  # rows read and rows left out (stream_table with drop_invalid)

    def _cells(self, fields: list, n: int) -> np.ndarray:
        """Global cell id per row; ``fields``: per field ``(indices, words)``, the row's index into the
        batch's list of distinct values (as text)."""
        if not self.fields:
            if not self.cell_codes:
                self.cell_index[()] = 0
                self.cell_codes.append(())
            return np.zeros(n, dtype=np.int64)
        codes, local, radix = [], np.zeros(n, dtype=np.int64), 1
        for j, (idx, words) in enumerate(fields):
            gmap = np.array([self.vocab[j].setdefault(value_key(u), len(self.vocab[j])) for u in words], dtype=np.int64)
            codes.append(gmap[idx])
            if radix * (len(words) + 1) >= 2**62:  # re-code before the mixed-radix number could overflow
                local = np.unique(local, return_inverse=True)[1].reshape(-1)
                radix = int(local.max()) + 1
            local, radix = local * (len(words) + 1) + idx, radix * (len(words) + 1)
        _, first, local = np.unique(local, return_index=True, return_inverse=True)
        local = local.reshape(-1)
        gid = np.empty(first.shape[0], dtype=np.int64)
        for i, r in enumerate(first):
            key = tuple(int(c[r]) for c in codes)
            if key not in self.cell_index:
                self.cell_index[key] = len(self.cell_codes)
                self.cell_codes.append(key)
            gid[i] = self.cell_index[key]
        return gid[local]

    def add_batch(self, scores: np.ndarray, labels: np.ndarray, fields: list, weights=None, rows=None) -> None:
        """Add one batch; ``fields``: per field either an array of values or ``(indices, words)``;
        ``rows``: the rows' positions in the table (default: numbered in the order they arrive)."""
        s = np.asarray(scores, dtype=np.float64)
        fields = [f if isinstance(f, tuple) else _encode(f) for f in fields]
        y = np.asarray(labels, dtype=np.float64)
        if (weights is not None) != self.weighted:
            raise ValueError(f"this accumulator was made with weighted={self.weighted}: give weights {'with' if self.weighted else 'without'} every batch")
        w = None if weights is None else np.asarray(weights, dtype=np.float64)
        if self.probabilities:
            pc = np.clip(s, LOGIT_EPS, 1.0 - LOGIT_EPS)
            x, p = np.log(pc) - np.log1p(-pc), s
        else:
            from scipy.special import expit

            x, p = s, expit(s)
        keys = self._cells(fields, s.shape[0]) * self.grid.n + self.grid.index(x)
        fit = (hash_split(self.n_rows, s.shape[0], self.fit_fraction, self.seed) if rows is None
               else hash_split_rows(rows, self.fit_fraction, self.seed))
        rows = _row_sums(x, p, y, w)  # [len(columns), n]
        for table, m in ((self.fit, fit), (self.eval, ~fit)):
            if m.any():
                uk, inv = np.unique(keys[m], return_inverse=True)
                inv, part = inv.reshape(-1), rows[:, m]
                sums = np.column_stack([np.bincount(inv, weights=col, minlength=uk.shape[0]) for col in part])
                table.add(uk, sums)
        self.n_rows += s.shape[0]
        self._canonical = False

    def canonical(self) -> "BinnedStats":
        """Insert the entries kept aside, then renumber values (sorted as text) and cells (sorted by
        their values' codes), so that the tables do not depend on the order the values arrived in (the
        batch size). In place (once: again only after more batches); returns self."""
        self.fit.flush()
        self.eval.flush()
        if not self.fields or not self.cell_codes or self._canonical:
            return self
        self._canonical = True
        remaps = []
        for j, vocab in enumerate(self.vocab):
            words = sorted(vocab)
            new = {w: i for i, w in enumerate(words)}
            remaps.append(np.array([new[w] for w in vocab], dtype=np.int64))  # old code -> new code
            self.vocab[j] = new
        cc = np.asarray(self.cell_codes, dtype=np.int64)
        cc = np.column_stack([remaps[j][cc[:, j]] for j in range(cc.shape[1])])
        order = np.lexsort(cc.T[::-1])
        new_id = np.empty(cc.shape[0], dtype=np.int64)
        new_id[order] = np.arange(cc.shape[0])
        self.cell_codes = [tuple(int(v) for v in row) for row in cc[order]]
        self.cell_index = {c: i for i, c in enumerate(self.cell_codes)}
        for table in (self.fit, self.eval):
            keys = new_id[table.keys // self.grid.n] * self.grid.n + table.keys % self.grid.n
            o = np.argsort(keys, kind="stable")
            table.keys, table.sums = keys[o], table.sums[o]
        return self

    def values(self, j: int) -> list:
        """The values of field ``j`` in code order."""
        return list(self.vocab[j])

    def entry_cells(self, table: BinnedTable) -> tuple[np.ndarray, np.ndarray]:
        """(cell id, bin) of every entry of ``table``."""
        return table.keys // self.grid.n, table.keys % self.grid.n

    def entry_codes(self, table: BinnedTable) -> np.ndarray:
        """``[K, n_fields]``: the code of each field's value for every entry."""
        cc = np.asarray(self.cell_codes, dtype=np.int32).reshape(len(self.cell_codes), len(self.fields))
        return cc[self.entry_cells(table)[0]]


def _encode(values) -> tuple[np.ndarray, list]:
    """``(indices, words)`` of an array of field values (words: their canonical texts)."""
    from ltr.calibrate.field_values import encode_values

    return encode_values(values)


def _column_numbers(arr) -> np.ndarray:
    """Float64 of an arrow column, NaN where null or not a number."""
    from ltr.calibrate.tables import _as_numbers

    v = _as_numbers(arr.to_numpy(zero_copy_only=False))
    if arr.null_count:
        v = v.copy()
        v[arr.is_null().to_numpy(zero_copy_only=False)] = np.nan
    return v


def _empty_field(arr) -> np.ndarray:
    """Rows of an arrow field column that are null, NaN or empty text."""
    import pyarrow as pa
    import pyarrow.compute as pc

    empty = arr.is_null().to_numpy(zero_copy_only=False)
    if pa.types.is_floating(arr.type):
        empty = empty | np.isnan(arr.to_numpy(zero_copy_only=False).astype(np.float64))
    elif pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
        trimmed = pc.utf8_trim_whitespace(arr)
        empty = empty | pc.fill_null(pc.equal(trimmed, ""), False).to_numpy(zero_copy_only=False)
    return empty


def batch_columns(path, batch, names: dict, row0: int, drop_invalid: bool = False) -> dict:
    """Numpy scores, labels, weights and field values of one record batch, checked.

    ``names``: ``score``, ``label`` (None: no labels), ``fields`` (list), ``weight`` (or None). Invalid
    rows (:mod:`ltr.calibrate.tables`) stop with an error naming the file row (``row0`` = rows before
    this batch), or with ``drop_invalid`` are left out: ``keep`` is then the mask of the rows kept
    (None when all are) and ``dropped`` the counts by reason. ``texts``: per field ``(indices, words)``
    over the kept rows, ``words`` the distinct values as Python objects."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from ltr.calibrate.tables import _NEED, DROP_HINT

    checks = [(names["score"], "score")] + ([(names["label"], "label")] if names.get("label") else [])
    checks += [(f, "field") for f in names["fields"]] + ([(names["weight"], "weight")] if names.get("weight") else [])
    values, bad = {}, {}
    for col, what in checks:
        arr = batch.column(col)
        if what == "field":
            bad[col] = _empty_field(arr)
            continue
        v = values[col] = _column_numbers(arr)
        bad[col] = ~np.isfinite(v) | ((v != 0) & (v != 1) if what == "label" else (v < 0) if what == "weight" else False)
    if not drop_invalid:
        for col, what in checks:
            if bad[col].any():
                i = int(np.flatnonzero(bad[col])[0])
                raw = batch.column(col)[i].as_py()
                if what == "field" or raw is None:
                    raise LtrError(f"{path}: column {col!r}, row {row0 + i + 1} is empty{DROP_HINT}")
                raise LtrError(f"{path}: column {col!r}, row {row0 + i + 1} holds {raw!r}, which is not {_NEED[what]}{DROP_HINT}")
    any_bad = np.logical_or.reduce([bad[c] for c, _ in checks])
    keep = ~any_bad if any_bad.any() else None
    dropped = {what if what != "field" else "fields": 0 for _, what in checks}
    for col, what in checks:
        dropped[what if what != "field" else "fields"] += 0 if what == "field" else int(bad[col].sum())
    if names["fields"]:
        dropped["fields"] = int(np.logical_or.reduce([bad[f] for f in names["fields"]]).sum())
    dropped["total"] = int(any_bad.sum())
    texts = []
    for f in names["fields"]:
        arr = batch.column(f) if keep is None else batch.column(f).filter(pa.array(keep))
        d = pc.dictionary_encode(arr)
        texts.append((d.indices.to_numpy(zero_copy_only=False).astype(np.int64), d.dictionary.to_pylist()))

    def kept(col):
        return None if not col else (values[col] if keep is None else values[col][keep])

    return {"s": kept(names["score"]), "y": kept(names.get("label")), "w": kept(names.get("weight")), "texts": texts,
            "keep": keep, "dropped": dropped}


def _open_dataset(path: Path, cols: list):
    """A ``pyarrow.dataset`` over a Parquet file / folder or a CSV file, with the columns checked."""
    import pyarrow.dataset as ds

    from ltr.data.parquet import is_parquet

    fmt = "parquet" if is_parquet(path) else "csv"
    try:
        d = ds.dataset(str(path), format=fmt)
    except (OSError, ValueError) as exc:
        raise LtrError(f"{path}: cannot open as a {fmt} table ({exc})") from None
    absent = [c for c in cols if c not in d.schema.names]
    if absent:
        raise LtrError(f"{path}: no column {absent[0]!r}; the columns are {', '.join(d.schema.names)}")
    return d


def stream_table(path, *, score_column: str = "score", label_column: str = "label", field_columns=(),
                 weight_column: str | None = None, score_scale: str = "auto", fit_fraction: float = 0.5,
                 seed: int = 0, grid: BinGrid = BinGrid(), batch_size: int = 262_144,
                 drop_invalid: bool = False) -> BinnedStats:
    """Read the named columns in record batches of at most ``batch_size`` rows and return the
    :class:`BinnedStats` of the table. ``score_scale``: ``"probability"`` (scores in [0, 1]),
    ``"logit"`` (raw scores, ``p = sigmoid(s)``), or ``"auto"`` (probability when the first batch lies in
    [0, 1]; a later score outside it is then an error that names ``--score-scale logit``). Invalid rows
    stop the pass, or with ``drop_invalid`` are left out and counted (``stats.dropped``; the split
    stays a function of each row's position in the file)."""
    path = Path(path)
    if not path.exists():
        raise LtrError(f"{path}: no such file or folder")
    if score_scale not in ("auto", "probability", "logit"):
        raise LtrError(f"score scale must be auto, probability or logit, got {score_scale!r}")
    fields = [f for f in field_columns if f]
    cols = [score_column, label_column] + fields + ([weight_column] if weight_column else [])
    if len(set(cols)) != len(cols):
        raise LtrError(f"a column is named twice in --score-column / --label-column / --field-columns / --weight-column: {cols}")
    dataset = _open_dataset(path, cols)
    names = {"score": score_column, "label": label_column, "fields": fields, "weight": weight_column}
    stats, read, dropped = None, 0, {}
    for batch in dataset.to_batches(columns=cols, batch_size=int(batch_size)):
        if batch.num_rows == 0:
            continue
        b = batch_columns(path, batch, names, read, drop_invalid)
        for k, v in b["dropped"].items():
            dropped[k] = dropped.get(k, 0) + v
        where = read + (np.arange(batch.num_rows) if b["keep"] is None else np.flatnonzero(b["keep"]))
        read += batch.num_rows
        s = b["s"]
        if s.shape[0] == 0:
            continue
        inside = bool(s.min() >= 0.0 and s.max() <= 1.0)
        if stats is None:
            prob = inside if score_scale == "auto" else score_scale == "probability"
            stats = BinnedStats(fields, probabilities=prob, grid=grid, fit_fraction=fit_fraction, seed=seed,
                                weighted=weight_column is not None)
        if stats.probabilities and not inside:
            i = int(np.flatnonzero((s < 0) | (s > 1))[0])
            hint = " (the first batch was all in [0, 1]; pass --score-scale logit for raw scores)" if score_scale == "auto" else ""
            raise LtrError(f"{path}: column {score_column!r}, row {int(where[i]) + 1} holds {float(s[i])!r}, which is not a "
                           f"probability in [0, 1]{hint}")
        stats.add_batch(s, b["y"], b["texts"], b["w"], rows=where)
    if stats is None:
        raise LtrError(f"{path}: the table has no rows" if read == 0 else f"{path}: every one of the {read} rows is invalid")
    stats.n_read, stats.dropped = read, (dropped if drop_invalid else None)
    return stats.canonical()
