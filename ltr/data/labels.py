"""The rules every reader applies to relevance labels in files (SVMlight/LETOR, TREC qrels).

- **Too large.** A label must be below :data:`LABEL_LIMIT` = 1024: the toolkit's default gain
  ``2^label - 1`` overflows a float64 from 1024 on, and an infinite gain turns NDCG into NaN (the
  query would then look "empty" and drop silently out of every mean). Grades are small integers
  (0..4 in LETOR, 0..31 in LightGBM's default table); a label of 2000 or 1e30 is a mistake in the file.
- **Negative.** A negative label means *judged non-relevant* and is worth nothing, as in trec_eval.
  The SVMlight reader reads it as 0 (``negative_labels="zero"``, the count is kept in
  ``ds.meta["negative_labels"]`` and the CLI says how many it changed); ``ltr eval`` gives negative
  qrels labels gain 0 (``zero_gain_below=0`` in the stamped names; the trec_eval preset applies its
  own rule, which gives the same numbers). LightGBM, which refuses negative labels, therefore never
  sees one from a file. ``metrics`` itself takes labels as given (a negative label has a negative
  gain there, as in scikit-learn's ``dcg_score``).

>>> label_problem(3.0) is None, label_problem(2000.0)
(True, 'label 2000 is too large: labels must be below 1024 (the gain 2^label - 1 overflows beyond)')
"""

from __future__ import annotations

import math

__all__ = ["LABEL_LIMIT", "label_problem"]

LABEL_LIMIT = 1024.0


def label_problem(value: float) -> str | None:
    """Why ``value`` cannot be a relevance label in a file, or None."""
    if not math.isfinite(value):
        return f"label is {value} (labels must be finite numbers)"
    if value >= LABEL_LIMIT:
        return (f"label {value:g} is too large: labels must be below {LABEL_LIMIT:g} "
                "(the gain 2^label - 1 overflows beyond)")
    return None
