"""ltr.data: the flat data set, the SVMlight reader (errors, sidecar, comments, cache), writer, splits."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import shared_path

from ltr.data import RankingDataset, concat_datasets, load_svmlight, save_svmlight, split_by_query
from ltr.data.svmlight import format_float32
from ltr.base.errors import DataFormatError, LtrError


def small_dataset(seed=0, n_queries=7, n_features=5, doc_ids=True, users=True):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 9, size=n_queries)
    n = int(lengths.sum())
    x = rng.normal(size=(n, n_features)).astype(np.float32)
    x[rng.random(x.shape) < 0.3] = 0.0  # sparse entries are not written, must still come back as 0
    x[:, -1] = 0.0  # an all-zero last column: the width must survive the round trip
    return RankingDataset(
        features=x,
        labels=rng.integers(0, 5, size=n).astype(float),
        query_offsets=np.concatenate([[0], np.cumsum(lengths)]),
        query_ids=rng.choice(10_000, size=n_queries, replace=False) + 1,
        user_ids=rng.integers(0, 3, size=n_queries) if users else None,
        doc_ids=np.array([f"D{i:04d}" for i in range(n)]) if doc_ids else None,
    )


def write(tmp_path, text, name="data.txt", newline="\n"):
    path = tmp_path / name
    path.write_bytes(text.replace("\n", newline).encode())
    return path


# ---- the data set ---------------------------------------------------------------------------------
def test_dataset_properties_and_subset_keep_rows_in_order():
    ds = small_dataset()
    assert ds.n_queries == 7 and ds.n_features == 5
    assert ds.query_lengths.sum() == ds.n_items
    assert np.array_equal(np.bincount(ds.query_index, minlength=ds.n_queries), ds.query_lengths)
    sub = ds.subset([4, 1])
    o = ds.query_offsets
    expected_rows = np.r_[o[4] : o[5], o[1] : o[2]]
    assert np.array_equal(sub.features, ds.features[expected_rows])
    assert np.array_equal(sub.doc_ids, ds.doc_ids[expected_rows])
    assert sub.query_ids.tolist() == [ds.query_ids[4], ds.query_ids[1]]
    assert sub.query_offsets.tolist() == [0, o[5] - o[4], o[5] - o[4] + o[2] - o[1]]
    both = concat_datasets([ds.subset([0, 1, 2]), ds.subset([3, 4, 5, 6])])
    assert both.equals(ds)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"features": np.zeros(4)}, "2-D"),
        ({"labels": np.zeros(3)}, "labels must have shape"),
        ({"query_offsets": [0, 2, 3]}, "end at N"),
        ({"query_offsets": [0, 3, 1, 4]}, "non-decreasing"),
        ({"query_ids": [1, 2, 3]}, "query_ids must have shape"),
        ({"labels": [0, np.nan, 1, 2]}, "finite"),
        ({"doc_ids": ["a"]}, "doc_ids must have shape"),
    ],
)
def test_dataset_rejects_inconsistent_shapes(kwargs, message):
    base = dict(features=np.zeros((4, 2)), labels=np.zeros(4), query_offsets=[0, 1, 4], query_ids=[5, 6])
    base.update(kwargs)
    with pytest.raises(ValueError, match=message):
        RankingDataset(**base)


def test_features_are_float32_c_contiguous():
    ds = RankingDataset(np.asfortranarray(np.ones((3, 2))), [0, 1, 0], [0, 3], [1])
    assert ds.features.dtype == np.float32 and ds.features.flags.c_contiguous


# ---- writing and reading back ---------------------------------------------------------------------
def test_round_trip_is_exact_with_doc_ids_and_users(tmp_path):
    ds = small_dataset()
    path = tmp_path / "rt.txt"
    save_svmlight(ds, path)
    back = load_svmlight(path, cache=False)
    assert back.equals(ds)
    first = path.read_text().splitlines()[0]
    assert f"qid:{ds.query_ids[0]}" in first and "# docid = D0000" in first and "user = " in first


def test_float32_round_trip_is_bit_exact_on_random_bit_patterns(tmp_path):
    rng = np.random.default_rng(1)
    bits = rng.integers(0, 2**32, size=20_000, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    x = x[np.isfinite(x)]
    parsed = np.array(format_float32(x)).astype(np.float64).astype(np.float32)
    assert np.array_equal(parsed.view(np.uint32), x.view(np.uint32))
    # and through the file reader, with values that are exact short decimals too
    n = 400
    feats = np.concatenate([x[: n * 3].reshape(n, 3), np.round(rng.random((n, 2)), 4).astype(np.float32)], axis=1)
    ds = RankingDataset(feats, rng.integers(0, 3, n), [0, 150, n], [1, 2])
    save_svmlight(ds, tmp_path / "bits.txt")
    back = load_svmlight(tmp_path / "bits.txt", cache=False)
    assert np.array_equal(back.features.view(np.uint32), ds.features.view(np.uint32))


def test_non_integer_labels_round_trip(tmp_path):
    ds = RankingDataset(np.ones((3, 1)), [0.5, 1.0 / 3.0, 2.0], [0, 3], [4])
    save_svmlight(ds, tmp_path / "f.txt")
    assert load_svmlight(tmp_path / "f.txt", cache=False).labels.tolist() == [0.5, 1.0 / 3.0, 2.0]


def test_crlf_blank_and_comment_lines(tmp_path):
    text = "# header comment\n2 qid:3 1:0.5 3:1 # docid = A\n\n0 qid:3 2:2.5 # docid = B\n1 qid:9 1:1 # docid = C\n"
    ds = load_svmlight(write(tmp_path, text, newline="\r\n"), cache=False)
    assert ds.query_ids.tolist() == [3, 9]
    assert ds.query_offsets.tolist() == [0, 2, 3]
    assert ds.doc_ids.tolist() == ["A", "B", "C"]
    assert ds.features.tolist() == [[0.5, 0, 1], [0, 2.5, 0], [1, 0, 0]]
    assert ds.labels.tolist() == [2, 0, 1]


def test_doc_ids_when_some_comments_lack_them(tmp_path):
    text = "1 qid:1 1:1 # docid = A\n0 qid:1 1:2 # no id here\n0 qid:2 1:3 #docid=C # extra\n1 qid:2 1:4\n"
    ds = load_svmlight(write(tmp_path, text), cache=False)
    assert ds.doc_ids.tolist() == ["A", "", "C", ""]
    assert load_svmlight(write(tmp_path, "1 qid:1 1:1 # a note\n", name="n.txt"), cache=False).doc_ids is None


def test_users_must_be_constant_within_a_query(tmp_path):
    text = "1 qid:1 1:1 # user = 4\n0 qid:1 1:2 # user = 5\n"
    with pytest.raises(DataFormatError, match="user '5' differs from user '4'") as info:
        load_svmlight(write(tmp_path, text), cache=False)
    assert info.value.line == 2


def test_query_sidecar(tmp_path):
    path = write(tmp_path, "1 1:1\n0 1:2\n0 2:3\n2 1:4\n", name="g.txt")
    (tmp_path / "g.txt.query").write_text("3\n1\n")
    ds = load_svmlight(path, cache=False)
    assert ds.query_offsets.tolist() == [0, 3, 4]
    assert ds.query_ids.tolist() == [0, 1]
    other = tmp_path / "groups"
    other.write_text("2\n2\n")
    assert load_svmlight(path, query_file=other, cache=False).query_offsets.tolist() == [0, 2, 4]
    other.write_text("2\n1\n")
    with pytest.raises(DataFormatError, match="add up to 3 rows but .* holds 4 rows"):
        load_svmlight(path, query_file=other, cache=False)
    other.write_text("2\nx\n")
    with pytest.raises(DataFormatError, match=r"groups:2: group size 'x' is not an integer"):
        load_svmlight(path, query_file=other, cache=False)


# ---- errors: file, line and what was wrong ---------------------------------------------------------
GOOD = "1 qid:1 1:0.5 2:1\n0 qid:1 1:0.25 2:0\n"


@pytest.mark.parametrize(
    "bad_line, line_no, message",
    [
        ("0 qid:2 1:0.5 oops\n", 3, "token 'oops' .* is not 'index:value'"),
        ("high qid:2 1:0.5\n", 3, "label 'high' is not a number"),
        ("qid:2 1:0.5\n", 3, "label 'qid:2' is not a number"),
        ("0 qid:2 1:abc\n", 3, "value 'abc' of feature 1 is not a number"),
        ("0 qid:2 1:nan 2:1\n", 3, "feature 1 is NaN"),
        ("0 qid:2 1:1 2:inf\n", 3, "feature 2 is infinite"),
        ("0 qid:2 1:1 2:-Infinity\n", 3, "feature 2 is infinite"),
        ("nan qid:2 1:1\n", 3, "label is nan"),
        ("0 qid:2 2:1 1:1\n", 3, "feature indices must increase"),
        ("0 qid:2 0:1\n", 3, "invalid feature index 0"),
        ("0 qid:x 1:1\n", 3, "qid 'x' is not an integer"),
        ("0 1:1 2:1\n", 3, "missing qid"),
    ],
)
def test_malformed_line_names_file_line_and_problem(tmp_path, bad_line, line_no, message):
    path = write(tmp_path, GOOD + bad_line + "2 qid:3 1:1\n", name="bad.txt")
    with pytest.raises(DataFormatError, match=message) as info:
        load_svmlight(path, cache=False)
    assert info.value.line == line_no
    assert str(info.value).startswith(f"{path}:{line_no}: ")


def test_missing_qid_everywhere_without_sidecar(tmp_path):
    path = write(tmp_path, "1 1:1\n0 1:2\n", name="noqid.txt")
    with pytest.raises(DataFormatError, match=r"noqid.txt:1: missing qid"):
        load_svmlight(path, cache=False)


def test_error_located_deep_in_a_large_file(tmp_path):
    lines = [f"{i % 3} qid:{i // 10} 1:{i}.5 2:1" for i in range(10_000)]
    lines[7_321] = "1 qid:732 1:0.5 2:x"  # in the fourth block of lines
    path = write(tmp_path, "\n".join(lines) + "\n", name="big.txt")
    with pytest.raises(DataFormatError) as info:
        load_svmlight(path, cache=False)
    assert info.value.line == 7_322 and "value 'x' of feature 2" in str(info.value)


def test_non_contiguous_query_is_an_error_naming_the_query(tmp_path):
    text = "1 qid:5 1:1\n0 qid:5 1:2\n1 qid:6 1:3\n2 qid:5 1:4\n0 qid:7 1:5\n"
    with pytest.raises(DataFormatError, match="rows of query 5 are not contiguous: it starts on line 1") as info:
        load_svmlight(write(tmp_path, text), cache=False)
    assert info.value.line == 4


def test_n_features_too_small_names_the_line(tmp_path):
    path = write(tmp_path, "1 qid:1 1:1\n0 qid:1 1:1 4:2\n")
    with pytest.raises(DataFormatError, match="feature index 4 exceeds n_features=3") as info:
        load_svmlight(path, n_features=3, cache=False)
    assert info.value.line == 2
    assert load_svmlight(path, n_features=6, cache=False).n_features == 6


def test_cli_prints_data_errors_without_traceback(tmp_path, capsys):
    from ltr.cli import main

    assert main(["synth", "--out", str(tmp_path / "o"), "--mean-length", "5000"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ltr synth: error: bad option: --mean-length must be <= 1000") and "Traceback" not in err


def test_empty_file_and_comment_only_file(tmp_path):
    with pytest.raises(DataFormatError, match="empty"):
        load_svmlight(write(tmp_path, "", name="empty.txt"), cache=False)
    with pytest.raises(DataFormatError, match="no data lines"):
        load_svmlight(write(tmp_path, "# nothing\n\n", name="comments.txt"), cache=False)


# ---- cache ----------------------------------------------------------------------------------------
def test_cache_goes_to_the_cache_folder_and_beside_the_source_when_asked(tmp_path, monkeypatch):
    """Default: $LTR_CACHE_DIR, else the platform's cache folder; "beside" (argument or variable)
    writes <file>.ltrcache.npz next to the source. The source's folder is left alone by default."""
    import platformdirs

    from ltr.data import default_cache_dir

    (tmp_path / "shared").mkdir()
    path = write(tmp_path / "shared", "1 qid:1 1:0.5\n")
    monkeypatch.setenv("LTR_CACHE_DIR", str(tmp_path / "mine"))
    assert default_cache_dir() == tmp_path / "mine"
    load_svmlight(path)
    assert sorted(p.name for p in path.parent.iterdir()) == ["data.txt"]
    cached = list((tmp_path / "mine").iterdir())
    assert len(cached) == 1 and cached[0].name.startswith("data.txt.") and cached[0].name.endswith(".ltrcache.npz")
    assert load_svmlight(path).meta["cache"] == str(cached[0])
    load_svmlight(path, cache_dir="beside")
    assert (path.parent / "data.txt.ltrcache.npz").is_file()
    (path.parent / "data.txt.ltrcache.npz").unlink()
    monkeypatch.setenv("LTR_CACHE_DIR", "beside")  # the same choice for the commands, by the variable
    assert load_svmlight(path).meta.get("cache") is None and (path.parent / "data.txt.ltrcache.npz").is_file()
    monkeypatch.delenv("LTR_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == Path(platformdirs.user_cache_dir("ltr", appauthor=False))
    if sys.platform.startswith("linux"):
        assert default_cache_dir() == tmp_path / "xdg" / "ltr"


def test_cache_is_used_and_invalidated_when_the_source_changes(tmp_path):
    path = write(tmp_path, "1 qid:1 1:0.5 # docid = a user = 3\n0 qid:1 1:0.25 # docid = b user = 3\n")
    first = load_svmlight(path, cache_dir="beside")
    assert first.doc_ids.tolist() == ["a", "b"] and first.user_ids.tolist() == [3]
    cache_file = tmp_path / "data.txt.ltrcache.npz"
    assert cache_file.is_file() and "cache" not in first.meta
    second = load_svmlight(path, cache_dir="beside")
    assert second.meta["cache"] == str(cache_file) and second.equals(first)
    # same size, new value: the cache must not be used
    stat = os.stat(path)
    path.write_text("1 qid:1 1:0.5 # docid = a user = 3\n0 qid:1 1:0.75 # docid = b user = 3\n")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # even with the old mtime
    third = load_svmlight(path, cache_dir="beside")
    assert third.features[1, 0] == 0.75 and "cache" not in third.meta
    assert load_svmlight(path, cache_dir="beside").meta.get("cache") == str(cache_file)


def test_cache_dir_and_corrupt_cache(tmp_path):
    path = write(tmp_path, "1 qid:1 1:0.5\n")
    cache_dir = tmp_path / "cache"
    load_svmlight(path, cache_dir=cache_dir)
    files = list(cache_dir.iterdir())
    assert len(files) == 1 and files[0].name.endswith(".ltrcache.npz")
    files[0].write_bytes(b"not a zip file")
    again = load_svmlight(path, cache_dir=cache_dir)  # rebuilt, not trusted
    assert again.features[0, 0] == 0.5 and "cache" not in again.meta
    assert "cache" in load_svmlight(path, cache_dir=cache_dir).meta


# ---- splits ---------------------------------------------------------------------------------------
def test_split_by_query_partitions_queries_deterministically():
    ds = small_dataset(n_queries=50)
    parts = split_by_query(ds, (0.6, 0.2, 0.2), seed=3)
    ids = [set(p.query_ids.tolist()) for p in parts]
    assert [len(s) for s in ids] == [30, 10, 10]
    assert not (ids[0] & ids[1] or ids[0] & ids[2] or ids[1] & ids[2])
    assert set.union(*ids) == set(ds.query_ids.tolist())
    assert sum(p.n_items for p in parts) == ds.n_items
    again = split_by_query(ds, (0.6, 0.2, 0.2), seed=3)
    assert all(a.equals(b) for a, b in zip(parts, again))
    other = split_by_query(ds, (0.6, 0.2, 0.2), seed=4)
    train, valid, empty = split_by_query(ds, (0.8, 0.2, 0.0), seed=0)
    assert (train.n_queries, valid.n_queries, empty.n_queries, empty.n_features) == (40, 10, 0, 5)
    assert set(other[0].query_ids.tolist()) != ids[0]
    with pytest.raises(ValueError, match="add up to 1"):
        split_by_query(ds, (0.5, 0.2))


def test_split_by_user_keeps_users_whole():
    rng = np.random.default_rng(0)
    ds = small_dataset(n_queries=200, users=False)
    ds.user_ids = rng.integers(0, 80, size=200)
    parts = split_by_query(ds, (0.8, 0.1, 0.1), seed=0, by_user=True)
    users = [set(p.user_ids.tolist()) for p in parts]
    assert not (users[0] & users[1] or users[0] & users[2] or users[1] & users[2])
    assert sum(p.n_queries for p in parts) == 200
    assert 130 <= parts[0].n_queries <= 190


# ---- the real data sets (skipped when ../shared/data is absent) -----------------------------------
def test_mq2008_five_parts(tmp_path):
    parts = [load_svmlight(shared_path("letor4-mq2008", f"S{i}.txt"), cache_dir=tmp_path) for i in range(1, 6)]
    assert [p.n_items for p in parts] == [2933, 3635, 3062, 2707, 2874]
    assert [p.n_queries for p in parts] == [157, 157, 157, 157, 156]
    whole = concat_datasets(parts)
    assert (whole.n_queries, whole.n_items, whole.n_features) == (784, 15211, 46)
    assert np.bincount(whole.labels.astype(int)).tolist() == [12279, 2001, 931]
    assert len(np.unique(whole.query_ids)) == 784
    assert parts[0].doc_ids[0] == "GX008-86-4444840" and parts[0].query_ids[0] == 10002
    lengths = parts[1].query_lengths
    assert (lengths.min(), lengths.max()) == (5, 121)


def test_lightgbm_example_with_query_sidecar(tmp_path):
    train = load_svmlight(shared_path("lightgbm-lambdarank-example", "rank.train"), cache_dir=tmp_path)
    test = load_svmlight(shared_path("lightgbm-lambdarank-example", "rank.test"), cache_dir=tmp_path)
    assert (train.n_queries, train.n_items) == (201, 3005)
    assert (test.n_queries, test.n_items) == (50, 768)
    assert (train.query_lengths.min(), train.query_lengths.max()) == (1, 27)
    assert np.bincount(train.labels.astype(int)).tolist() == [645, 1211, 858, 222, 69]
    assert np.bincount(test.labels.astype(int)).tolist() == [206, 256, 252, 44, 10]


def test_mslr_crlf_sample(tmp_path):
    path = shared_path("mslr-web10k-fold1-5k", "msn1.fold1.train.5k.txt")
    assert b"\r\n" in path.read_bytes()[:5000]
    ds = load_svmlight(path, cache_dir=tmp_path)
    assert (ds.n_items, ds.n_queries, ds.n_features) == (5000, 43, 136)
    assert ds.query_ids[:3].tolist() == [1, 16, 31]
    # the cut-off last query: qid 631 with 45 rows in the train sample (counted with awk; SOURCE.md
    # swaps the two files here: qid 643 with 26 rows is the test sample's last query)
    assert (ds.query_ids[-1], ds.query_lengths[-1]) == (631, 45)
    assert np.bincount(ds.labels.astype(int)).tolist() == [2792, 1458, 665, 55, 30]
    test = load_svmlight(shared_path("mslr-web10k-fold1-5k", "msn1.fold1.test.5k.txt"), cache_dir=tmp_path)
    assert test.query_ids[:3].tolist() == [13, 28, 43]
    assert (test.query_ids[-1], test.query_lengths[-1]) == (643, 26)
    assert np.bincount(test.labels.astype(int)).tolist() == [2847, 1442, 579, 98, 34]


def test_unwritable_doc_ids_are_refused(tmp_path):
    ds = RankingDataset(np.ones((2, 1)), [0, 1], [0, 2], [1], doc_ids=["ok", "two words"])
    with pytest.raises(LtrError, match="doc id 'two words' \\(row 1\\)"):
        save_svmlight(ds, tmp_path / "x.txt")
    assert not (tmp_path / "x.txt").exists()


def test_both_writers_give_the_same_values(tmp_path):
    # short decimals take the vectorised writer, other values the general one; both read back exactly
    from ltr.data.svmlight import _block_bytes_fast, _block_bytes_general

    rng = np.random.default_rng(5)
    x = np.column_stack([np.round(rng.normal(scale=50, size=300), d) for d in range(7)]).astype(np.float32)
    x[rng.random(x.shape) < 0.2] = 0.0
    x[3, 2] = -0.0
    x[4, 6] = 123456789.0
    keep = (x != 0) | np.signbit(x)
    keep[:, -1] = True
    heads, tails = [f"1 qid:{i // 10}" for i in range(300)], ["\n"] * 300
    fast = _block_bytes_fast(x, keep, heads, tails)
    assert fast is not None and b" 3:-0 " in fast and b" 7:123456792\n" in fast  # float32(123456789)
    tiny = x.copy()
    tiny[0, 0] = 1.5e-12  # needs more than 9 decimals: the whole block goes to the general writer
    assert _block_bytes_fast(tiny, keep, heads, tails) is None
    for i, text in enumerate((fast, _block_bytes_general(x, keep, heads, tails))):
        (tmp_path / f"{i}.txt").write_bytes(text)
        back = load_svmlight(tmp_path / f"{i}.txt", cache=False)
        assert np.array_equal(back.features.view(np.uint32), x.view(np.uint32))


def test_mq2008_part_round_trip(tmp_path):
    ds = load_svmlight(shared_path("letor4-mq2008", "S1.txt"), cache=False)
    save_svmlight(ds, tmp_path / "S1.txt")
    assert load_svmlight(tmp_path / "S1.txt", cache=False).equals(ds)
    line = (tmp_path / "S1.txt").read_text().splitlines()[0]
    assert line.startswith("0 qid:10002 1:0.007477 3:1 5:0.00747 11:0.471076 ") and line.endswith("# docid = GX008-86-4444840")


def test_cache_of_a_file_in_a_read_only_folder_goes_to_the_cache_dir(tmp_path, monkeypatch):
    folder = tmp_path / "share"
    folder.mkdir()
    path = write(folder, "1 qid:1 1:0.5\n")
    monkeypatch.setenv("LTR_CACHE_DIR", str(tmp_path / "user-cache"))
    folder.chmod(0o555)
    try:
        load_svmlight(path, cache_dir="beside")
        assert sorted(p.name for p in folder.iterdir()) == ["data.txt"]
        cached = list((tmp_path / "user-cache").iterdir())
        assert len(cached) == 1 and cached[0].name.startswith("data.txt.")
        assert load_svmlight(path).meta["cache"] == str(cached[0])
    finally:
        folder.chmod(0o755)
