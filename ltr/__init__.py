"""ltr: a learning-to-rank training toolkit whose metric definitions feed both evaluation and training.

The toolkit is five parts and a command line, each a sub-package (imported on demand so that
``import ltr`` stays cheap). Imports run one way, bottom to top:

- ``ltr.data``       data sets and their files (SVMlight/LETOR, TREC, columns), cache, normalisation,
                     batches, the synthetic generator
- ``ltr.train``      scorers, the trainer, checkpoints, TensorBoard, configuration, run folders, the
                     LightGBM baseline
- ``ltr.calibrate``  calibrators, the AUC-invariance check, CTR data, auctions
- ``ltr.clicks``     click models, propensities, IPS / SNIPS, the Open Bandit loader
- ``ltr.study``      the ablation grid and its report
- ``ltr.commands``   one module per ``ltr`` sub-command

``metrics`` (numpy) and ``losses`` (torch) sit below all of them; ``ltr.base`` (errors, input checks,
atomic writes, threads) is the one part every other part uses, and ``ltr.cli`` sits on top.

``from ltr import NeuralRanker`` gives the scikit-learn-style ranker of :mod:`ltr.train.sklearn_ranker`
(loaded on first use, with torch and scikit-learn).
"""

__version__ = "0.1.0"

# the few public objects re-exported here, imported on first access (PEP 562)
_LAZY = ("NeuralRanker", "ranking_scorer")


def __getattr__(name: str):
    if name in _LAZY:
        import ltr.train.sklearn_ranker as sklearn_ranker  # the one import from the top-level package into a part

        return getattr(sklearn_ranker, name)
    raise AttributeError(f"module 'ltr' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
