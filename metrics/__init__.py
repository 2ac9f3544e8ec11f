"""metrics: the single source of truth for what a metric means.

Ranking metrics (NDCG, AP, RR, P, R, HitRate, R-precision, ERR, RBP, OPA, ARP, α-nDCG and every
per-query measure of trec_eval) with explicit, stamped conventions; comparison of runs with
significance tests;
their swap deltas (the LambdaRank bridge); classification and calibration metrics (AUC, LogLoss,
Brier, ECE); averaging (micro / macro / cohorts) and paired statistics; retrieval-stage coverage and
recall at a latency budget. numpy only; torch is imported lazily by the torch side of swap deltas.
"""

from metrics.gains import *  # noqa: F401,F403
from metrics.discounts import *  # noqa: F401,F403
from metrics.dcg import *  # noqa: F401,F403
from metrics.conventions import *  # noqa: F401,F403
from metrics.ranking import *  # noqa: F401,F403
from metrics.evaluate import *  # noqa: F401,F403
from metrics.swap import *  # noqa: F401,F403
from metrics.classification import *  # noqa: F401,F403
from metrics.stats import *  # noqa: F401,F403
from metrics.averaging import *  # noqa: F401,F403
from metrics.retrieval import *  # noqa: F401,F403
from metrics.trec_eval import ALL_TREC, TrecLists  # noqa: F401
from metrics.user_models import *  # noqa: F401,F403
from metrics.order_metrics import *  # noqa: F401,F403
from metrics.diversity import *  # noqa: F401,F403
from metrics.compare import *  # noqa: F401,F403
from metrics.calibration import *  # noqa: F401,F403
