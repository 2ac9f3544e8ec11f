"""Auctions from a table: ``ltr auction`` reads requests x ads, runs GSP and VCG
(:mod:`ltr.calibrate.auction`), fits or applies reserve prices per field value, and reports revenue,
welfare, cost per click, the oracle comparison and the winners' PCOC with intervals over requests.

**Table.** One row per candidate ad of a request: a request id, an ad id, the bid per click, the pCTR
at the top slot (a column of probabilities, calibrated or raw, or a score column put through a saved
calibrator), optionally the true click probability at the top slot (simulations; it adds the oracle)
and field columns (for reserves, and for a field calibrator). Clicks follow the separable model: ad
``i`` in slot ``s`` is clicked with probability ``CTR_i x theta_s`` (``--position-effects``, the
position curve; all 1 by default). The table is read into memory and laid out as ``[requests,
max candidates]`` with a mask.

**Reserves per field value** (``fit_reserves``): one per-click reserve for every value of a field
(the device, the site of the request, the advertiser), chosen to maximise the expected GSP revenue
*under the pCTRs* (what an ad system can compute; a miscalibrated pCTR misplaces the reserve, which
is the point of calibrating first): a global reserve first (the default, for values not in the
table), then one coordinate-ascent pass over the values by traffic, each trying 0, the default and
the ``q / grid`` quantiles of its candidates' bids. Fitted on day 1 (``reserves.json``), applied on
day 2.

**Intervals over requests**: a seeded Poisson bootstrap of the requests (each request weighted by a
Poisson(1) count in every replicate); a total's interval is the percentile interval of the weighted
sums, a ratio's (cost per click, winners' PCOC, revenue over the oracle's) that of the ratio of
weighted sums.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ltr.base.errors import LtrError

__all__ = ["AuctionTable", "read_auction_table", "fit_reserves", "reserves_array", "auction_report",
           "auction_report_text", "RESERVES_FORMAT"]

RESERVES_FORMAT = 1


@dataclass
class AuctionTable:
    """Candidates laid out ``[A, K]`` (``mask`` marks the ones that exist)."""

    request_ids: list
    bids: np.ndarray
    pctr: np.ndarray
    true_ctr: np.ndarray | None
    mask: np.ndarray
    fields: dict  # name -> [A, K] canonical value texts (object)
    rows: int
    dropped: dict | None = None

    @property
    def n_requests(self) -> int:
        return int(self.bids.shape[0])


def _pad(values, order, offsets, fill):
    from ltr.calibrate.auction import pad_groups

    return pad_groups(np.asarray(values)[order], offsets, fill=fill)[0]


def _checked(v, *, lo, hi=None):
    """Rows of a number column outside [lo, hi] or not finite."""
    bad = ~np.isfinite(v) | (v < lo)
    if hi is not None:
        bad |= v > hi
    return bad


# long: reading, checking, calibrating and laying out the table, one pass in order
def read_auction_table(path, *, request_column: str, ad_column: str, bid_column: str, pctr_column: str | None = None,
                       score_column: str | None = None, calibrator=None, true_ctr_column: str | None = None,
                       field_columns=(), drop_invalid: bool = False) -> AuctionTable:
    """Read and lay out the table (see the module docstring). With ``calibrator`` the pCTR is
    ``calibrator.predict(score, fields)``; else ``pctr_column`` holds it. Invalid rows (a bid not finite
    or negative, a pCTR or true CTR outside [0, 1], an empty id or field) are refused naming the row, or
    left out and counted with ``drop_invalid``."""
    from pathlib import Path

    import pandas as pd

    from ltr.calibrate.field_calibrators import FieldCodes
    from ltr.calibrate.tables import DROP_HINT, _as_numbers, _empty_values, read_table_columns

    path = Path(path)
    if not path.exists():
        raise LtrError(f"{path}: no such file or folder")
    cal_fields = list(getattr(calibrator, "fields", ()) or ()) if calibrator is not None else []
    fields = list(dict.fromkeys([f for f in field_columns if f] + cal_fields))
    source = score_column if calibrator is not None else pctr_column
    cols = list(dict.fromkeys([request_column, ad_column, bid_column, source] + fields +
                              ([true_ctr_column] if true_ctr_column else [])))
    raw = read_table_columns(path, cols, text_columns=fields + [request_column, ad_column])
    n = len(raw[request_column])
    if n == 0:
        raise LtrError(f"{path}: the table has no rows")
    nums = {c: _as_numbers(raw[c]) for c in (bid_column, source, true_ctr_column) if c}
    need = {bid_column: "a finite number >= 0", source: "a finite number" if calibrator is not None else
            "a probability in [0, 1]"}
    bad = {bid_column: _checked(nums[bid_column], lo=0.0)}
    bad[source] = _checked(nums[source], lo=-np.inf) if calibrator is not None else _checked(nums[source], lo=0.0, hi=1.0)
    if true_ctr_column:
        bad[true_ctr_column], need[true_ctr_column] = _checked(nums[true_ctr_column], lo=0.0, hi=1.0), "a probability in [0, 1]"
    for c in [request_column, ad_column] + fields:
        bad[c] = _empty_values(raw[c])
    any_bad = np.logical_or.reduce(list(bad.values()))
    if any_bad.any() and not drop_invalid:
        c = next(c for c in cols if c in bad and bad[c].any())
        i = int(np.flatnonzero(bad[c])[0])
        if c not in need:
            raise LtrError(f"{path}: column {c!r}, row {i + 1} is empty{DROP_HINT}")
        shown = raw[c][i].item() if isinstance(raw[c][i], np.generic) else raw[c][i]
        raise LtrError(f"{path}: column {c!r}, row {i + 1} holds {shown!r}, which is not {need[c]}{DROP_HINT}")
    keep = ~any_bad
    if not keep.any():
        raise LtrError(f"{path}: every one of the {n} rows is invalid")
    dropped = {c: int(m.sum()) for c, m in bad.items()} | {"total": int(any_bad.sum())} if drop_invalid else None
    raw = {c: np.asarray(v)[keep] for c, v in raw.items()}
    nums = {c: v[keep] for c, v in nums.items()}
    if calibrator is not None:
        pctr = calibrator.predict(nums[source], {f: raw[f] for f in cal_fields}) if cal_fields else \
            calibrator.predict(nums[source])
    else:
        pctr = nums[source]
    codes, uniq = pd.factorize(pd.Series(raw[request_column]).astype(str))
    order = np.argsort(codes, kind="stable")
    offsets = np.r_[0, np.cumsum(np.bincount(codes, minlength=len(uniq)))]
    mask = np.arange(int(np.diff(offsets).max()))[None, :] < np.diff(offsets)[:, None]
    return AuctionTable(
        request_ids=list(uniq), bids=_pad(nums[bid_column], order, offsets, 0.0), pctr=_pad(pctr, order, offsets, 0.0),
        true_ctr=_pad(nums[true_ctr_column], order, offsets, 0.0) if true_ctr_column else None, mask=mask,
        fields={f: _pad(np.asarray(FieldCodes(raw[f]).texts(), dtype=object), order, offsets, "")
                for f in [ad_column] + fields},
        rows=int(keep.sum()), dropped=dropped)


def _revenue(t: AuctionTable, reserve, slots, theta) -> float:
    """Expected GSP revenue under the pCTRs (the quantity the reserves maximise)."""
    from ltr.calibrate.auction import run_auctions

    return run_auctions(t.bids, t.pctr, None, t.mask, slots=slots, position_effects=theta, reserve=reserve).total_revenue


def _grid(bids, grid: int) -> np.ndarray:
    return np.unique(np.quantile(bids, np.arange(1, grid) / grid)) if bids.size else np.zeros(0)


def fit_reserves(t: AuctionTable, field: str, *, slots: int, position_effects, grid: int = 20) -> dict:
    """Per-click reserves per value of ``field`` maximising the expected GSP revenue under the pCTRs
    (the module docstring): ``{"field", "reserves": {value: price}, "default", "revenue", "curves"}``."""
    if field not in t.fields:
        raise LtrError(f"--reserve-field {field!r} is not among the table's field columns ({', '.join(t.fields)})")
    theta = np.asarray(position_effects, dtype=np.float64)
    values = t.fields[field]
    best_default, best = 0.0, _revenue(t, 0.0, slots, theta)
    for r in _grid(t.bids[t.mask], grid):
        rev = _revenue(t, r, slots, theta)
        if rev > best:
            best_default, best = float(r), rev
    keys, counts = np.unique(values[t.mask], return_counts=True)
    reserves = {k: best_default for k in keys.tolist()}
    curves = {}
    current = np.where(t.mask, best_default, 0.0)
    for k in keys[np.argsort(-counts, kind="stable")].tolist():
        here = t.mask & (values == k)
        trial = np.r_[0.0, best_default, _grid(t.bids[here], grid)]
        curve = []
        for r in np.unique(trial):
            rev = _revenue(t, np.where(here, r, current), slots, theta)
            curve.append((float(r), rev))
            if rev > best + 1e-12 * max(abs(best), 1.0):
                best, reserves[k] = rev, float(r)
        current = np.where(here, reserves[k], current)
        curves[k] = curve
    return {"format_version": RESERVES_FORMAT, "field": field, "reserves": reserves, "default": best_default,
            "revenue_under_pctr": best, "slots": slots, "position_effects": theta.tolist(), "curves": curves}


def reserves_array(t: AuctionTable, spec: dict) -> np.ndarray:
    """``[A, K]`` reserves of a fitted ``spec`` (values absent from it take its default)."""
    from ltr.calibrate.auction import field_reserves

    field = spec["field"]
    if field not in t.fields:
        raise LtrError(f"the reserves are per {field!r}, which is not a column named in --field-columns")
    return field_reserves(t.fields[field], spec["reserves"], default=spec["default"])


def _boot(stats: dict, n_requests: int, n_boot: int, level: float, seed: int) -> dict:
    """Percentile intervals of ``sum(c num) / sum(c den)`` (den None: the sum) over Poisson(1) request weights."""
    rng = np.random.default_rng(seed)
    reps = {k: np.empty(n_boot) for k in stats}
    for b in range(n_boot):
        c = rng.poisson(1.0, n_requests).astype(np.float64)
        for k, (num, den) in stats.items():
            top = float(c @ num)
            reps[k][b] = top if den is None else (top / float(c @ den) if c @ den > 0 else np.nan)
    a = (1.0 - level) / 2.0
    out = {}
    for k, (num, den) in stats.items():
        value = float(num.sum()) if den is None else (float(num.sum() / den.sum()) if den.sum() > 0 else float("nan"))
        lo, hi = np.nanquantile(reps[k], [a, 1.0 - a]) if np.isfinite(reps[k]).any() else (np.nan, np.nan)
        out[k] = {"value": value, "low": float(lo), "high": float(hi)}
    return out


def _mechanism_stats(t: AuctionTable, reserve, slots, theta, mechanism) -> dict:
    """Per-request arrays (numerator, denominator) of every reported number for one mechanism."""
    from ltr.calibrate.auction import run_auctions

    res = run_auctions(t.bids, t.pctr, t.true_ctr, t.mask, slots=slots, position_effects=theta, reserve=reserve,
                       mechanism=mechanism)
    clicks, predicted = res.expected_clicks.sum(axis=1), res.predicted_clicks.sum(axis=1)
    stats = {"revenue": (res.revenue, None), "welfare": (res.welfare, None), "expected_clicks": (clicks, None),
             "cost_per_click": (res.revenue, clicks), "shown": ((res.winners >= 0).sum(axis=1).astype(float), None)}
    if t.true_ctr is not None:
        ora = run_auctions(t.bids, t.true_ctr, t.true_ctr, t.mask, slots=slots, position_effects=theta, reserve=reserve,
                           mechanism=mechanism)
        ones = np.ones(t.n_requests)
        stats.update({"winners_pcoc": (predicted, clicks), "revenue_over_oracle": (res.revenue, ora.revenue),
                      "welfare_over_oracle": (res.welfare, ora.welfare), "regret": (ora.welfare - res.welfare, None),
                      "allocation_agreement": ((res.winners == ora.winners).all(axis=1).astype(float), ones)})
    return stats


def auction_report(t: AuctionTable, *, slots: int, position_effects, reserve=0.0, mechanisms=("gsp", "vcg"),
                   n_boot: int = 200, level: float = 0.95, seed: int = 0) -> dict:
    """Every mechanism's numbers with intervals over requests (see the module docstring)."""
    theta = np.asarray(position_effects, dtype=np.float64)
    out = {"requests": t.n_requests, "candidates": int(t.mask.sum()), "slots": slots,
           "position_effects": theta.tolist(), "interval": f"{level:.0%} Poisson bootstrap over requests ({n_boot})",
           "mechanisms": {}}
    for k, mech in enumerate(mechanisms):
        stats = _mechanism_stats(t, reserve, slots, theta, mech)
        out["mechanisms"][mech] = _boot(stats, t.n_requests, n_boot, level, seed + k)
    if t.true_ctr is not None:
        out["all_candidates_pcoc"] = float(t.pctr[t.mask].sum() / t.true_ctr[t.mask].sum())
    return out


def auction_report_text(rep: dict) -> str:
    """The report as a table: one row per number, one column per mechanism, each with its interval."""
    mechs = list(rep["mechanisms"])
    names = [("revenue", "revenue", "{:.1f}"), ("welfare", "welfare", "{:.1f}"), ("cost per click", "cost_per_click", "{:.4f}"),
             ("expected clicks", "expected_clicks", "{:.1f}"), ("ads shown", "shown", "{:.0f}"),
             ("winners' PCOC", "winners_pcoc", "{:.4f}"), ("revenue / oracle", "revenue_over_oracle", "{:.4f}"),
             ("welfare / oracle", "welfare_over_oracle", "{:.4f}"), ("regret", "regret", "{:.1f}"),
             ("allocation agreement", "allocation_agreement", "{:.4f}")]
    lines = [f"{rep['requests']} requests, {rep['candidates']} candidates, {rep['slots']} slots, position effects "
             f"{', '.join(f'{v:g}' for v in rep['position_effects'])}; intervals: {rep['interval']}",
             f"{'':<22}" + "".join(f"{m.upper():>34}" for m in mechs)]
    for label, key, fmt in names:
        if key not in rep["mechanisms"][mechs[0]]:
            continue
        cells = []
        for m in mechs:
            d = rep["mechanisms"][m][key]
            cells.append(f"{fmt.format(d['value'])} [{fmt.format(d['low'])}, {fmt.format(d['high'])}]")
        lines.append(f"{label:<22}" + "".join(f"{c:>34}" for c in cells))
    if "all_candidates_pcoc" in rep:
        lines.append(f"PCOC over all candidates (predicted / true clicks at the top slot): {rep['all_candidates_pcoc']:.4f}")
    return "\n".join(lines) + "\n"
