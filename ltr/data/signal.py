"""Whether a training set carries any signal: a set whose every feature is constant cannot be ranked by.

``ltr train`` and ``ltr gbdt`` call :func:`check_signal` on ``--train`` before any training: on such
data a run would still finish and report a validation NDCG, that of the order of the ties.
"""

from __future__ import annotations

from ltr.base.errors import LtrError

__all__ = ["check_signal"]


def check_signal(ds, path, option: str = "--train") -> None:
    """Refuse training data whose every feature is constant over its rows: no model can learn a ranking
    from it (every item of a query would score the same), and a run on it would still report a
    validation NDCG, that of the ties' order. Data read in row blocks (a store, Parquet streamed to an
    engine) is not scanned here.

    >>> import numpy as np
    >>> from ltr.data.dataset import RankingDataset
    >>> ds = RankingDataset(np.ones((4, 2), np.float32), np.array([1.0, 0, 1, 0]), np.array([0, 2, 4]), np.array([1, 2]))
    >>> check_signal(ds, "t.txt")
    Traceback (most recent call last):
    ...
    ltr.base.errors.LtrError: --train t.txt: every one of its 2 features is constant over its 4 rows: there is no signal to rank by; check the file (its feature columns, the --*-column options)
    """
    import warnings

    import numpy as np

    from ltr.data.streamed import is_streamed

    if is_streamed(ds):  # its features are read in row blocks by the engine, never whole
        return
    features = getattr(ds, "features", None)
    if not isinstance(features, np.ndarray) or features.size == 0:
        return
    with warnings.catch_warnings():  # an all-NaN column (LightGBM's missing values) is constant too
        warnings.simplefilter("ignore", RuntimeWarning)
        varies = np.nanmax(features, axis=0) > np.nanmin(features, axis=0)
    if not varies.any():
        raise LtrError(f"{option} {path}: every one of its {features.shape[1]} features is constant over its "
                       f"{features.shape[0]} rows: there is no signal to rank by; check the file (its feature columns, "
                       "the --*-column options)")
