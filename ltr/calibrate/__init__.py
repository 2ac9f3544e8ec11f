"""ltr.calibrate: scores into probabilities, and what calibration is worth in an auction.

Platt and isotonic calibrators (:mod:`~ltr.calibrate.calibrators`), the AUC-invariance check run
after every calibration (:mod:`~ltr.calibrate.invariance`), the before / after report with
reliability diagrams (:mod:`~ltr.calibrate.report`), synthetic CTR data with true probabilities and
negative down-sampling (:mod:`~ltr.calibrate.ctr`), and bid x pCTR auctions (:mod:`~ltr.calibrate.auction`).
"""

from ltr.calibrate.auction import oracle_comparison, run_auctions, second_price
from ltr.calibrate.calibrators import (
    IsotonicCalibrator,
    PlattCalibrator,
    load_calibrator,
    make_calibrator,
)
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
]  # fmt: skip
