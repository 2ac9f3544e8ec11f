"""Judging and training rankers on clicks with the position bias taken out (neural scorers).

Counterfactual click metrics (:mod:`~ltr.clicks.estimators.ips`, streamed: :mod:`~ltr.clicks.estimators.ips_stream`);
the training estimators naive, IPS, regression-EM IPS, affine, pairwise debiasing
(:mod:`~ltr.clicks.estimators.unbiased`), DLA (:mod:`~ltr.clicks.estimators.dla`), policy-aware
(:mod:`~ltr.clicks.estimators.policy_aware`); training lists from per-cell sums
(:mod:`~ltr.clicks.estimators.cells`); one call per estimator (:mod:`~ltr.clicks.estimators.training`).
Stands on :mod:`ltr.clicks.logs`, :mod:`ltr.clicks.simulate` and :mod:`ltr.clicks.propensities`.
"""
