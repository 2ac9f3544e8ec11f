"""Click logs as Parquet tables: exact round trip, any row order, optional columns, bad tables."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ltr.clicks.logs.click_log import ClickLog
from ltr.clicks.simulate.click_models import simulate_clicks
from ltr.clicks.logs.table import log_to_table, read_log_parquet, write_log_parquet
from ltr.base.errors import LtrError


@pytest.fixture(scope="module")
def log():
    rng = np.random.default_rng(0)
    lengths = rng.integers(3, 12, 20)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    labels = rng.integers(0, 5, offsets[-1]).astype(float)
    return simulate_clicks(labels, offsets, labels + rng.normal(0, 1, offsets[-1]), model="dbn", top_k=6,
                           sessions_per_query=15, randomize_fraction=0.2, swap_fraction=0.2, seed=5)


def _same(a: ClickLog, b: ClickLog) -> None:
    for name in ClickLog._ENTRY + ClickLog._SESSION:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


def test_round_trip_is_exact(log, tmp_path):
    write_log_parquet(log, tmp_path / "c.parquet")
    back = read_log_parquet(tmp_path / "c.parquet")
    _same(back, log)
    assert back.meta == log.meta and back.meta["model"] == "dbn"
    assert pq.read_schema(tmp_path / "c.parquet").names[:5] == ["session", "query", "doc", "position", "click"]


def test_shuffled_rows_and_other_session_ids_read_the_same(log, tmp_path):
    table = log_to_table(log)
    perm = np.random.default_rng(1).permutation(table.num_rows)
    t = table.take(pa.array(perm))
    # Session ids 1000 + 7 s keep the order of first appearance in the shuffled table, not the original one.
    t = t.set_column(0, "session", pa.array(1000 + 7 * log.session[perm]))
    pq.write_table(t, tmp_path / "s.parquet")
    back = read_log_parquet(tmp_path / "s.parquet")
    assert back.n_sessions == log.n_sessions and back.n_entries == log.n_entries
    # Map the renumbered sessions back through the first shuffled row of each.
    _, first = np.unique(log.session[perm], return_index=True)
    order = np.argsort(first)  # original session ids in order of first appearance
    np.testing.assert_array_equal(back.session_query, log.session_query[np.unique(log.session[perm])[order]])
    assert back.n_clicks == log.n_clicks


def test_required_columns_only(tmp_path):
    pq.write_table(pa.table({"session": [5, 5, 9], "query": [0, 0, 1], "doc": [1, 0, 3], "position": [2, 1, 1],
                             "click": [1, 0, 0]}), tmp_path / "m.parquet")
    back = read_log_parquet(tmp_path / "m.parquet")
    np.testing.assert_array_equal(back.doc, [0, 1, 3])  # sorted by position within session
    np.testing.assert_array_equal(back.click, [0, 1, 0])
    np.testing.assert_array_equal(back.propensity, [1.0, 1.0, 1.0])
    assert back.meta["propensity"].startswith("absent")
    np.testing.assert_array_equal(back.session_query, [0, 1])


def test_bad_tables_are_user_errors(tmp_path):
    pq.write_table(pa.table({"session": [0], "query": [0], "doc": [1]}), tmp_path / "a.parquet")
    with pytest.raises(LtrError, match="missing columns: position, click"):
        read_log_parquet(tmp_path / "a.parquet")
    pq.write_table(pa.table({"session": [0, 0], "query": [0, 1], "doc": [1, 2], "position": [1, 2], "click": [0, 1]}),
                   tmp_path / "b.parquet")
    with pytest.raises(LtrError, match="more than one query"):
        read_log_parquet(tmp_path / "b.parquet")
    pq.write_table(pa.table({"session": [0], "query": [0], "doc": [1], "position": [1], "click": [2]}), tmp_path / "c.parquet")
    with pytest.raises(LtrError, match="clicks 0 or 1"):
        read_log_parquet(tmp_path / "c.parquet")
    with pytest.raises(LtrError, match="no such click log"):
        read_log_parquet(tmp_path / "missing.parquet")
