"""ltr.calibrate: scores into probabilities, and what calibration is worth in an auction.

Platt and isotonic calibrators (:mod:`~ltr.calibrate.calibrators`), the AUC-invariance check run
after every calibration (:mod:`~ltr.calibrate.invariance`), the before / after report with
reliability diagrams (:mod:`~ltr.calibrate.report`), synthetic CTR data with true probabilities and
negative down-sampling (:mod:`~ltr.calibrate.ctr`), and bid x pCTR auctions (:mod:`~ltr.calibrate.auction`).
By field: beta, spline, field-aware and multicalibration calibrators (:mod:`~ltr.calibrate.field_calibrators`),
impressions with fields and a known truth (:mod:`~ltr.calibrate.fields_data`), and the NE / PCOC / per-field
report of ``ltr calibrate --table`` (:mod:`~ltr.calibrate.field_report`). Tables larger than memory in one
pass on binned sufficient statistics: :mod:`~ltr.calibrate.stream_stats` (reading, the sums),
:mod:`~ltr.calibrate.stream_fit` (the fits), :mod:`~ltr.calibrate.stream_report` (the report).
"""

from ltr.base._lazy import lazy_exports

# what the package re-exports, by defining module; each imported on first use (ltr.base._lazy)
_WHERE = {
    "ltr.calibrate.auction": ("oracle_comparison", "run_auctions", "second_price"),
    "ltr.calibrate.calibrators": ("IsotonicCalibrator", "PlattCalibrator"),
    "ltr.calibrate.factory": ("calibrator_from_json", "load_calibrator", "make_calibrator"),
    "ltr.calibrate.ctr": ("correct_downsampling", "downsample_negatives", "generate_impressions"),
    "ltr.calibrate.field_calibrators": ("BetaCalibrator", "FieldAwareCalibrator", "MulticalibrationCalibrator",
                                        "SplineCalibrator", "check_within_field_order"),
    "ltr.calibrate.fields_data": ("make_field_world",),
    "ltr.calibrate.invariance": ("AucInvarianceReport", "check_auc_invariance", "count_created_ties"),
    "ltr.calibrate.report": ("CalibrationReport", "calibration_metrics", "save_reliability_diagram"),
    "ltr.calibrate.stream_stats": ("BinnedStats", "stream_table"),
    "ltr.calibrate.stream_fit": ("fit_binned",),
    "ltr.calibrate.stream_report": ("binned_report",),
}

__all__, __getattr__, __dir__ = lazy_exports(__name__, _WHERE)
