"""Feature normalisation fitted on the training split only, then applied unchanged to every split.

Kinds (``x`` one feature column, statistics over the training rows):

- ``"standard"``:        (x - mean) / std
- ``"log1p"``:           sign(x) * log(1 + |x|)  (tames heavy-tailed counts; no statistics)
- ``"log1p_standard"``:  the log1p transform, then standardised
- ``"auto"``:            per feature: constant ones dropped (0), skewed ones signed-log1p'd, then a
                         robust scale (median, IQR) and a clip to the training range
                         (:mod:`ltr.data.auto_transform`; the default of ``ltr train`` since 0.2)
- ``"none"``:            x unchanged

A feature that is constant on the training split has std 0; it is divided by 1 instead (it becomes 0
after centring), so an unseen value on another split stays finite. The statistics are computed in
float64 and the result is float32. ``to_dict`` / ``from_dict`` give a JSON-able form so a run can
store the normaliser next to its model.

>>> norm = Normalizer("standard").fit(np.array([[1.0, 5.0], [3.0, 5.0]]))
>>> norm.transform(np.array([[2.0, 5.0], [5.0, 6.0]])).tolist()
[[0.0, 0.0], [3.0, 1.0]]
>>> Normalizer("log1p").fit_transform(np.array([[-np.e + 1, 0.0]])).round(6).tolist()
[[-1.0, 0.0]]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ltr.data.dataset import RankingDataset
from ltr.data.store import row_blocks

__all__ = ["Normalizer", "KINDS", "signed_log1p", "fit_rows"]

KINDS = ("auto", "standard", "log1p", "log1p_standard", "none")


def fit_rows(n_features: int) -> int:
    """Rows per block of the streaming passes: about 64 MB of float64 values (at least 4096 rows)."""
    return max(4096, (64 << 20) // (8 * max(int(n_features), 1)))


def signed_log1p(x: np.ndarray) -> np.ndarray:
    """``sign(x) * log(1 + |x|)`` elementwise, in the dtype of ``x`` (the ``"log1p"`` transform)."""
    return np.sign(x) * np.log1p(np.abs(x))


class Normalizer:
    """Per-feature normalisation: ``fit`` on the training split, ``transform`` any split.

    ``fit`` / ``transform`` take a :class:`~ltr.data.RankingDataset` (transform returns one with new
    features) or a 2-D array (transform returns an array).
    """

    def __init__(self, kind: str = "standard"):
        if kind not in KINDS:
            raise ValueError(f"unknown normalisation {kind!r}; choose one of {', '.join(KINDS)}")
        self.kind = kind
        self.mean_: np.ndarray | None = None
        self.scale_: np.ndarray | None = None
        self.n_features_: int | None = None
        self.auto_ = None  # kind "auto": the fitted ltr.data.auto_transform.AutoFit

    @staticmethod
    def _matrix(data) -> np.ndarray:
        x = data.features if isinstance(data, RankingDataset) else np.asarray(data)
        if x.ndim != 2:
            raise ValueError(f"features must be a 2-D array [N, F]; got shape {x.shape}")
        return x

    def _pre(self, x: np.ndarray) -> np.ndarray:
        z = x.astype(np.float64)  # a new array: the in-place steps below keep one temporary, not four
        if self.kind in ("log1p", "log1p_standard"):  # = signed_log1p(z), bit for bit
            sign = np.sign(z)
            np.abs(z, out=z)
            np.log1p(z, out=z)
            z *= sign
        return z

    def fit(self, data) -> "Normalizer":
        """Learn the statistics from ``data`` (the training split) in one streaming pass.

        Rows are read in blocks (:func:`fit_rows` of them), so a memory-mapped store is never loaded
        whole. Each block gives its mean and sum of squared deviations; blocks are merged with the
        pairwise update of Chan, Golub and LeVeque (1979):
        ``mean = mean_a + d n_b / n``, ``M2 = M2_a + M2_b + d^2 n_a n_b / n`` with ``d = mean_b - mean_a``;
        std = sqrt(M2 / n). With one block this is exactly numpy's ``mean`` and ``std``.
        """
        x = self._matrix(data)
        self.n_features_ = None
        if self.kind == "auto":
            from ltr.data.auto_transform import fit_auto

            self.auto_ = fit_auto(x, fit_rows(x.shape[1]))
            self.n_features_ = int(x.shape[1])
            return self
        n_total, mean, m2 = 0, None, None
        for _, block in row_blocks(x, fit_rows(x.shape[1])):
            if not np.all(np.isfinite(block)):
                raise ValueError("cannot fit a normaliser on non-finite feature values")
            if self.kind not in ("standard", "log1p_standard"):
                continue
            z = self._pre(block)
            n_b, mean_b = z.shape[0], z.mean(axis=0)
            z -= mean_b
            z *= z
            m2_b = np.sum(z, axis=0)
            if mean is None:
                n_total, mean, m2 = n_b, mean_b, m2_b
            else:
                delta, n = mean_b - mean, n_total + n_b
                mean = mean + delta * (n_b / n)
                m2 = m2 + m2_b + delta * delta * (n_total * n_b / n)
                n_total = n
        if self.kind in ("standard", "log1p_standard"):
            if mean is None:
                raise ValueError("cannot fit a standardising normaliser on zero rows")
            std = np.sqrt(m2 / n_total)
            self.mean_ = mean
            self.scale_ = np.where(std > 0, std, 1.0)
        self.n_features_ = int(x.shape[1])
        return self

    @property
    def is_fitted(self) -> bool:
        return self.n_features_ is not None

    def transform(self, data):
        """Apply the fitted normalisation (to a data set or an array; returns the same kind).

        The output is a new float32 array in memory, computed block by block (a store's features are
        read, never held whole in float64); to train on a store, prefer the in-model
        :class:`ltr.train.models.FeatureTransform`, which normalises each batch as it comes.
        """
        if not self.is_fitted:
            raise RuntimeError("Normalizer.transform called before fit")
        x = self._matrix(data)
        if x.shape[1] != self.n_features_:
            raise ValueError(f"expected {self.n_features_} features (as at fit time); got {x.shape[1]}")
        out = np.empty(x.shape, dtype=np.float32)
        for start, block in row_blocks(x, fit_rows(x.shape[1])):
            if self.kind in ("none", "auto"):
                out[start : start + len(block)] = block if self.kind == "none" else self.auto_.transform(block)
                continue
            z = self._pre(block)
            if self.kind in ("standard", "log1p_standard"):
                z -= self.mean_
                z /= self.scale_
            out[start : start + len(block)] = z
        if isinstance(data, RankingDataset):
            result = data.with_features(out)
            result.meta["normalizer"] = self.kind
            return result
        return out

    def fit_transform(self, data):
        return self.fit(data).transform(data)

    # ---- persistence --------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """JSON-able state (lists of floats; float64 values survive JSON exactly)."""
        state = {
            "kind": self.kind,
            "n_features": self.n_features_,
            "mean": None if self.mean_ is None else self.mean_.tolist(),
            "scale": None if self.scale_ is None else self.scale_.tolist(),
        }
        if self.auto_ is not None:
            state["auto"] = self.auto_.to_dict()
        return state

    @classmethod
    def from_dict(cls, state: dict[str, Any]) -> "Normalizer":
        norm = cls(state["kind"])
        norm.n_features_ = None if state.get("n_features") is None else int(state["n_features"])
        if norm.kind == "auto" and norm.n_features_ is not None:
            from ltr.data.auto_transform import AutoFit

            if not isinstance(state.get("auto"), dict):
                raise ValueError("normaliser state of kind 'auto' lacks its per-feature decisions")
            norm.auto_ = AutoFit.from_dict(state["auto"])
            if norm.auto_.keep.shape != (norm.n_features_,):
                raise ValueError("normaliser state: the auto decisions must have n_features entries")
        if state.get("mean") is not None:
            norm.mean_ = np.asarray(state["mean"], dtype=np.float64)
            norm.scale_ = np.asarray(state["scale"], dtype=np.float64)
            if norm.mean_.shape != (norm.n_features_,) or norm.scale_.shape != (norm.n_features_,):
                raise ValueError("normaliser state: mean and scale must have n_features entries")
        elif norm.kind in ("standard", "log1p_standard") and norm.n_features_ is not None:
            raise ValueError(f"normaliser state of kind {norm.kind!r} lacks mean and scale")
        return norm

    def __repr__(self) -> str:
        fitted = f", n_features={self.n_features_}" if self.is_fitted else ", unfitted"
        return f"Normalizer({self.kind!r}{fitted})"
