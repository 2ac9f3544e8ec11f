"""Names that moved in 0.2, reachable from their old places for one release with a DeprecationWarning.

0.2 gave neural training and the GBDT engines sibling parts (``ltr.train``, ``ltr.gbdt``), put what
both need one floor below (``ltr.runs``) and what is done with a trained model above both
(``ltr.models``). An old module stays as a stub whose module ``__getattr__`` is :func:`forward`: the
first use of a name warns where it lives now and returns it. The stubs are listed in :data:`MOVED`
(old module -> new module) and are the only modules allowed to reach a part above or beside them;
they import the new module by name at first use (``importlib``), so importing the old package stays
cheap and no import cycle exists at load time. They are removed in 0.3.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any, Callable

REMOVED_IN = "0.3"

#: old module -> new module
MOVED = {
    "ltr.train.gbdt": "ltr.gbdt.lightgbm",
    "ltr.train.gbdt_dask": "ltr.gbdt.lightgbm_dask",
    "ltr.train.run_folder": "ltr.runs.folder",
    "ltr.train.tensorboard_log": "ltr.runs.tensorboard_log",
    "ltr.train.model_folder": "ltr.models.folder",
    "ltr.train.export": "ltr.models.export",
    "ltr.train.importance": "ltr.models.importance",
    # ltr.clicks was 25 flat modules; 0.2 gives it five floors (see ltr/clicks/__init__.py)
    "ltr.clicks.click_models": "ltr.clicks.simulate.click_models",
    "ltr.clicks.browsing": "ltr.clicks.simulate.browsing",
    "ltr.clicks.logging_ranker": "ltr.clicks.simulate.logging_ranker",
    "ltr.clicks.log_table": "ltr.clicks.logs.table",
    "ltr.clicks.log_ids": "ltr.clicks.logs.ids",
    "ltr.clicks.log_stream": "ltr.clicks.logs.stream",
    "ltr.clicks.logged_lists": "ltr.clicks.logs.lists",
    "ltr.clicks.list_stream": "ltr.clicks.logs.list_stream",
    "ltr.clicks.propensity": "ltr.clicks.propensities.interventions",
    "ltr.clicks.intervention_sums": "ltr.clicks.propensities.intervention_sums",
    "ltr.clicks.regression_em": "ltr.clicks.propensities.regression_em",
    "ltr.clicks.intervention_harvesting": "ltr.clicks.propensities.harvesting",
    "ltr.clicks.harvest_stream": "ltr.clicks.propensities.harvest_stream",
    "ltr.clicks.ips": "ltr.clicks.estimators.ips",
    "ltr.clicks.ips_stream": "ltr.clicks.estimators.ips_stream",
    "ltr.clicks.unbiased": "ltr.clicks.estimators.unbiased",
    "ltr.clicks.dla": "ltr.clicks.estimators.dla",
    "ltr.clicks.policy_aware": "ltr.clicks.estimators.policy_aware",
    "ltr.clicks.unbiased_training": "ltr.clicks.estimators.training",
    "ltr.clicks.unbiased_lightgbm": "ltr.clicks.engines.lightgbm",
    "ltr.clicks.unbiased_lambdamart": "ltr.clicks.engines.lambdamart",
    "ltr.clicks.unbiased_xgboost": "ltr.clicks.engines.xgboost",
    "ltr.clicks.session_stream": "ltr.clicks.engines.session_stream",
    # the loose modules at the top of ltr/ that every part uses went into one base part
    "ltr.errors": "ltr.base.errors",
    "ltr.checks": "ltr.base.checks",
    "ltr.io_utils": "ltr.base.io_utils",
    "ltr.threads": "ltr.base.threads",
}

#: names of a moved module that went to another new module than the rest: old module -> {name: new module}
MOVED_APART = {
    "ltr.clicks.click_models": {name: "ltr.clicks.logs.click_log" for name in
                                ("ClickLog", "concat_logs", "MODE_PRODUCTION", "MODE_RANDOMIZED", "MODE_SWAP")},
    "ltr.clicks.log_stream": {name: "ltr.clicks.estimators.cells" for name in ("cell_values", "aggregate_dataset")},
}

#: names that ``ltr.train`` itself re-exported before 0.2, and where they live now
MOVED_FROM_TRAIN = {name: "ltr.gbdt.lightgbm" for name in ("train_lightgbm", "predict_booster", "save_booster", "load_booster")}

#: names that left a module which stays: module -> {name: new module}
MOVED_NAMES = {
    "ltr.calibrate.calibrators": {name: "ltr.calibrate.factory"
                                  for name in ("make_calibrator", "calibrator_from_json", "load_calibrator")},
}

#: methods of RankingDataset that moved to functions of ltr.data (they made ltr.data.dataset and
#: ltr.data.parquet import each other)
MOVED_METHODS = {
    "RankingDataset.from_frame": ("ltr.data.parquet", "dataset_from_frame"),
    "RankingDataset.to_frame": ("ltr.data.parquet", "to_frame"),
    "RankingDataset.to_parquet": ("ltr.data.parquet", "to_parquet"),
}


def _warn(old: str, new: str, stacklevel: int) -> None:
    warnings.warn(f"{old} moved to {new} in ltr 0.2; the old name is removed in {REMOVED_IN}",
                  DeprecationWarning, stacklevel=stacklevel + 1)


def moved(old_module: str, name: str, new_module: str) -> Any:
    """``new_module.name``, with a DeprecationWarning saying it is no longer ``old_module.name``."""
    module = importlib.import_module(new_module)
    if not hasattr(module, name):
        raise AttributeError(f"module {old_module!r} has no attribute {name!r}")
    _warn(f"{old_module}.{name}", f"{new_module}.{name}", stacklevel=3)
    return getattr(module, name)


def forward(old_module: str) -> Callable[[str], Any]:
    """A module ``__getattr__`` for the stub left at ``old_module``: every name forwards to its new module.

    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     fn = forward("ltr.train.run_folder")("run_folder")
    >>> fn.__module__, caught[0].category.__name__
    ('ltr.runs.folder', 'DeprecationWarning')
    """
    new_module, apart = MOVED[old_module], MOVED_APART.get(old_module, {})

    def __getattr__(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return moved(old_module, name, apart.get(name, new_module))

    return __getattr__


def moved_method(old: str) -> Callable[..., Any]:
    """The function that the method ``old`` (``Class.method``) became, with a DeprecationWarning."""
    module, name = MOVED_METHODS[old]
    _warn(old, f"{module}.{name}", stacklevel=2)
    return getattr(importlib.import_module(module), name)
