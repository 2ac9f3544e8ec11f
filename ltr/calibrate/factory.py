"""Building and reading any calibrator by its name or its JSON: the one place that knows every kind.

``make_calibrator(method, **kwargs)``: ``"platt"``, ``"isotonic"``, ``"isotonic-strict"``
(:mod:`ltr.calibrate.calibrators`) and ``"beta"``, ``"spline"``, ``"field-aware"``, ``"multicalibration"``
(:mod:`ltr.calibrate.field_calibrators`), ``"field-joint"`` (:mod:`ltr.calibrate.joint_fit`). ``calibrator_from_json`` / ``load_calibrator`` read what
``save`` wrote (JSON only; nothing is unpickled).
"""

from __future__ import annotations

import json

from ltr.calibrate.calibrators import _FORMAT_VERSION, ALL_METHODS, METHODS, IsotonicCalibrator, PlattCalibrator, _Calibrator
from ltr.calibrate.field_calibrators import field_calibrator_from_dict, make_field_calibrator
from ltr.base.errors import LtrError

__all__ = ["make_calibrator", "calibrator_from_json", "load_calibrator"]


def make_calibrator(method: str, **kwargs) -> _Calibrator:
    """``"platt"`` -> :class:`PlattCalibrator`; ``"isotonic"`` / ``"isotonic-strict"`` -> :class:`IsotonicCalibrator`;
    ``"beta"``, ``"spline"``, ``"field-aware"``, ``"multicalibration"`` -> :mod:`ltr.calibrate.field_calibrators`
    (the last two take ``fields=[names]``)."""
    if method == "field-joint":
        from ltr.calibrate.joint_fit import JointFieldCalibrator

        return JointFieldCalibrator(**kwargs)
    if method in ALL_METHODS[len(METHODS):]:
        return make_field_calibrator(method, **kwargs)
    if method == "platt":
        return PlattCalibrator(**kwargs)
    if method == "isotonic":
        return IsotonicCalibrator(strict=False, **kwargs)
    if method == "isotonic-strict":
        return IsotonicCalibrator(strict=True, **kwargs)
    raise LtrError(f"unknown calibration method {method!r}; choose one of {', '.join(ALL_METHODS)}")


def calibrator_from_json(text: str) -> _Calibrator:
    """Rebuild a calibrator from :meth:`to_json` output (JSON only; nothing is unpickled)."""
    try:
        d = json.loads(text)
        kind = d["kind"]
    except (ValueError, KeyError, TypeError) as exc:
        raise LtrError(f"not a calibrator JSON document: {exc}") from None
    if d.get("format_version") != _FORMAT_VERSION:
        raise LtrError(f"calibrator JSON format_version {d.get('format_version')!r} is not {_FORMAT_VERSION}")
    try:
        if kind == "platt":
            cal = PlattCalibrator.from_dict(d)
        elif kind in ("isotonic", "isotonic-strict"):
            cal = IsotonicCalibrator.from_dict(d)
        elif kind == "field-joint":
            from ltr.calibrate.joint_fit import JointFieldCalibrator

            cal = JointFieldCalibrator.from_dict(d)
        elif kind in ALL_METHODS[len(METHODS):]:
            cal = field_calibrator_from_dict(d)
        else:
            raise LtrError(f"unknown calibrator kind {kind!r} in JSON")
    except KeyError as exc:
        raise LtrError(f"calibrator JSON of kind {kind!r} lacks the field {exc}") from None
    if not isinstance(getattr(cal, "fit_fingerprint_", None), str):  # a saved calibrator was fitted: it says by what
        raise LtrError("the calibrator is not fitted (its fit_fingerprint is not the fingerprint text of a fit)")
    return cal


def load_calibrator(path) -> _Calibrator:
    """Read a calibrator saved with :meth:`save`."""
    from ltr.base.checks import input_file

    path = input_file(path, "calibrator")
    try:
        return calibrator_from_json(path.read_bytes().decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise LtrError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except LtrError as exc:
        raise LtrError(f"{path}: {exc}") from None
