"""ltr.clicks: logged clicks and their position bias.

Position-based and cascade click simulation (:mod:`~ltr.clicks.click_models`), examination
propensities from randomized or swapped traffic (:mod:`~ltr.clicks.propensity`), naive / IPS / SNIPS
estimates and inverse-propensity training sets (:mod:`~ltr.clicks.ips`), and the Open Bandit
logged-click sample (:mod:`~ltr.clicks.open_bandit`).
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
