"""GBDT boosters as ONNX models of rows: ``rows [N, F] float32 -> raw score [N, 1]``, by the engines'
well-kept converters, never by hand.

- LightGBM: ``onnxmltools.convert_lightgbm``. onnxmltools converts regressors and classifiers and
  refuses the ranking objectives (``lambdarank``, ``rank_xendcg``), yet a ranking booster's score is
  its raw score, the sum of its trees' leaves, which is exactly what a regression booster predicts.
  So the model text is read back with ``objective=regression`` (nothing else changes: the same trees,
  thresholds and leaves) and that booster is converted.
- XGBoost: ``onnxmltools.convert_xgboost``, which takes the scikit-learn wrappers. The booster's
  JSON model is loaded into an ``XGBRegressor`` after its objective is set to ``reg:squarederror``
  (an identity link, like the ranking objectives' margin); its trees and ``base_score`` are kept, so
  the graph computes ``predict(output_margin=True)``.
- CatBoost: the model's own ONNX export (``save_model(format="onnx")``), whose regressor graph gives
  ``RawFormulaVal``.

Each returns an ``onnx.ModelProto`` with one input (``[N, F]`` float32) and the raw score as its first
output; :mod:`ltr.models.onnx_graph` puts it inside the serving interface. The trees compute in float32
(the ONNX tree operators' type) where the engines sum in float64: the graph is checked against the
engine before it is written (:func:`ltr.models.onnx_graph.verify_graph`).
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

from ltr.base.errors import LtrError

__all__ = ["OPSET", "tree_rows_model"]

OPSET = 18  # the default domain's opset of every graph the toolkit writes (the blend joins graphs of one opset)
CONVERTER_OPSET = 15  # the highest onnxmltools 1.16 converts at; its tree graphs are TreeEnsembleRegressor (ai.onnx.ml) and Identity


def _needs(module: str):
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise LtrError(f"exporting a GBDT model to ONNX needs {module.split('.')[0]}: pip install 'ltr[export]'") from None


def _lightgbm(booster, n_features: int):
    import lightgbm as lgb

    _needs("onnxmltools")
    from onnxmltools import convert_lightgbm
    from onnxmltools.convert.common.data_types import FloatTensorType

    # the same trees read as a regression booster: onnxmltools refuses the ranking objectives (module docstring)
    text = re.sub(r"^objective=.*$", "objective=regression", booster.model_to_string(), count=1, flags=re.M)
    regressor = lgb.Booster(model_str=text)
    return convert_lightgbm(regressor, initial_types=[("rows", FloatTensorType([None, n_features]))],
                            target_opset=CONVERTER_OPSET, zipmap=False)


def _xgboost(booster, n_features: int):
    import xgboost as xgb

    _needs("onnxmltools")
    from onnxmltools import convert_xgboost
    from onnxmltools.convert.common.data_types import FloatTensorType

    doc = json.loads(bytes(booster.save_raw(raw_format="json")))
    # the ranking objective's margin is its score; a squared-error regressor's prediction is its margin
    doc["learner"]["objective"] = {"name": "reg:squarederror", "reg_loss_param": {"scale_pos_weight": "1"}}
    regressor = xgb.XGBRegressor()
    regressor.load_model(bytearray(json.dumps(doc).encode()))
    return convert_xgboost(regressor, initial_types=[("rows", FloatTensorType([None, n_features]))],
                           target_opset=CONVERTER_OPSET)


def _catboost(model, n_features: int):
    import onnx

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "catboost.onnx"
        try:
            model.save_model(str(path), format="onnx", export_parameters={"onnx_domain": "ai.catboost", "onnx_model_version": 1})
        except Exception as exc:  # noqa: BLE001 - CatBoostError and friends: said in one line
            raise LtrError(f"CatBoost's ONNX export refused the model: {' '.join(str(exc).split())[:300]}") from None
        return onnx.load(str(path))


def tree_rows_model(engine: str, model, n_features: int):
    """``onnx.ModelProto``: ``[N, F] float32 -> raw score`` of a trained ``engine`` model (module docstring)."""
    _needs("onnx")
    convert = {"lightgbm": _lightgbm, "xgboost": _xgboost, "catboost": _catboost}.get(engine)
    if convert is None:
        raise LtrError(f"no ONNX converter for the {engine!r} engine")
    try:
        return convert(model, int(n_features))
    except LtrError:
        raise
    except Exception as exc:  # noqa: BLE001 - a converter's refusal, whatever its type, in one line
        raise LtrError(f"converting the {engine} model to ONNX failed: {type(exc).__name__}: "
                       f"{' '.join(str(exc).split())[:300]}") from None
