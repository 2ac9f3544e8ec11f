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

``metrics`` (numpy) and ``losses`` (torch) sit below all of them. ``ltr.cli``, ``ltr.errors`` and
``ltr.io_utils`` are the few things every part uses.
"""

__version__ = "0.1.0"
