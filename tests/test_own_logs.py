"""A user's own click log, written by hand as a user would: CSV or Parquet, text ids, no propensities.

What must hold: it trains and evaluates with records that state the true source of every propensity; the
estimators that divide by propensities refuse a log without them (never 1.0 in silence), naming the ways to
get them; a log without a click is refused; positions the log does not identify get no propensity; a
session that shows two items at one position is refused by every reader, with its rows counted from 1.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ltr.cli import main
from ltr.clicks.logs.reader import iter_log_batches
from ltr.clicks.logs.table import read_log_table
from ltr.clicks.propensities.curves import complete_curve, read_curve_file
from ltr.data import load_svmlight
from ltr.base.errors import LtrError

# Two queries of three documents, with ids; the hand log shows two of them per session.
DATA = ("2 qid:11 1:1.0 2:0.1 # docid = a\n0 qid:11 1:0.1 2:0.9 # docid = b\n1 qid:11 1:0.5 2:0.4 # docid = c\n"
        "1 qid:12 1:0.6 2:0.2 # docid = a\n0 qid:12 1:0.2 2:0.8 # docid = d\n2 qid:12 1:0.9 2:0.3 # docid = e\n")


def _hand_rows(n_sessions: int = 40, seed: int = 0) -> dict:
    """Sessions named s0, s1, ...: query 11 shows a then c, 12 shows e then a (every fourth session only its first
    item: position 2 is shown 30 times, position 1 40 times); the top item is clicked more often."""
    rng = np.random.default_rng(seed)
    rows = {"session": [], "query": [], "doc": [], "position": [], "click": []}
    for s in range(n_sessions):
        query, docs = (11, ("a", "c")) if s % 2 == 0 else (12, ("e", "a"))  # the data's qids, a doc id as text
        for pos, doc in enumerate(docs[: 1 if s % 4 == 3 else 2], 1):
            rows["session"].append(f"s{s}")
            rows["query"].append(query)
            rows["doc"].append(doc)
            rows["position"].append(pos)
            rows["click"].append(int(rng.random() < (0.7 if pos == 1 else 0.3)))
    return rows


def _write_csv(path, rows: dict) -> None:
    lines = [",".join(rows)] + [",".join(str(v) for v in values) for values in zip(*rows.values())]
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture()
def own(tmp_path):
    (tmp_path / "data.txt").write_text(DATA)
    rows = _hand_rows()
    _write_csv(tmp_path / "log.csv", rows)
    pq.write_table(pa.table(rows), tmp_path / "log.parquet")
    return tmp_path, rows


def _train(tmp_path, log, out, *extra):
    return main(["clicks", "train", "--data", str(tmp_path / "data.txt"), "--valid", str(tmp_path / "data.txt"),
                 "--log", str(log), "--out", str(tmp_path / out), "--model", "linear", "--epochs", "2", "--quiet",
                 *extra])


def test_a_csv_log_reads_as_the_same_parquet_log(own):
    tmp_path, rows = own
    ds = load_svmlight(tmp_path / "data.txt")
    from ltr.clicks.logs.ids import LogIds

    a = read_log_table(tmp_path / "log.csv", ids=LogIds(ds, "id"))
    b = read_log_table(tmp_path / "log.parquet", ids=LogIds(ds, "id"))
    for name in ("session", "query", "doc", "position", "click", "session_query"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert a.n_sessions == 40 and a.meta["propensity"] == "absent"
    # the text session ids come as integers numbered by first appearance, batch after batch
    sessions = np.concatenate([cols["session"] for _, cols in iter_log_batches(tmp_path / "log.csv", ["session"],
                                                                               batch_size=7)])
    np.testing.assert_array_equal(sessions, [int(name[1:]) for name in rows["session"]])
    # q1's sessions show row 0 (a) then row 2 (c); q2's show row 5 (e) then row 3 (a)
    assert a.doc[:4].tolist() == [0, 2, 5, 3] and a.click.sum() == sum(rows["click"])


@pytest.mark.parametrize("log_name", ["log.csv", "log.parquet"])
@pytest.mark.parametrize("extra", [["--estimator", "ips"], ["--estimator", "policy-aware"],
                                   ["--estimator", "ips", "--engine", "lightgbm", "--rounds", "2"]])
def test_ips_without_a_propensity_column_is_refused_with_the_ways_to_get_them(own, capsys, log_name, extra):
    tmp_path, _ = own
    assert _train(tmp_path, tmp_path / log_name, "m", *extra) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "has no propensity column" in err and log_name in err
    assert "--propensity estimated" in err and "--propensity-file CURVE" in err


def test_a_curve_file_trains_ips_and_the_record_names_it(own):
    tmp_path, _ = own
    curve = tmp_path / "curve.txt"
    curve.write_text("0.8\n0.4\n")  # any scale: divided by its first value
    assert _train(tmp_path, tmp_path / "log.csv", "m", "--estimator", "ips", "--propensity-file", str(curve)) == 0
    info = json.loads((tmp_path / "m" / "clicks_training.json").read_text())
    assert info["propensity_source"] == f"file {curve}" and info["propensity"] == [1.0, 0.5]


def test_estimated_propensities_name_regression_em_and_its_unidentified_positions(own):
    tmp_path, _ = own
    assert _train(tmp_path, tmp_path / "log.parquet", "m", "--estimator", "ips", "--propensity", "estimated") == 0
    info = json.loads((tmp_path / "m" / "clicks_training.json").read_text())
    assert info["propensity_source"].startswith("estimated by regression EM (logistic) on the log's production")
    assert info["propensity"][0] == 1.0 and 0 < info["propensity"][1] < 1  # 40 and 30 impressions
    assert _train(tmp_path, tmp_path / "log.parquet", "m2", "--estimator", "ips", "--propensity", "estimated",
                  "--min-impressions", "31") == 0
    info = json.loads((tmp_path / "m2" / "clicks_training.json").read_text())
    # position 2 is shown 30 times, too rarely for 31: held at position 1's propensity, and the source says so
    assert info["propensity"] == [1.0, 1.0] and "position 2 unidentified" in info["propensity_source"]


def test_a_propensity_column_from_outside_is_not_called_the_simulators_truth(own):
    tmp_path, rows = own
    pq.write_table(pa.table({**rows, "propensity": [1.0 if p == 1 else 0.5 for p in rows["position"]]}),
                   tmp_path / "with_p.parquet")
    assert _train(tmp_path, tmp_path / "with_p.parquet", "m", "--estimator", "ips") == 0
    info = json.loads((tmp_path / "m" / "clicks_training.json").read_text())
    assert info["propensity_source"] == "logged (the log's propensity column)"


def test_evaluate_states_its_source_and_knows_no_truth_for_a_log_from_outside(own, capsys):
    tmp_path, rows = own
    scores = tmp_path / "scores.txt"
    scores.write_text("\n".join(["3", "1", "2", "2", "1", "3"]) + "\n")
    out = tmp_path / "e.json"
    args = ["clicks", "evaluate", "--log", str(tmp_path / "log.csv"), "--data", str(tmp_path / "data.txt"),
            "--scores", str(scores), "--k", "2", "--json", str(out)]
    assert main(args) == 2 and "has no propensity column" in capsys.readouterr().err
    (tmp_path / "curve.json").write_text(json.dumps({"rows": [{"position": 1, "theta": 1.0},
                                                               {"position": 2, "theta": 0.25}]}))
    assert main([*args, "--propensity-file", str(tmp_path / "curve.json")]) == 0
    report = json.loads(out.read_text())
    assert report["propensity_source"] == f"file {tmp_path / 'curve.json'}"
    assert "true_click_dcg" not in report and "not simulated" in capsys.readouterr().out
    # IPS by hand: the new ranker keeps each query's shown order (a before c, e before a), so a click at shown
    # position r counts 1/log2(r + 1) / theta_r, over the 20 sessions of each query
    per_query = {11: [], 12: []}
    for s in range(40):
        rows_of_s = [i for i, name in enumerate(rows["session"]) if name == f"s{s}"]
        value = sum(rows["click"][i] / np.log2(rows["position"][i] + 1) / (1.0, 0.25)[rows["position"][i] - 1]
                    for i in rows_of_s)
        per_query[rows["query"][rows_of_s[0]]].append(value)
    want = np.mean([np.mean(per_query[11]), np.mean(per_query[12])])
    assert report["ips"] == pytest.approx(want, rel=1e-12)


def test_a_log_without_a_click_is_refused(own, capsys):
    tmp_path, rows = own
    _write_csv(tmp_path / "none.csv", {**rows, "click": [0] * len(rows["click"])})
    assert _train(tmp_path, tmp_path / "none.csv", "m", "--estimator", "naive") == 2
    assert "has no click" in capsys.readouterr().err
    assert _train(tmp_path, tmp_path / "none.csv", "m", "--estimator", "naive", "--engine", "lightgbm",
                  "--rounds", "2") == 2
    assert "no session with a click" in capsys.readouterr().err


@pytest.mark.parametrize("action", ["train", "estimate", "evaluate"])
def test_a_session_with_two_items_at_one_position_is_refused_by_every_reader(own, capsys, action):
    tmp_path, rows = own
    bad = {k: list(v) for k, v in rows.items()}
    bad["position"][5] = 1  # the second row of session s2 (file row 6) repeats position 1 (file row 5)
    assert bad["session"][4:6] == ["s2", "s2"]
    _write_csv(tmp_path / "bad.csv", bad)
    data, log = str(tmp_path / "data.txt"), str(tmp_path / "bad.csv")
    if action == "train":
        rc = _train(tmp_path, tmp_path / "bad.csv", "m", "--estimator", "naive")
    elif action == "estimate":
        rc = main(["clicks", "estimate", "--method", "em", "--log", log, "--data", data, "--resamples", "2"])
    else:
        (tmp_path / "scores.txt").write_text("1\n2\n3\n4\n5\n6\n")
        (tmp_path / "curve.txt").write_text("1\n0.5\n")
        rc = main(["clicks", "evaluate", "--log", log, "--data", data, "--scores", str(tmp_path / "scores.txt"),
                   "--propensity-file", str(tmp_path / "curve.txt")])
    assert rc == 2
    assert "bad.csv: row 6: the session shows a second item at position 1 (the first is at " in capsys.readouterr().err


def test_the_whole_log_reader_refuses_a_repeated_position_of_a_session_whose_rows_are_apart(own):
    tmp_path, rows = own
    bad = {k: list(v) + [v[0]] for k, v in rows.items()}  # session s0's first row again, at the end
    pq.write_table(pa.table(bad), tmp_path / "apart.parquet")
    with pytest.raises(LtrError, match=r"apart.parquet: row 71: the session shows a second item at position 1 "
                                       r"\(the first is at .*apart.parquet: row 1\)"):
        read_log_table(tmp_path / "apart.parquet", ids=_ids(tmp_path))


def _ids(tmp_path):
    from ltr.clicks.logs.ids import LogIds

    return LogIds(load_svmlight(tmp_path / "data.txt"), "id")


def test_curves_hold_unidentified_positions_at_the_nearest_identified_one_above(tmp_path):
    theta, known = complete_curve([1.0, 0.6, None, 0.0, 0.3], 7)
    assert theta.tolist() == [1.0, 0.6, 0.6, 0.6, 0.3, 0.3, 0.3]
    assert known.tolist() == [True, True, False, False, True, False, False]
    (tmp_path / "c.txt").write_text("# theta by position\n2.0\n1.0\nnan\n0.5\n")
    np.testing.assert_array_equal(read_curve_file(tmp_path / "c.txt"), [1.0, 0.5, np.nan, 0.25])
    (tmp_path / "bad.txt").write_text("1\n-0.5\n")
    with pytest.raises(LtrError, match=r"position 2 holds -0.5"):
        read_curve_file(tmp_path / "bad.txt")
