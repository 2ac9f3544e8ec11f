"""The readers and table checkers fuzzed by property (issue 48), with Hypothesis.

For any generated input, a reader either returns data that passes the documented checks, and holds
the values written (no silent coercion), or raises the toolkit's one input error
(:class:`~ltr.base.errors.LtrError`) naming the file and, where the problem has one, the line, row or
column; never another exception. Covered: SVMlight/LETOR lines, TREC run and qrels lines (both
readers), Parquet ranking tables (types, nulls, NaN/inf, empty), click logs (``.npz`` and Parquet),
calibration tables (CSV and Parquet), the JSON of model folders, and the option/TOML table checker.

Each test draws a fixed number of small examples (``max_examples``) and keeps no database of
failing examples (``database=None``; ``.hypothesis/`` is ignored by git as well), so the suite stays
in its time budget and the repository clean.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ltr.base.errors import DataFormatError, LtrError

# LTR_HYPOTHESIS_EXAMPLES=2000 for a longer search by hand; the suite's fixed count is 50
FAST = settings(max_examples=int(os.environ.get("LTR_HYPOTHESIS_EXAMPLES", "50")), deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow])


def _file(tmp: str, name: str, content: str | bytes) -> Path:
    path = Path(tmp) / name
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return path


def _names_the_place(exc: LtrError, path: Path, n_lines: int | None = None) -> None:
    """The one input error: it names the file, and a line in the file when it gives one."""
    assert path.name in str(exc), str(exc)
    if isinstance(exc, DataFormatError) and exc.line is not None and n_lines is not None:
        assert 1 <= exc.line <= n_lines, (exc.line, n_lines, str(exc))


# --------------------------------------------------------------------------------------------------
# SVMlight / LETOR lines
# --------------------------------------------------------------------------------------------------
NUMBER_TEXT = st.one_of(st.integers(-3, 1100).map(str), st.floats(-1e6, 1e6, allow_nan=False).map(lambda x: f"{x:.6g}"),
                        st.sampled_from(["nan", "inf", "-inf", "1e30", "abc", "", "0x10", "1,5", "٣"]))
FEATURE = st.tuples(st.integers(-1, 7), NUMBER_TEXT).map(lambda t: f"{t[0]}:{t[1]}")
QID = st.one_of(st.integers(0, 3).map(lambda q: f"qid:{q}"), st.sampled_from(["qid:x", "qid:-1", "qid:", ""]))
SVM_LINE = st.one_of(
    st.tuples(NUMBER_TEXT, QID, st.lists(FEATURE, max_size=4), st.sampled_from(["", " # docid = d1", " #"]))
    .map(lambda t: " ".join(p for p in (t[0], t[1], *t[2]) if p) + t[3]),
    st.sampled_from(["", "# a comment", "   ", "1 qid:1 1:1 2:2", "0 qid:1 3:0.5"]),
)


def _svm_reference(lines: list[str]):
    """The values a well-formed file holds: [(label, qid, {index: value})] for the data lines, or None
    when some line is not of the well-formed shape this generator makes (the reader must then refuse)."""
    rows = []
    for line in lines:
        body = line.split("#", 1)[0].split()
        if not body:
            continue
        try:
            label = float(body[0])
            if not body[1].startswith("qid:"):
                return None
            qid = int(body[1][4:])
            feats = {}
            for token in body[2:]:
                i, v = token.split(":")
                feats[int(i)] = float(v)
        except (ValueError, IndexError):
            return None
        if not math.isfinite(label) or label >= 1024:
            return None
        indices = list(feats)
        if any(i < 1 for i in indices) or indices != sorted(set(indices)) or len(indices) != len(body) - 2:
            return None
        if not all(math.isfinite(v) for v in feats.values()):
            return None
        rows.append((label, qid, feats))
    return rows


@FAST
@given(st.lists(SVM_LINE, min_size=0, max_size=8))
def test_svmlight_reader_returns_what_was_written_or_names_the_line(lines):
    from ltr.data.svmlight import load_svmlight

    text = "\n".join(lines) + "\n"
    with tempfile.TemporaryDirectory() as tmp:
        path = _file(tmp, "data.txt", text)
        try:
            ds = load_svmlight(path, cache=False, progress=False)
        except LtrError as exc:
            _names_the_place(exc, path, len(lines))
            return
    ref = _svm_reference(lines)
    assert ref is not None and ref, f"accepted a file the checks refuse:\n{text}"
    assert ds.n_items == len(ref)
    assert np.all(np.isfinite(ds.features)) and np.all(np.isfinite(ds.labels)) and np.all(ds.labels >= 0)
    assert np.all(np.diff(ds.query_offsets) > 0) and ds.query_offsets[-1] == ds.n_items
    for row, (label, qid, feats) in enumerate(ref):
        assert ds.labels[row] == max(label, 0.0)  # negative labels: judged non-relevant, 0 (the documented rule)
        for i in range(ds.n_features):
            assert ds.features[row, i] == np.float32(feats.get(i + 1, 0.0))
    qids = [qid for _, qid, _ in ref]
    assert [str(q) for q in ds.query_ids.tolist()] == [str(q) for i, q in enumerate(qids) if i == 0 or q != qids[i - 1]]


# --------------------------------------------------------------------------------------------------
# TREC run and qrels lines: the row reader and the columnar reader agree
# --------------------------------------------------------------------------------------------------
WORD = st.text(alphabet="abcq0123-_.", min_size=1, max_size=4)
TREC_FIELD = st.one_of(WORD, NUMBER_TEXT.filter(lambda s: s and " " not in s))
TREC_LINE = st.one_of(st.lists(TREC_FIELD, min_size=1, max_size=7).map(" ".join),
                      st.tuples(WORD, WORD, st.integers(0, 3)).map(lambda t: f"{t[0]} 0 {t[1]} {t[2]}"),
                      st.tuples(WORD, WORD, st.floats(-5, 5)).map(lambda t: f"{t[0]} Q0 {t[1]} 1 {t[2]:.4f} tag"),
                      st.sampled_from(["", "# comment"]))


def _records(table) -> list[tuple[str, str, float]]:
    docs = table.docs.to_pylist() if hasattr(table.docs, "to_pylist") else list(table.docs)
    return sorted((table.query_ids[table.query_code[i]], str(docs[i]), float(table.values[i])) for i in range(table.n_records))


@FAST
@given(st.lists(TREC_LINE, max_size=8), st.sampled_from(["run", "qrels"]))
def test_trec_readers_agree_and_name_the_line(lines, kind):
    from ltr.data import trec, trec_tables

    text = "\n".join(lines) + "\n"
    with tempfile.TemporaryDirectory() as tmp:
        path = _file(tmp, f"x.{kind}", text)
        rows_reader = trec.read_run if kind == "run" else trec.read_qrels
        table_reader = trec_tables.read_run_table if kind == "run" else trec_tables.read_qrels_table
        outcomes = []
        columnar = trec_tables.COLUMNAR_MIN_BYTES
        trec_tables.COLUMNAR_MIN_BYTES = 0  # the columnar reader of large files, on these small ones
        try:
            for reader in (rows_reader, table_reader):
                try:
                    outcomes.append(reader(path))
                except LtrError as exc:
                    _names_the_place(exc, path, len(lines))
                    outcomes.append(type(exc))
        finally:
            trec_tables.COLUMNAR_MIN_BYTES = columnar
    rows, table = outcomes
    assert isinstance(rows, type) == isinstance(table, type), (rows, table, text)  # both refuse or both read
    if isinstance(rows, type):
        return
    if kind == "run":
        expected = sorted((q, d, s) for q, pairs in rows.items() for d, s in pairs)
    else:
        expected = sorted((q, d, v) for q, docs in rows.items() for d, v in docs.items())
        assert all(math.isfinite(v) and v < 1024 for _, _, v in expected)
    assert _records(table) == expected
    fields = [line.split("#")[0].split() if kind == "qrels" else line.split() for line in lines]
    data = [f for f in fields if f and not f[0].startswith("#")]
    assert len(expected) == len(data)
    value_at = 4 if kind == "run" else 3
    assert sorted(float(f[value_at]) for f in data) == sorted(v for _, _, v in expected)  # the values as written


# --------------------------------------------------------------------------------------------------
# Parquet ranking tables: types, nulls, NaN/inf, empty
# --------------------------------------------------------------------------------------------------
def _column(kind: str, n: int, draw) -> list:
    if kind == "int":
        return draw(st.lists(st.integers(-2, 2000), min_size=n, max_size=n))
    if kind == "float":
        return draw(st.lists(st.floats(-1e4, 1e4) | st.sampled_from([math.nan, math.inf]), min_size=n, max_size=n))
    if kind == "null":
        return draw(st.lists(st.one_of(st.none(), st.floats(0, 3)), min_size=n, max_size=n))
    if kind == "bool":
        return draw(st.lists(st.booleans(), min_size=n, max_size=n))
    return draw(st.lists(st.sampled_from(["1", "x", ""]), min_size=n, max_size=n))


@st.composite
def ranking_tables(draw):
    n = draw(st.integers(0, 8))
    qid = sorted(draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))) if draw(st.booleans()) else \
        draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    kinds = st.sampled_from(["int", "float", "float", "null", "bool", "text"])
    columns = {"qid": qid, "label": _column(draw(kinds), n, draw)}
    for j in range(draw(st.integers(1, 3))):
        columns[f"f{j}"] = _column(draw(kinds), n, draw)
    if draw(st.booleans()):
        columns.pop(draw(st.sampled_from(sorted(columns))))
    return columns


@FAST
@given(ranking_tables())
def test_parquet_reader_keeps_the_values_or_names_the_column(columns):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ltr.data.parquet import load_parquet

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.parquet"
        pq.write_table(pa.table(columns), path)
        try:
            ds = load_parquet(path)
        except LtrError as exc:
            _names_the_place(exc, path)
            return
    assert {"qid", "label"} <= set(columns) and len(columns["qid"]) > 0
    n = len(columns["qid"])
    assert ds.n_items == n and np.all(np.isfinite(ds.features)) and np.all(np.isfinite(ds.labels))
    assert np.all(ds.labels >= 0) and np.all(ds.labels < 1024)
    for i, value in enumerate(columns["label"]):
        assert ds.labels[i] == max(float(value), 0.0)  # True is 1; a negative label is 0 (the documented rule)
    names = list(ds.feature_names)
    for name in names:
        for i, value in enumerate(columns[name]):
            assert ds.features[i, names.index(name)] == np.float32(float(value))
    qid = columns["qid"]  # each query's rows contiguous, one query per run of equal ids
    starts = [0] + [i for i in range(1, n) if qid[i] != qid[i - 1]]
    assert ds.query_offsets.tolist() == starts + [n] and len(set(qid[s] for s in starts)) == len(starts)


# --------------------------------------------------------------------------------------------------
# Click logs: the .npz written by ClickLog.save, its arrays changed; the Parquet log table
# --------------------------------------------------------------------------------------------------
def _small_log():
    from ltr.clicks import ClickLog

    rng = np.random.default_rng(0)
    m, s = 12, 4
    return dict(session=np.repeat(np.arange(s), 3), query=np.repeat([0, 1, 0, 2], 3), doc=np.arange(m),
                position=np.tile([1, 2, 3], s), logged_rank=np.tile([1, 2, 3], s), click=rng.integers(0, 2, m).astype(np.int8),
                propensity=np.full(m, 0.5), session_query=np.array([0, 1, 0, 2]), session_mode=np.zeros(s, np.int64),
                session_swap=np.zeros(s, np.int64)), ClickLog


ENTRY_VALUE = st.one_of(st.integers(-3, 20), st.floats(-2, 5), st.sampled_from([math.nan, math.inf, True]))


@FAST
@given(st.sampled_from(["session", "query", "doc", "position", "logged_rank", "click", "propensity", "session_query",
                        "session_mode", "session_swap", "meta"]),
       st.sampled_from(["value", "dtype", "shape", "drop", "length"]), st.integers(0, 11), ENTRY_VALUE)
def test_click_log_reader_checks_every_array(name, change, at, value):
    arrays, ClickLog = _small_log()
    arrays["meta"] = np.array(json.dumps({"model": "pbm"}))
    if change == "drop":
        arrays.pop(name)
    elif name == "meta":
        arrays["meta"] = np.array(str(value) if change == "value" else "[1, 2]")
    elif change == "value":
        a = arrays[name].astype(np.float64 if isinstance(value, float) else arrays[name].dtype)
        a[at % a.size] = value
        arrays[name] = a
    elif change == "dtype":
        arrays[name] = arrays[name].astype(np.float64) + 0.5
    elif change == "shape":
        arrays[name] = arrays[name].reshape(1, -1)
    else:
        arrays[name] = arrays[name][:-1]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "log.npz"
        with open(path, "wb") as fh:
            np.savez(fh, **arrays)
        try:
            log = ClickLog.load(path)
        except LtrError as exc:
            _names_the_place(exc, path)
            return
    s = len(log.session_query)
    assert np.all((log.session >= 0) & (log.session < s)) and np.all(log.position >= 1) and np.all(log.logged_rank >= 1)
    assert set(np.unique(log.click).tolist()) <= {0, 1} and np.all((log.propensity >= 0) & (log.propensity <= 1))
    for key in ("session", "query", "doc", "position", "logged_rank", "click", "session_query", "session_mode"):
        assert np.array_equal(getattr(log, key), arrays[key]), key  # the values as written, not rounded


# whole numbers (as floats too) and NaN: a fractional position or click is the refusal test below
LOG_CELL = st.one_of(st.integers(-2, 6), st.integers(-1, 4).map(float), st.just(math.nan), st.none())


@FAST
@given(st.lists(st.tuples(LOG_CELL, LOG_CELL, LOG_CELL, LOG_CELL, LOG_CELL), min_size=0, max_size=6),
       st.sampled_from(["int", "float"]))
def test_parquet_click_log_reader_keeps_the_values_or_names_the_column(rows, kind):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ltr.clicks.logs.table import read_log_parquet

    names = ("session", "query", "doc", "position", "click")
    columns = {n: [r[i] for r in rows] for i, n in enumerate(names)}
    if kind == "int":  # the common case: integer columns (nulls allowed by Arrow), floats rounded away here
        columns = {n: [None if v is None else int(v) if not (isinstance(v, float) and not math.isfinite(v)) else None
                       for v in c] for n, c in columns.items()}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "log.parquet"
        pq.write_table(pa.table({n: pa.array(c, type=pa.int64() if kind == "int" else pa.float64())
                                 for n, c in columns.items()}), path)
        try:
            log = read_log_parquet(path)
        except LtrError as exc:
            _names_the_place(exc, path)
            return
    # read: every value as written (a float column of whole numbers is exact; 1.5 is never read as 1)
    assert len(log.session) == len(rows)
    for name in ("query", "doc", "position", "click"):
        assert sorted(getattr(log, name).tolist()) == sorted(float(v) for v in columns[name]), name
    assert np.all(log.position >= 1) and set(np.unique(log.click).tolist()) <= {0, 1}


def test_parquet_click_log_refuses_fractional_positions_and_clicks(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ltr.clicks.logs.table import read_log_parquet

    pq.write_table(pa.table({"session": [0.0, 0.0], "query": [0.0, 0.0], "doc": [0.0, 1.0], "position": [1.5, 2.0],
                             "click": [0.7, 0.0]}), tmp_path / "log.parquet")
    with pytest.raises(LtrError, match="position"):
        read_log_parquet(tmp_path / "log.parquet")


# --------------------------------------------------------------------------------------------------
# Calibration tables (CSV and Parquet): scores finite, labels 0/1, weights >= 0, fields not empty
# --------------------------------------------------------------------------------------------------
CAL_CELL = st.one_of(st.integers(-1, 2).map(str), st.floats(-3, 3).map(lambda x: f"{x:.3f}"),
                     st.sampled_from(["", "nan", "inf", "x", "1.0", "0.0", "true"]))


@FAST
@given(st.lists(st.tuples(CAL_CELL, CAL_CELL, CAL_CELL, st.sampled_from(["a", "b", ""])), max_size=6),
       st.booleans())
def test_calibration_table_reader_keeps_the_values_or_names_row_and_column(rows, weighted):
    from ltr.calibrate.tables import read_calibration_table

    text = "score,label,w,adv\n" + "".join(",".join(r) + "\n" for r in rows)
    with tempfile.TemporaryDirectory() as tmp:
        path = _file(tmp, "t.csv", text)
        try:
            t = read_calibration_table(path, score_column="score", label_column="label", field_columns=["adv"],
                                       weight_column="w" if weighted else None)
        except LtrError as exc:
            _names_the_place(exc, path)
            return
    assert len(t.scores) == len(rows) > 0 and np.all(np.isfinite(t.scores))
    assert t.scores.tolist() == [float(r[0]) for r in rows]  # as written
    # a label column of true/false reads as 1/0 (a boolean label is a 0/1 label); nowhere else
    assert t.labels.tolist() == [{"true": 1.0, "false": 0.0}.get(r[1], None) or float(r[1]) for r in rows]
    assert set(t.labels.tolist()) <= {0.0, 1.0}
    if weighted:
        assert t.weights.tolist() == [float(r[2]) for r in rows] and np.all(t.weights >= 0)
    assert all(str(v) != "" for v in t.fields["adv"].tolist())


# --------------------------------------------------------------------------------------------------
# Model folders' JSON (model.json of a neural model): any value of any key
# --------------------------------------------------------------------------------------------------
JSON_VALUE = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-5, 1 << 40), st.floats(allow_nan=False),
                                    st.text(max_size=6)),
                          lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=2),
                          max_leaves=5)


@settings(max_examples=int(os.environ.get("LTR_HYPOTHESIS_EXAMPLES", "40")), deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["type", "n_features", "hidden", "activation", "dropout", "batch_norm", "normalize", "input_noise",
                        "query_norm", "format", "transform"]), JSON_VALUE)
def test_model_json_of_any_value_loads_or_is_refused_naming_the_file(key, value):
    from ltr.train.models import MLPScorer, load_model, model_config, save_model

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "m"
        save_model(MLPScorer(3, hidden=(4,)), folder)
        config = json.loads((folder / "model.json").read_text())
        config[key] = value
        (folder / "model.json").write_text(json.dumps(config))
        try:
            model = load_model(folder)
        except LtrError as exc:
            assert "model.json" in str(exc) or "model.pt" in str(exc) or str(folder) in str(exc), str(exc)
            return
    loaded = model_config(model)
    for k, v in config.items():
        if k in loaded and k not in ("format", "transform"):
            assert loaded[k] == v or (isinstance(v, list) and tuple(v) == tuple(loaded[k])), (k, v, loaded[k])


# --------------------------------------------------------------------------------------------------
# The table checker of options and TOML values (ltr.base.checks.check_table)
# --------------------------------------------------------------------------------------------------
TOML_VALUE = st.one_of(st.booleans(), st.integers(-3, 2**40), st.floats(allow_nan=True, allow_infinity=True),
                       st.text(max_size=5), st.lists(st.integers(-1, 5), max_size=3), st.none())


@FAST
@given(st.dictionaries(st.sampled_from(["epochs", "lr", "batch_norm", "hidden", "activation", "patience", "bogus"]),
                       TOML_VALUE, max_size=4))
def test_check_table_returns_only_values_its_rules_accept(values):
    from ltr.base.checks import check_table
    from ltr.train.config import MODEL_RULES, TRAIN_RULES

    rules = {k: v for k, v in {**TRAIN_RULES, **MODEL_RULES}.items()
             if k in ("epochs", "lr", "batch_norm", "hidden", "activation", "patience")}
    try:
        out = check_table(values, rules, where="cfg.toml [train]")
    except LtrError as exc:
        bad = [k for k, v in values.items() if k not in rules or rules[k].problem(v)]
        assert bad and str(exc).startswith("cfg.toml [train]") and any(repr(k) in str(exc) or k in str(exc) for k in bad)
        return
    assert out.keys() == values.keys()
    for k, v in out.items():
        assert rules[k].problem(v) is None and not isinstance(v, bool) or rules[k].kind == "bool" or v is None
        assert v == values[k] and (type(v) is type(values[k]) or rules[k].kind == "float")


# --------------------------------------------------------------------------------------------------
# The other JSON of model and data folders: calibrator.json, a store's store.json
# --------------------------------------------------------------------------------------------------
def _calibrator_file(tmp: str) -> Path:
    from ltr.calibrate.factory import make_calibrator

    rng = np.random.default_rng(0)
    s = 1 / (1 + np.exp(-rng.normal(size=200)))  # probabilities: Platt on their logit
    cal = make_calibrator("platt").fit(s, (rng.random(200) < s).astype(float))
    path = Path(tmp) / "calibrator.json"
    cal.save(path)
    return path


@FAST
@given(st.data())
def test_calibrator_json_of_any_value_loads_or_is_refused_naming_the_file(data):
    from ltr.calibrate.factory import load_calibrator

    with tempfile.TemporaryDirectory() as tmp:
        path = _calibrator_file(tmp)
        doc = json.loads(path.read_text())
        key = data.draw(st.sampled_from(sorted(doc)))
        doc[key] = data.draw(JSON_VALUE)
        path.write_text(json.dumps(doc))
        try:
            cal = load_calibrator(path)
        except LtrError as exc:
            _names_the_place(exc, path)
            return
    p = cal.predict(np.linspace(0.05, 0.95, 7))  # probabilities: valid input whatever the calibrator's input rule
    assert np.all(np.isfinite(p)) and np.all((p >= 0) & (p <= 1)) and np.all(np.diff(p) >= 0)


@FAST
@given(st.data())
def test_store_json_of_any_value_opens_or_is_refused_naming_the_file(data):
    from ltr.data.store import STORE_JSON, convert_to_store, open_store

    rng = np.random.default_rng(1)
    lines = "".join(f"{rng.integers(0, 3)} qid:{q} 1:{rng.normal():.3f} 2:{rng.normal():.3f}\n" for q in (1, 1, 2, 2, 2))
    with tempfile.TemporaryDirectory() as tmp:
        src = _file(tmp, "d.txt", lines)
        convert_to_store(src, Path(tmp) / "st", progress=False)
        path = Path(tmp) / "st" / STORE_JSON
        doc = json.loads(path.read_text())
        key = data.draw(st.sampled_from(sorted(doc)))
        doc[key] = data.draw(JSON_VALUE)
        path.write_text(json.dumps(doc))
        try:
            ds = open_store(Path(tmp) / "st")
            features, labels, offsets = np.array(ds.features), np.array(ds.labels), np.array(ds.query_offsets)
        except LtrError as exc:
            assert "st" in str(exc), str(exc)
            return
    assert features.shape == (5, 2) and offsets.tolist() == [0, 2, 5] and np.all(np.isfinite(labels))
