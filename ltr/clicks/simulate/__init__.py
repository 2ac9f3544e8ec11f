"""Simulated users and loggers: click models, browsing models, logging rankers.

:mod:`~ltr.clicks.simulate.click_models` (PBM, cascade, the simulator), :mod:`~ltr.clicks.simulate.browsing`
(DBN, UBM, trust bias, noise), :mod:`~ltr.clicks.simulate.logging_ranker` (the ridge logger, Plackett-Luce
draws). Stands on :mod:`ltr.clicks.logs` only.
"""
