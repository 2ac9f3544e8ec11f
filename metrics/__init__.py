"""metrics: the single source of truth for what a metric means.

Ranking metrics (NDCG, AP, RR, P, R, HitRate, R-precision) with explicit, stamped conventions;
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
