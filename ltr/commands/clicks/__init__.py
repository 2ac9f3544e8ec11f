"""``ltr clicks``: simulate click logs, estimate position bias, train and judge rankers on clicks, Open Bandit.

One module per action, each with its ``add_parser(sub, fmt)`` and its ``run_*``:

* :mod:`~ltr.commands.clicks.simulate`: rank a labelled file with a logging ranker, simulate clicks, write a
  run folder (``clicks.npz`` or ``clicks.parquet``, ``summary.json``);
* :mod:`~ltr.commands.clicks.estimate`: propensities from an existing log (randomized or swap traffic,
  regression EM, intervention harvesting);
* :mod:`~ltr.commands.clicks.train` (neural) and :mod:`~ltr.commands.clicks.train_gbdt` (XGBoost, LightGBM):
  a ranker trained on a log with an unbiased estimator; a model folder with ``clicks_training.json``;
* :mod:`~ltr.commands.clicks.evaluate`: naive, IPS, SNIPS and policy-aware click-DCG of a new ranker;
* :mod:`~ltr.commands.clicks.interleave`: team-draft or probabilistic interleaving of two rankers;
* :mod:`~ltr.commands.clicks.open_bandit`: the Open Bandit sample.

What several actions share lives beside them: the options (:mod:`~ltr.commands.clicks.options`), reading a
log, scores or a model folder (:mod:`~ltr.commands.clicks.reading`), and what they print and record
(:mod:`~ltr.commands.clicks.report`).
"""

from __future__ import annotations

import argparse

from ltr.commands.clicks import estimate, evaluate, interleave, open_bandit, simulate, train


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "clicks",
        help="click models, position-bias estimation, unbiased training, IPS evaluation, interleaving, Open Bandit data",
        description="Simulate clicks with position bias on a labelled data set, estimate the examination "
        "propensities from intervention traffic or from one ranker's logs, train rankers on clicks with "
        "unbiased estimators, judge rankers with naive / IPS / SNIPS click metrics or by interleaving, "
        "and summarise the Open Bandit sample.",
    )
    sub = p.add_subparsers(dest="clicks_command", metavar="ACTION")
    sub.required = True
    fmt = argparse.ArgumentDefaultsHelpFormatter
    for action in (simulate, train, interleave, estimate, evaluate, open_bandit):  # the order of --help
        action.add_parser(sub, fmt)
