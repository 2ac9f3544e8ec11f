"""ltr.clicks: logged clicks and their position bias, in five floors that import one way.

::

    logs  <-  simulate  <-  propensities  <-  estimators  <-  engines

* :mod:`ltr.clicks.logs`: the log itself. :class:`~ltr.clicks.logs.click_log.ClickLog` (one entry per shown
  item), its Parquet tables and their schema (:mod:`~ltr.clicks.logs.table`), the ids that name a data
  set's rows (:mod:`~ltr.clicks.logs.ids`), the record-batch reader and its per-cell sums
  (:mod:`~ltr.clicks.logs.stream`), the log grouped by shown list (:mod:`~ltr.clicks.logs.lists`,
  :mod:`~ltr.clicks.logs.list_stream`).
* :mod:`ltr.clicks.simulate`: users and loggers. Position-based and cascade clicks
  (:mod:`~ltr.clicks.simulate.click_models`), DBN, UBM, trust bias and click noise
  (:mod:`~ltr.clicks.simulate.browsing`), the logging rankers (:mod:`~ltr.clicks.simulate.logging_ranker`).
* :mod:`ltr.clicks.propensities`: how much each position is looked at. From randomized or swapped
  traffic (:mod:`~ltr.clicks.propensities.interventions`), from one ranker's logs by regression EM
  (:mod:`~ltr.clicks.propensities.regression_em`), from several rankers' logs by intervention harvesting
  (:mod:`~ltr.clicks.propensities.harvesting`).
* :mod:`ltr.clicks.estimators`: judging and training on clicks with the bias taken out. Naive / IPS /
  SNIPS / policy-aware click metrics (:mod:`~ltr.clicks.estimators.ips`), the unbiased training
  estimators (:mod:`~ltr.clicks.estimators.unbiased`, :mod:`~ltr.clicks.estimators.dla`,
  :mod:`~ltr.clicks.estimators.policy_aware`) and one call per estimator
  (:mod:`~ltr.clicks.estimators.training`).
* :mod:`ltr.clicks.engines`: the same estimators on gradient-boosted trees, LightGBM
  (:mod:`~ltr.clicks.engines.lightgbm`, :mod:`~ltr.clicks.engines.lambdamart`) and XGBoost
  (:mod:`~ltr.clicks.engines.xgboost`).

Beside them: team-draft and probabilistic interleaving on simulated users (:mod:`~ltr.clicks.interleaving`,
above ``simulate``) and the Open Bandit logged-click sample (:mod:`~ltr.clicks.open_bandit`, on its own).
A module imports its own floor and the floors below it, never one above (``tests/test_layering.py``).
The flat module paths of before (``ltr.clicks.click_models``, ``ltr.clicks.unbiased_training``, ...)
forward their names here with a DeprecationWarning until 0.3 (:data:`ltr.base._moved.MOVED`).
"""

from ltr.base._lazy import lazy_exports

# what the package re-exports, by defining module; each imported on first use (ltr.base._lazy)
_WHERE = {
    "ltr.clicks.logs.click_log": ("ClickLog",),
    "ltr.clicks.simulate.click_models": ("simulate_clicks",),
    "ltr.clicks.estimators.ips": ("click_dcg", "click_training_set", "expected_click_dcg", "inverse_propensity_weights"),
    "ltr.clicks.open_bandit": ("ctr_by_position", "ips_value", "load_open_bandit"),
    "ltr.clicks.propensities.interventions": ("estimate_from_randomized", "estimate_from_swaps", "fit_power_law"),
}

__all__, __getattr__, __dir__ = lazy_exports(__name__, _WHERE)
