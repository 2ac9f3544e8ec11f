"""ltr.calibrate: scores into probabilities, and what calibration is worth in an auction.

Platt and isotonic calibrators (:mod:`~ltr.calibrate.calibrators`), the AUC-invariance check run
after every calibration (:mod:`~ltr.calibrate.invariance`), the before / after report with
reliability diagrams (:mod:`~ltr.calibrate.report`), synthetic CTR data with true probabilities and
negative down-sampling (:mod:`~ltr.calibrate.ctr`), and bid x pCTR auctions (:mod:`~ltr.calibrate.auction`).
By field: beta, spline, field-aware and multicalibration calibrators (:mod:`~ltr.calibrate.field_calibrators`),
impressions with fields and a known truth (:mod:`~ltr.calibrate.fields_data`), and the NE / PCOC / per-field
report of ``ltr calibrate --table`` (:mod:`~ltr.calibrate.field_report`).
"""

from ltr.calibrate.auction import oracle_comparison, run_auctions, second_price
from ltr.calibrate.calibrators import (
    IsotonicCalibrator,
    PlattCalibrator,
    load_calibrator,
    make_calibrator,
)
from ltr.calibrate.field_calibrators import (
    BetaCalibrator,
    FieldAwareCalibrator,
    MulticalibrationCalibrator,
    SplineCalibrator,
    check_within_field_order,
)
from ltr.calibrate.fields_data import make_field_world
from ltr.calibrate.ctr import (
    correct_downsampling,
    downsample_negatives,
    generate_impressions,
)
from ltr.calibrate.invariance import (
    AucInvarianceReport,
    check_auc_invariance,
    count_created_ties,
)
from ltr.calibrate.report import (
    CalibrationReport,
    calibration_metrics,
    save_reliability_diagram,
)

__all__ = [
    "PlattCalibrator", "IsotonicCalibrator", "make_calibrator", "load_calibrator",
    "AucInvarianceReport", "check_auc_invariance", "count_created_ties",
    "CalibrationReport", "calibration_metrics", "save_reliability_diagram",
    "generate_impressions", "downsample_negatives", "correct_downsampling",
    "run_auctions", "second_price", "oracle_comparison",
    "BetaCalibrator", "SplineCalibrator", "FieldAwareCalibrator", "MulticalibrationCalibrator",
    "check_within_field_order", "make_field_world",
]  # fmt: skip
