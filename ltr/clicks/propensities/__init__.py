"""Examination propensities by position, estimated from a log.

From randomized or swap traffic (:mod:`~ltr.clicks.propensities.interventions`, its sums
:mod:`~ltr.clicks.propensities.intervention_sums`), from one ranker's logs by EM and regression EM
(:mod:`~ltr.clicks.propensities.regression_em`), from several rankers' logs by intervention harvesting
(:mod:`~ltr.clicks.propensities.harvesting`, streamed by :mod:`~ltr.clicks.propensities.harvest_stream`).
Stands on :mod:`ltr.clicks.logs` and :mod:`ltr.clicks.simulate`.
"""
