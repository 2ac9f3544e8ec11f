"""The columnar TREC reader (ltr.data.trec_tables) gives what the line-by-line reader gives.

Same aligned arrays as ``align(read_run, read_qrels)`` (and the same metric values, trec_eval's
ties by docno included), the same located errors on bad lines (the fast path declines and the
line-by-line reader names the line), and the same records for valid files in shapes the fast path
does not take (tabs, runs of spaces, comments, 5-field lines, a byte order mark).
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from ltr.data.trec import align, evaluate_aligned, read_qrels, read_run
from ltr.base.errors import DataFormatError

tables = importlib.import_module("ltr.data.trec_tables")


@pytest.fixture(autouse=True)
def columnar_for_small_files(monkeypatch):
    monkeypatch.setattr(tables, "COLUMNAR_MIN_BYTES", 0)


def write_files(folder, seed=0, n_queries=12):
    """A run whose queries are not contiguous nor sorted, with run-only and qrels-only queries."""
    rng = np.random.default_rng(seed)
    run_lines, qrels_lines = [], []
    for q in rng.permutation(n_queries):
        docs = rng.choice(60, size=rng.integers(1, 25), replace=False)
        if q % 5 != 4:  # every fifth query has no judgments
            judged = rng.choice(60, size=15, replace=False)
            qrels_lines += [f"q{q} 0 doc{d} {int(rng.integers(-1, 4))}" for d in judged]
        scores = np.round(rng.normal(size=docs.size), 1)  # ties: trec_eval breaks them by docno
        run_lines += [f"q{q} Q0 doc{d} {i + 1} {s} tag" for i, (d, s) in enumerate(zip(docs, scores))]
    qrels_lines += ["zz 0 docA 1", "zz 0 docB 0"]  # a qrels-only query
    # split one query's lines in two places of the file
    run_lines = run_lines[3:] + run_lines[:3]
    (folder / "run.txt").write_text("\n".join(run_lines) + "\n")
    (folder / "qrels.txt").write_text("\n".join(qrels_lines) + "\n")
    return folder / "run.txt", folder / "qrels.txt"


def assert_aligned_equal(a, b):
    assert a.query_ids == b.query_ids
    for name in ("scores", "labels", "query_offsets", "qrels_labels", "qrels_offsets"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    # inside each query (where ties by docno compare them) the document codes order as the ids do
    ids = np.asarray(b.doc_ids, dtype=str)
    for lo, hi in zip(b.query_offsets[:-1], b.query_offsets[1:]):
        np.testing.assert_array_equal(np.argsort(a.doc_ids[lo:hi], kind="stable"), np.argsort(ids[lo:hi], kind="stable"))
    assert (a.dropped_run_queries, a.dropped_qrels_queries) == (b.dropped_run_queries, b.dropped_qrels_queries)


@pytest.mark.parametrize("complete", [False, True])
def test_columns_align_as_the_dictionaries_do(tmp_path, monkeypatch, complete):
    run_path, qrels_path = write_files(tmp_path)
    expected = align(read_run(run_path), read_qrels(qrels_path), complete=complete)
    # the fast path really reads these files: the line-by-line readers are not called
    monkeypatch.setattr(tables, "read_run", lambda path: pytest.fail("line-by-line run reader used"))
    monkeypatch.setattr(tables, "read_qrels", lambda path: pytest.fail("line-by-line qrels reader used"))
    got = tables.align_tables(tables.read_run_table(run_path), tables.read_qrels_table(qrels_path), complete=complete)
    assert_aligned_equal(got, expected)
    assert np.isnan(got.labels).sum() > 0 and (got.qrels_labels < 0).any()
    for preset in ("trec_eval", None):
        one = evaluate_aligned(expected, "ndcg@10,map,recall@20,P_5,bpref", preset)
        two = evaluate_aligned(got, "ndcg@10,map,recall@20,P_5,bpref", preset)
        for name in one.per_query:
            np.testing.assert_array_equal(one.per_query[name], two.per_query[name])


@pytest.mark.parametrize("edit, line, message", [
    (lambda lines: lines.__setitem__(4, "q1 Q0 docX 5 abc tag"), 5, "score 'abc' is not a number"),
    (lambda lines: lines.__setitem__(6, "q1 Q0 docY 7"), 7, "expected 6 fields"),
    (lambda lines: lines.__setitem__(2, "q1 Q0 docZ 3 nan tag"), 3, "score 'nan' is not finite"),
    (lambda lines: lines.__setitem__(9, lines[8].replace(" 9 ", " 10 ")), 10, "listed twice"),
])
def test_bad_run_lines_are_reported_where_they_are(tmp_path, edit, line, message):
    lines = [f"q1 Q0 d{i} {i + 1} {1.0 / (i + 1)} t" for i in range(12)]
    edit(lines)
    path = tmp_path / "run.txt"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataFormatError) as expected:
        read_run(path)
    with pytest.raises(DataFormatError) as got:
        tables.read_run_table(path)
    assert str(got.value) == str(expected.value)
    assert f"{path}:{line}:" in str(got.value) and message in str(got.value)


@pytest.mark.parametrize("bad, message", [("q1 0 d3 2000", "too large"), ("q1 0 d3 x", "not a number"),
                                          ("q1 0 d1 1", "judged twice"), ("q1 0 d3", "expected 4 fields")])
def test_bad_qrels_lines_are_reported_where_they_are(tmp_path, bad, message):
    path = tmp_path / "qrels.txt"
    path.write_text(f"q1 0 d1 1\nq1 0 d2 0\n{bad}\nq2 0 d1 1\n")
    with pytest.raises(DataFormatError, match=f":3: .*{message}"):
        tables.read_qrels_table(path)


@pytest.mark.parametrize("text", [
    "q1\tQ0\td1\t1\t0.5\tt\nq1 Q0 d2 2 0.25 t\n",          # tabs
    "q1 Q0  d1 1 0.5 t\nq1 Q0 d2 2 0.25 t\n",              # two spaces
    "# a comment\nq1 Q0 d1 1 0.5 t\n\nq1 Q0 d2 2 0.25 t\n",  # comment and blank line
    "q1 Q0 d1 1 0.5\nq1 Q0 d2 2 0.25 t\n",                 # 5 and 6 fields
    "\ufeffq1 Q0 d1 1 0.5 t\nq1 Q0 d2 2 0.25 t\n",         # byte order mark
    "q1 Q0 d1 1 0.5 t \r\nq1 Q0 d2 2 0.25 t\r\n",          # trailing space, CRLF
    "q1 Q0 d\u00e9 1 0.5 t\nq1 Q0 d2 2 0.25 t\n",          # non-ASCII id
    "q1 Q0 d1 1 0.5 t \nq1 Q0 d2 2 0.25 t \n",            # a space at the end of every line
    "q1 Q0 d1 1 0.5 t\nq1 Q0 d2 2 0.25 t \nq1 Q0 d3 3 0.2 t\n",  # a space at the end of a later line
    "q1 Q0 d1 1 0.5 t\nq1 Q0 d2 2 0.25 t ",               # ... of the last line, without a newline
    "q1 Q0 d1 1 0.5 t\n q1 Q0 d2 2 0.25 t\n",             # a space at the start of a later line
    "q1 Q0 d1 1 0.5 t\n#c Q0 d9 1 0.5 t\nq1 Q0 d2 2 0.25 t\n",  # a comment with six fields
    "q1 Q0 d1 1 0.5 t\r\r\nq1 Q0 d2 2 0.25 t\r\n",          # a lone carriage return
])
def test_valid_files_in_other_shapes_read_the_same(tmp_path, text):
    path = tmp_path / "run.txt"
    path.write_text(text, encoding="utf-8")
    table = tables.read_run_table(path)
    expected = read_run(path)
    docs = table.docs.tolist() if isinstance(table.docs, np.ndarray) else table.docs.to_pylist()
    got = {}
    for q, d, s in zip(table.query_code.tolist(), docs, table.values.tolist()):
        got.setdefault(table.query_ids[q], []).append((d, s))
    assert got == expected


def test_a_columnar_run_with_line_by_line_qrels(tmp_path):
    run_path, qrels_path = write_files(tmp_path, seed=3)
    text = qrels_path.read_text()
    qrels_path.write_text("# judged by hand\n" + text)  # a comment: the qrels go line by line
    expected = align(read_run(run_path), read_qrels(qrels_path))
    got = tables.align_tables(tables.read_run_table(run_path), tables.read_qrels_table(qrels_path))
    assert isinstance(tables.read_qrels_table(qrels_path).docs, np.ndarray)
    assert_aligned_equal(got, expected)


def test_short_ids_are_packed_exactly_in_byte_order():
    pa = pytest.importorskip("pyarrow")
    ids = ["a", "ab", "abc", "b", "D1234567", "D123456", "12345678", "9", "~", "A~", "0"]
    packed = tables._packed_ids(pa.chunked_array([ids[:4], ids[4:]]))
    assert packed is not None
    # integer order = byte order (a prefix first), equal ids equal numbers
    assert np.argsort(packed, kind="stable").tolist() == sorted(range(len(ids)), key=lambda i: ids[i])
    assert packed[0] == ord("a") << 56 and packed[1] == (ord("a") << 56) | (ord("b") << 48)
    assert tables._packed_ids(pa.array(["short", "longer_than_8"])) is None
    sliced = pa.array(["xx", "b", "ab"]).slice(1)  # an array that starts inside its buffers
    assert tables._packed_ids(sliced).tolist() == [ord("b") << 56, (ord("a") << 56) | (ord("b") << 48)]


@pytest.mark.parametrize("prefix", ["", "clueweb09-en0000-"])
def test_long_and_short_ids_and_mixed_tables_align_the_same(tmp_path, prefix):
    """Ids of at most 8 bytes join by their packed values; longer ids by Arrow's string look-up; a
    run of one kind with qrels of the other too."""
    run_path, qrels_path = write_files(tmp_path, seed=5, n_queries=20)
    for path in (run_path, qrels_path):
        path.write_text(path.read_text().replace(" doc", f" {prefix}doc"))
    expected = align(read_run(run_path), read_qrels(qrels_path))
    run, qrels = tables.read_run_table(run_path), tables.read_qrels_table(qrels_path)
    assert run.packed == qrels.packed == (prefix == "")
    assert_aligned_equal(tables.align_tables(run, qrels), expected)
    by_lines = tables._from_records(read_run(run_path), lambda pairs: pairs)  # a run read line by line
    assert_aligned_equal(tables.align_tables(by_lines, qrels), expected)
    if prefix == "":
        # two qrels pairs with one hash: the join falls back to the look-up by strings
        original = tables._pair_hash
        tables._pair_hash = lambda q, d: original(q, d) & np.uint64(0xF)
        try:
            assert tables._join_pairs(np.zeros(2, np.int64), np.array([1, 2]), np.zeros(40, np.int64),
                                      np.arange(40)) is None
            assert_aligned_equal(tables.align_tables(run, qrels), expected)
        finally:
            tables._pair_hash = original


def test_repeated_pair_found_through_hash_collisions(monkeypatch):
    q = np.array([0, 0, 1, 1, 2])
    d = np.array([5, 6, 5, 7, 5])
    assert not tables._has_repeated_pair(q, d)
    monkeypatch.setattr(tables, "_pair_hash", lambda q, d: np.zeros(q.size, np.uint64))  # every pair collides
    assert not tables._has_repeated_pair(q, d)
    assert tables._has_repeated_pair(np.append(q, 1), np.append(d, 7))


def test_a_nul_byte_goes_line_by_line(tmp_path):
    run_path, qrels_path = write_files(tmp_path, seed=2)
    lines = run_path.read_text().splitlines()
    lines[3] = lines[3].replace(" doc", " d\x00oc", 1)
    run_path.write_text("\n".join(lines) + "\n")
    assert tables._plain_file(run_path) is None
    assert tables._two_spaces(b"a  b") and tables._two_spaces(b"ab  c") and not tables._two_spaces(b"a b c ")
    assert tables._two_spaces(b"  ") and not tables._two_spaces(b" ") and not tables._two_spaces(b"")


def test_a_sorted_fully_judged_run_is_taken_without_copies(tmp_path):
    rng = np.random.default_rng(11)
    run_lines, qrels_lines = [], []
    for q in range(15):  # queries sorted by id and contiguous, every one judged
        docs = rng.choice(50, size=20, replace=False)
        qrels_lines += [f"q{q:02d} 0 d{d} {int(rng.integers(0, 3))}" for d in rng.choice(50, 12, replace=False)]
        run_lines += [f"q{q:02d} Q0 d{d} {i + 1} {-i / 4} t" for i, d in enumerate(docs)]
    (tmp_path / "run").write_text("\n".join(run_lines) + "\n")
    (tmp_path / "qrels").write_text("\n".join(qrels_lines) + "\n")
    run = tables.read_run_table(tmp_path / "run")
    qrels = tables.read_qrels_table(tmp_path / "qrels")
    both = {f"q{q:02d}": q for q in range(15)}
    assert tables._rows_by_query(run, both)[0] == slice(None)
    got = tables.align_tables(run, qrels)
    assert np.shares_memory(got.scores, run.values)  # a view of the table's column
    assert_aligned_equal(got, align(read_run(tmp_path / "run"), read_qrels(tmp_path / "qrels")))
