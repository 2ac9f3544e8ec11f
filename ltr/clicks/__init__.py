"""ltr.clicks: logged clicks and their position bias.

Click simulation: position-based and cascade (:mod:`~ltr.clicks.click_models`), DBN, UBM, trust
bias and click noise (:mod:`~ltr.clicks.browsing`), under a logging ranker on the features
(:mod:`~ltr.clicks.logging_ranker`); logs as Parquet tables
(:mod:`~ltr.clicks.log_table`), streamed in batches when larger than memory (:mod:`~ltr.clicks.log_stream`),
naming queries and documents by index or by the data set's ids (:mod:`~ltr.clicks.log_ids`), and
grouped by shown list (:mod:`~ltr.clicks.logged_lists`).
Examination propensities from randomized or swapped traffic (:mod:`~ltr.clicks.propensity`), from one
ranker's logs by regression EM (:mod:`~ltr.clicks.regression_em`) or DLA (:mod:`~ltr.clicks.dla`).
Naive / IPS / SNIPS estimates and inverse-propensity training sets (:mod:`~ltr.clicks.ips`);
unbiased training estimators (:mod:`~ltr.clicks.unbiased`, :mod:`~ltr.clicks.unbiased_training`),
XGBoost's ``lambdarank_unbiased`` on click sessions (:mod:`~ltr.clicks.unbiased_xgboost`), LightGBM's
lambdarank on them with inverse-propensity weights or its position-bias model (:mod:`~ltr.clicks.unbiased_lightgbm`);
team-draft interleaving (:mod:`~ltr.clicks.interleaving`); the Open Bandit logged-click sample
(:mod:`~ltr.clicks.open_bandit`).
"""

from ltr._lazy import lazy_exports

# what the package re-exports, by defining module; each imported on first use (ltr._lazy)
_WHERE = {
    "ltr.clicks.click_models": ("ClickLog", "simulate_clicks",),
    "ltr.clicks.ips": ("click_dcg", "click_training_set", "expected_click_dcg", "inverse_propensity_weights"),
    "ltr.clicks.open_bandit": ("ctr_by_position", "ips_value", "load_open_bandit"),
    "ltr.clicks.propensity": ("estimate_from_randomized", "estimate_from_swaps", "fit_power_law"),
}

__all__, __getattr__, __dir__ = lazy_exports(__name__, _WHERE)
