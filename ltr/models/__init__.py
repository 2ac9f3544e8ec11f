"""ltr.models: what is done with a trained model of any kind (neural or GBDT).

Loading a model folder as one scoring function (:mod:`~ltr.models.folder`), export to ONNX /
TorchScript (:mod:`~ltr.models.export`), and feature importance (:mod:`~ltr.models.importance`).
Builds on :mod:`ltr.train` and :mod:`ltr.gbdt`; names are imported from the sub-modules
(``from ltr.models.folder import load_scorer``) so that using one does not import torch and every
engine.
"""
