"""Files the streamed click-log tests share: a log whose session ids go back, and a data set with scores."""

from __future__ import annotations

import numpy as np


def write_backwards_log(log, path):
    """Write ``log`` as a Parquet table with its rows in decreasing session ids (streaming refuses it and
    reads the log whole); returns ``path``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ltr.clicks.logs.table import log_to_table

    table = log_to_table(log)
    pq.write_table(table.take(pa.array(np.argsort(-table.column("session").to_numpy(), kind="stable"))), path)
    return path


def write_data_and_scores(ds, folder):
    """``(data.txt, scores.txt)`` in ``folder``: ``ds`` as SVMlight and its labels as one score per line."""
    from ltr.data import save_svmlight

    data, scores = folder / "data.txt", folder / "scores.txt"
    save_svmlight(ds, data)
    scores.write_text("\n".join(str(v) for v in ds.labels) + "\n")
    return data, scores
