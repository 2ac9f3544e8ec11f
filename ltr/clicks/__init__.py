"""ltr.clicks: logged clicks and their position bias.

Position-based and cascade click simulation (:mod:`~ltr.clicks.click_models`), examination
propensities from randomized or swapped traffic (:mod:`~ltr.clicks.propensity`), naive / IPS / SNIPS
estimates and inverse-propensity training sets (:mod:`~ltr.clicks.ips`), and the Open Bandit
logged-click sample (:mod:`~ltr.clicks.open_bandit`).
"""

from ltr.clicks.click_models import ClickLog, simulate_clicks
from ltr.clicks.ips import (
    click_dcg,
    click_training_set,
    expected_click_dcg,
    inverse_propensity_weights,
)
from ltr.clicks.open_bandit import ctr_by_position, ips_value, load_open_bandit
from ltr.clicks.propensity import (
    estimate_from_randomized,
    estimate_from_swaps,
    fit_power_law,
)

__all__ = [
    "ClickLog", "simulate_clicks",
    "estimate_from_randomized", "estimate_from_swaps", "fit_power_law",
    "click_dcg", "expected_click_dcg", "inverse_propensity_weights", "click_training_set",
    "load_open_bandit", "ctr_by_position", "ips_value",
]  # fmt: skip
