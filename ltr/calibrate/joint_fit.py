"""Field-aware calibration fitted jointly (``--method field-joint``): the global spline and the field
offsets in one penalised fit, each field's penalty chosen by empirical Bayes, and field x score-segment
slopes where held-out data supports them; the order inside every cell of the fields kept exactly.

The map, for a row with score ``s`` (``x = logit(s)`` for probabilities, else ``x = s``) and field
values ``v_f``::

    z = g(x) + sum_f delta_f[v_f] + sum_{f in I} (shift_f + h_{f, v_f}(x)),     p = sigmoid(z)

* ``g``: the spline of :class:`~ltr.calibrate.field_calibrators.SplineCalibrator` (knots at quantiles
  of the clicked rows' ``x``, every slope ``beta_j >= min_slope``).
* ``delta_f``: one offset per value, with the penalty ``(lambda_f / 2) sum_v delta_f[v]^2`` (a Gaussian
  prior of variance ``1 / lambda_f``). **Joint**: ``g`` and every ``delta`` are one fit
  (:func:`ltr.calibrate.logistic.weighted_logistic` on a :class:`~ltr.calibrate.logistic.CodesDesign`),
  so a score that already carries part of a field's effect does not pull the slope of ``g`` (the
  field-aware method fits ``g`` first, then the offsets under it). **Empirical Bayes**: ``lambda_f``
  starts at ``prior_clicks`` and is re-estimated ``eb_rounds`` times from the EM update of a Gaussian
  random effect under the Laplace approximation, ``1 / lambda_EM = mean_v (delta_v^2 + 1 / (H_vv +
  lambda_f))`` (``H_vv``: the log likelihood's curvature in ``delta_v``), taken twice over in the log
  (``lambda_f <- lambda_f (lambda_EM / lambda_f)^2``, which reaches EM's fixed point in fewer rounds),
  refitting from the last fit.
  A field whose effect the score already carries gets a large ``lambda`` (offsets near 0); a field
  with a wide spread of effects gets a small one (little shrinkage).
* ``h_{f, v}``: for the values with at least ``min_interaction_clicks`` clicks, a piecewise-linear
  function of ``x`` on ``interaction_knots`` coarse knots (zero at the first knot; its slope on coarse
  segment ``c`` is ``gamma_{v, c}``), penalised by ``interaction_penalty``. Fields are tried one at a
  time, in order, on the fitting share of the fit rows (a seeded hash of the row position leaves
  ``holdout`` of them out), each kept only when it lowers the held-out log loss by
  ``min_improvement`` (the **held-out stopping**); the kept ones are refitted on all fit rows.

**Order kept.** Inside a cell (rows sharing every calibrated field's value) the map is ``g + h`` plus
a constant. Each ``gamma_{v, c}`` is bounded below by ``-(min_{j in c} beta_j - min_slope) / F``
(``F``: the number of fields), so the slope of ``g + sum_f h_f`` on every fine segment is at least
``min_slope > 0``: strictly increasing in every cell, so the order of the scores there is kept exactly
(checked on the fit rows; a fit that breaks it is refused).
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np
from scipy.special import expit, log_expit

from ltr.calibrate.calibrators import _as_scores
from ltr.calibrate.field_calibrators import (SplineCalibrator, _check_common, _FieldCalibrator, _field_types, _need,
                                             cell_codes, check_within_field_order)
from ltr.calibrate.field_values import value_key
from ltr.calibrate.logistic import CodesDesign, InteractionDesign, weighted_logistic
from ltr.base.errors import LtrError

__all__ = ["JointFieldCalibrator"]


_ROUGH_TOL = 1e-6  # projected gradient per row of the fits that only choose (penalties, interactions)
_RELAX = 2.0  # the empirical-Bayes update's step in the log of the penalty, in EM steps


def _mean_log_loss(z, y) -> float:
    return float(np.mean(-log_expit(-z) - y * z))


def _coarse_floor(knots, slopes, coarse, min_slope: float, n_fields: int) -> np.ndarray:
    """The lower bound of every coarse segment's interaction slope (the module docstring's rule)."""
    fine = np.r_[-np.inf, knots, np.inf]
    edges = np.r_[-np.inf, coarse, np.inf]
    out = []
    for c in range(edges.shape[0] - 1):
        inside = [j for j in range(slopes.shape[0]) if fine[j] < edges[c + 1] and fine[j + 1] > edges[c]]
        out.append(-(min(slopes[j] for j in inside) - min_slope) / n_fields)
    return np.asarray(out)


class JointFieldCalibrator(_FieldCalibrator):
    """See the module docstring; ``prior_clicks`` is the penalties' starting value."""

    kind = "field-joint"

    def __init__(self, fields, prior_clicks: float = 30.0, n_knots: int = 8, min_slope: float = 1e-3,
                 eb_rounds: int = 3, interactions: bool = True, interaction_knots: int = 3,
                 min_interaction_clicks: float = 200.0, interaction_penalty: float = 100.0, holdout: float = 0.2,
                 min_improvement: float = 1e-6, seed: int = 0, score_scale: str = "auto", tol: float = 1e-8,
                 global_method: str = "spline"):
        from ltr.calibrate.field_calibrators import _scale_flag

        self.fields, self.score_scale = tuple(fields), score_scale
        _scale_flag(score_scale)
        if global_method != "spline":
            raise LtrError("field-joint fits a spline jointly with the offsets; global_method must be 'spline'")
        if not prior_clicks > 0 or not 0.0 < holdout < 1.0 or int(eb_rounds) != eb_rounds or eb_rounds < 0:
            raise LtrError("field-joint needs prior_clicks > 0, holdout in (0, 1) and eb_rounds >= 0")
        self.global_method, self.prior_clicks, self.n_knots, self.min_slope = "spline", float(prior_clicks), int(n_knots), float(min_slope)
        self.eb_rounds, self.interactions, self.interaction_knots = int(eb_rounds), bool(interactions), int(interaction_knots)
        self.min_interaction_clicks, self.interaction_penalty = float(min_interaction_clicks), float(interaction_penalty)
        self.holdout, self.min_improvement, self.seed, self.tol = float(holdout), float(min_improvement), int(seed), float(tol)
        self.global_ = None  # the SplineCalibrator holding g (knots, slopes, intercept)
        self.offsets_: dict | None = None
        self.penalties_: dict | None = None
        self.interactions_: dict | None = None
        self.held_out_: list | None = None
        self.order_check_: dict | None = None

    # ----------------------------------------------------------------- the joint fit (g and the offsets)
    def _stage1(self, B, codes, y, rows, lam=None, start=None, eb_rounds=0):
        """(theta, lambdas) of the joint penalised fit on ``rows``, re-estimating the penalties
        ``eb_rounds`` times (the module docstring)."""
        sizes = [len(c.keys) for c in codes]
        A = CodesDesign(B[rows], [c.codes[rows] for c in codes], sizes)
        k = B.shape[1]
        lam = np.full(len(codes), self.prior_clicks) if lam is None else np.asarray(lam, dtype=np.float64)
        lower = np.r_[np.full(k, self.min_slope), np.full(sum(sizes), -np.inf), -np.inf]
        theta = start
        for r in range(eb_rounds + 1):
            pen = np.r_[np.zeros(k), np.concatenate([np.full(sz, lv) for sz, lv in zip(sizes, lam)]), 0.0]
            # the rounds that only feed the next penalties stop at a looser tolerance (fewer Newton steps)
            tol = self.tol if r == eb_rounds else max(self.tol, _ROUGH_TOL)
            theta = weighted_logistic(A, y[rows], lower=lower, penalty=pen, start=theta, tol=tol)
            if r == eb_rounds:
                break
            q = expit(A @ theta)
            w = q * (1.0 - q)
            for j, c in enumerate(A.codes):
                d = theta[A.starts[j]:A.starts[j + 1]]
                h = np.bincount(c, weights=w, minlength=sizes[j])
                em = sizes[j] / float(np.sum(d * d) + np.sum(1.0 / (h + lam[j])))
                # over-relaxed in the log (twice the EM step): EM creeps towards its fixed point, this
                # reaches it in about half the rounds; bounded so that a field the score carries stops at 1e6
                lam[j] = float(np.clip(lam[j] * (em / lam[j]) ** _RELAX, 1e-3, 1e6))
        return theta, lam

    def _z1(self, B, codes, theta) -> np.ndarray:
        return CodesDesign(B, [c.codes for c in codes], [len(c.keys) for c in codes]) @ theta

    # ----------------------------------------------------------------- interactions (held-out stopping)
    def _interaction(self, f_codes, phi, y, z, rows, floor, keep_keys=None, tol=None):
        """(keys, gammas, shift) of one field's interaction slopes fitted on ``rows`` with offset ``z``."""
        clicks = np.bincount(f_codes.codes[rows], weights=y[rows], minlength=len(f_codes.keys))
        keys = [k for k, c in zip(f_codes.keys, clicks) if c >= self.min_interaction_clicks] if keep_keys is None else keep_keys
        if not keys:
            return None
        index = {k: i for i, k in enumerate(keys)}
        local = np.array([index.get(k, -1) for k in f_codes.keys], dtype=np.int64)[f_codes.codes]
        A = InteractionDesign(phi[rows], local[rows], len(keys))
        p = phi.shape[1]
        lower = np.r_[np.tile(floor, len(keys)), -np.inf]
        pen = np.r_[np.full(len(keys) * p, self.interaction_penalty), 0.0]
        g = weighted_logistic(A, y[rows], lower=lower, penalty=pen, offset=z[rows], tol=tol or self.tol)
        return keys, g[:-1].reshape(len(keys), p), float(g[-1])

    def _h(self, spec, phi, f_codes) -> np.ndarray:
        keys, gam, shift = spec
        index = {k: i for i, k in enumerate(keys)}
        local = np.array([index.get(k, -1) for k in f_codes.keys], dtype=np.int64)[f_codes.codes]
        out = np.full(phi.shape[0], shift)
        m = local >= 0
        out[m] += np.einsum("ij,ij->i", phi[m], gam[local[m]])
        return out

    def _choose_interactions(self, codes, phi, y, z_all, tr, ho, floor) -> tuple[list, list]:
        """Fields whose interaction lowers the held-out log loss, tried in order on the fitting rows."""
        z = z_all.copy()
        best = _mean_log_loss(z[ho], y[ho])
        kept, history = [], [{"step": "joint fit", "held_out_log_loss": best}]
        for f, c in zip(self.fields, codes):
            spec = self._interaction(c, phi, y, z, tr, floor, tol=max(self.tol, _ROUGH_TOL))
            if spec is None:
                history.append({"field": f, "kept": False, "why": "no value with enough clicks"})
                continue
            cand = z + self._h(spec, phi, c)
            loss = _mean_log_loss(cand[ho], y[ho])
            ok = loss < best - self.min_improvement
            history.append({"field": f, "values": len(spec[0]), "held_out_log_loss": loss, "kept": bool(ok)})
            if ok:
                kept.append((f, spec[0]))
                z, best = cand, loss
        return kept, history

    # ----------------------------------------------------------------- fit / predict
    def _basis(self, x):
        return SplineCalibrator._basis(x, self.global_.knots_)

    def _coarse(self, x):
        return SplineCalibrator._basis(x, np.asarray(self.interactions_["knots"]))

    # long: the fit in its order (basis, the joint fit on the fitting share, interactions, the refit on all rows, the check)
    def fit(self, scores, labels, fields=None, *, held_out: bool = True, training_fingerprint: str | None = None):
        from ltr.calibrate.stream_stats import hash_split_rows

        s, y, codes_d = self._start(scores, labels, fields, held_out, training_fingerprint)
        codes = [codes_d[f] for f in self.fields]
        spline = self._global_map_spline(s)
        x = spline._x(s)
        spline.knots_ = np.unique(np.quantile(x[y == 1], np.arange(1, self.n_knots + 1) / (self.n_knots + 1)))
        self.global_ = spline
        B = self._basis(x)
        ho = ~hash_split_rows(np.arange(s.shape[0]), 1.0 - self.holdout, self.seed)
        tr = ~ho
        if y[tr].min() == y[tr].max() or y[ho].min() == y[ho].max():
            raise LtrError("field-joint: the fitting and the held-out share of the fit rows both need both classes")
        theta_tr, lam = self._stage1(B, codes, y, tr, eb_rounds=self.eb_rounds)
        k = B.shape[1]
        coarse = np.unique(np.quantile(x[y == 1], np.arange(1, self.interaction_knots + 1) / (self.interaction_knots + 1)))
        phi = SplineCalibrator._basis(x, coarse)
        kept, history = [], []
        if self.interactions:
            floor = _coarse_floor(spline.knots_, theta_tr[:k], coarse, self.min_slope, len(self.fields))
            kept, history = self._choose_interactions(codes, phi, y, self._z1(B, codes, theta_tr), tr, ho, floor)
        theta, _ = self._stage1(B, codes, y, np.ones(s.shape[0], dtype=bool), lam=lam, start=theta_tr)
        self._store(theta, lam, codes, k)
        z = self._z1(B, codes, theta)
        floor = _coarse_floor(spline.knots_, theta[:k], coarse, self.min_slope, len(self.fields))
        self.interactions_ = {"knots": coarse.tolist(), "fields": {}}
        every = np.ones(s.shape[0], dtype=bool)
        for f, keys in kept:
            c = codes[self.fields.index(f)]
            spec = self._interaction(c, phi, y, z, every, floor, keep_keys=keys)
            z = z + self._h(spec, phi, c)
            self.interactions_["fields"][f] = {"shift": spec[2], "slopes": {kk: g.tolist() for kk, g in zip(spec[0], spec[1])}}
        self.held_out_ = history
        self.order_check_ = check_within_field_order(s, z, cell_codes(codes))
        if any(self.order_check_.values()):
            bad, self.offsets_ = self.order_check_, None
            raise LtrError(f"field-joint fit refused: inside groups of equal {', '.join(self.fields)} the calibrated "
                           f"values do not keep the order of the scores ({bad['reversed']} reversed, "
                           f"{bad['ties_created']} ties created, {bad['ties_broken']} ties broken)")
        return self

    def _global_map_spline(self, s) -> SplineCalibrator:
        from ltr.calibrate.field_calibrators import _scale_flag

        flag = _scale_flag(self.score_scale)
        prob = bool(s.size and s.min() >= 0.0 and s.max() <= 1.0) if flag is None else flag
        return SplineCalibrator(input="probability" if prob else "score", n_knots=self.n_knots, min_slope=self.min_slope)

    def _store(self, theta, lam, codes, k) -> None:
        self.global_.slopes_, self.global_.intercept_ = theta[:k], float(theta[-1])
        self.global_.n_fit_, self.global_.fit_fingerprint_ = self.n_fit_, self.fit_fingerprint_
        starts = np.r_[0, np.cumsum([len(c.keys) for c in codes])] + k
        self.offsets_ = {f: dict(zip(c.keys, theta[starts[j]:starts[j + 1]].tolist()))
                         for j, (f, c) in enumerate(zip(self.fields, codes))}
        self.penalties_ = {f: float(v) for f, v in zip(self.fields, lam)}

    def _require_fitted(self):
        if self.offsets_ is None or self.global_ is None or self.interactions_ is None:
            raise LtrError("JointFieldCalibrator is not fitted: call fit(scores, labels, fields) first")

    def fitted_values(self, field: str) -> set:
        self._require_fitted()
        return set(self.offsets_[field])

    def logit(self, scores, fields) -> np.ndarray:
        self._require_fitted()
        s = _as_scores(scores)
        codes = self.codes_for(fields, s.shape[0], self.offsets_)
        x = self.global_._x(s)
        z = self._basis(x) @ self.global_.slopes_ + self.global_.intercept_
        for f in self.fields:
            z = z + codes[f].lookup(self.offsets_[f])[0][:, 0]
        if self.interactions_["fields"]:
            phi = self._coarse(x)
            for f, spec in self.interactions_["fields"].items():
                vals = codes[f].lookup(spec["slopes"], width=phi.shape[1])[0]
                z = z + spec["shift"] + np.einsum("ij,ij->i", phi, vals)
        return z

    def predict(self, scores, fields=None) -> np.ndarray:
        """Calibrated probabilities; ``fields``: ``{name: values per row}`` for every calibrated field."""
        return expit(self.logit(scores, fields))

    def to_dict(self) -> dict[str, Any]:
        d = self._common_dict()
        d.update({"n_knots": self.n_knots, "min_slope": self.min_slope, "eb_rounds": self.eb_rounds,
                  "interaction_knots": self.interaction_knots, "min_interaction_clicks": self.min_interaction_clicks,
                  "interaction_penalty": self.interaction_penalty, "holdout": self.holdout,
                  "min_improvement": self.min_improvement, "seed": self.seed, "offsets": self.offsets_,
                  "penalties": self.penalties_, "interactions": self.interactions_, "held_out": self.held_out_,
                  "order_check": self.order_check_})
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "JointFieldCalibrator":
        from ltr.calibrate.field_calibrators import _global_from_dict

        _check_common(d, "field-joint")
        _need(d, ("offsets", "penalties", "interactions", "n_knots", "min_slope"), "field-joint")
        cal = cls(d["fields"], prior_clicks=d["prior_clicks"], n_knots=d["n_knots"], min_slope=d["min_slope"])
        cal.global_ = _global_from_dict(d["global"])
        off, inter = d["offsets"], d["interactions"]
        if not isinstance(off, dict) or set(off) != set(cal.fields) or not isinstance(inter, dict):
            raise LtrError("field-joint calibrator JSON: 'offsets' needs one table per field, 'interactions' a table")
        for table in list(off.values()) + [s.get("slopes", {}) for s in inter.get("fields", {}).values()]:
            flat = [v for row in table.values() for v in (row if isinstance(row, list) else [row])]
            if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in flat):
                raise LtrError("field-joint calibrator JSON: offsets and interaction slopes must be finite numbers")
        cal.offsets_ = {f: {value_key(k): float(v) for k, v in off[f].items()} for f in cal.fields}
        cal.interactions_ = {"knots": list(inter.get("knots", [])), "fields": {
            f: {"shift": float(s["shift"]), "slopes": {value_key(k): list(v) for k, v in s["slopes"].items()}}
            for f, s in inter.get("fields", {}).items()}}
        cal.penalties_, cal.held_out_ = d["penalties"], d.get("held_out")
        cal.field_types_, cal.order_check_ = _field_types(d, cal.fields), d.get("order_check")
        cal.n_fit_, cal.fit_fingerprint_ = int(d["n_fit"]), d["fit_fingerprint"]
        return cal
