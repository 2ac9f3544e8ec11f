"""Parquet files, partitioned folders and data frames in and out (ltr.data.parquet)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
pd = pytest.importorskip("pandas")

from ltr.data import RankingDataset, concat_datasets, dataset_from_frame, load_parquet, to_frame, to_parquet  # noqa: E402
from ltr.data.synthetic import make_mslr_like  # noqa: E402
from ltr.base.errors import DataFormatError, LtrError  # noqa: E402


def full_dataset(names=True, seed=0):
    """Every optional array present, float32 values that are not short decimals."""
    ds = make_mslr_like(25, 6, mean_list_length=8, n_users=4, seed=seed)
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(ds.features.shape) * 1e3).astype(np.float32)
    x[0, 0], x[1, 1] = -0.0, np.float32(1e-38)  # a signed zero and a subnormal-adjacent value survive
    return dataclasses.replace(
        ds, features=x, weights=rng.random(ds.n_items), doc_ids=np.array([f"doc-{i}" for i in range(ds.n_items)]),
        feature_names=tuple(f"feat {j}" for j in range(6)) if names else None,
    )  # fmt: skip


def frame(**extra):
    data = {"qid": [3, 3, 3, 1, 1], "label": [2, 0, 1, 1, 0], "bm25": [1.5, 0.5, 2.0, 1.0, 0.0],
            "title": ["a", "b", "c", "d", "e"], "clicks": [4, 0, 1, 2, 2], "fresh": [True, False, True, True, False]}  # fmt: skip
    data.update(extra)
    return pd.DataFrame(data)


# ---- round trips ------------------------------------------------------------------------------
@pytest.mark.parametrize("names", [True, False])
def test_parquet_round_trip_is_exact(tmp_path, names):
    ds = full_dataset(names)
    to_parquet(ds, tmp_path / "d.parquet")
    back = load_parquet(tmp_path / "d.parquet")
    assert back.equals(ds)  # features bit for bit, labels, offsets, ids, users, weights, doc ids, names
    assert back.feature_names == ds.feature_names
    assert np.signbit(back.features[0, 0])
    table = pq.read_table(tmp_path / "d.parquet")
    assert table.column_names[:2] == ["qid", "label"]
    assert table.schema.field(2).type == pa.float32()
    assert table.column_names[2] == ("feat 0" if names else "f1")


def test_frame_round_trip_and_dtypes():
    ds = full_dataset()
    df = to_frame(ds)
    assert len(df) == ds.n_items and str(df["feat 3"].dtype) == "float32"
    assert df["qid"].tolist() == np.repeat(ds.query_ids, ds.query_lengths).tolist()
    back = dataset_from_frame(df, doc_id_column="doc_id", weight_column="weight", user_column="user")
    assert back.equals(ds)


def test_default_features_are_the_numeric_columns_in_order():
    ds = dataset_from_frame(frame(), doc_id_column="title")
    # strings (title) and booleans (fresh) are not features unless named
    assert ds.feature_names == ("bm25", "clicks")
    assert ds.query_ids.tolist() == [3, 1] and ds.query_offsets.tolist() == [0, 3, 5]
    assert ds.features.tolist() == [[1.5, 4], [0.5, 0], [2.0, 1], [1.0, 2], [0.0, 2]]
    assert ds.labels.dtype == np.float64 and ds.doc_ids.tolist() == list("abcde")


def test_explicit_features_keep_the_given_order_and_allow_booleans():
    ds = dataset_from_frame(frame(), feature_columns=["fresh", "bm25"], weight_column="clicks")
    assert ds.feature_names == ("fresh", "bm25")
    assert ds.features[:, 0].tolist() == [1, 0, 1, 1, 0] and ds.weights.tolist() == [4, 0, 1, 2, 2]


def test_arrow_tables_and_dicts_are_frames_too():
    table = pa.table({"q": ["x", "x", "y"], "y": [1.0, 0.0, 1.0], "f": pa.array([1, 2, 3], pa.int16())})
    ds = dataset_from_frame(table, query_column="q", label_column="y")
    assert ds.query_ids.tolist() == ["x", "y"] and ds.features[:, 0].tolist() == [1, 2, 3]
    same = dataset_from_frame({"q": ["x", "x", "y"], "y": [1.0, 0.0, 1.0], "f": [1, 2, 3]}, query_column="q", label_column="y")
    assert same.equals(ds)


def test_partitioned_folder_reads_files_in_path_order(tmp_path):
    parts = {"day=1": (10, 11), "day=2": (12,), "day=3": (13, 14)}
    expected_q = []
    for folder, qids in parts.items():
        (tmp_path / folder).mkdir()
        q = np.repeat(qids, 2)
        expected_q += list(qids)
        pq.write_table(pa.table({"qid": q, "label": np.arange(len(q), dtype=float), "x": q * 1.5}), tmp_path / folder / "part-0.parquet")
    (tmp_path / "_SUCCESS").write_text("")  # Spark's marker files are ignored
    ds = load_parquet(tmp_path)
    assert ds.query_ids.tolist() == expected_q
    assert ds.feature_names == ("x",)  # the partition key 'day' is not a feature
    assert ds.features[:, 0].tolist() == (np.repeat(expected_q, 2) * 1.5).tolist()


def test_a_role_may_live_in_the_folder_names(tmp_path):
    for q in (7, 8):
        (tmp_path / f"qid={q}").mkdir()
        pq.write_table(pa.table({"label": [1.0, 0.0, 2.0], "x": [q, q + 0.5, q + 0.25]}), tmp_path / f"qid={q}" / "a.parquet")
    ds = load_parquet(tmp_path)
    assert ds.query_ids.tolist() == [7, 8] and ds.query_offsets.tolist() == [0, 3, 6]
    assert ds.feature_names == ("x",) and ds.features[:, 0].tolist() == [7, 7.5, 7.25, 8, 8.5, 8.25]


def test_partitioned_folder_error_names_the_file(tmp_path):
    for i, values in enumerate(([1.0, 2.0], [3.0, np.nan])):
        (tmp_path / f"part={i}").mkdir()
        pq.write_table(pa.table({"qid": [i, i], "label": [0.0, 1.0], "x": values}), tmp_path / f"part={i}" / "a.parquet")
    with pytest.raises(DataFormatError, match=r"row 3 \(file part=1/a.parquet, its row 1\): column 'x' holds nan"):
        load_parquet(tmp_path)


def test_feature_names_survive_subset_and_concat():
    ds = full_dataset()
    assert ds.subset([2, 0]).feature_names == ds.feature_names
    assert concat_datasets([ds, ds.subset([1])]).feature_names == ds.feature_names
    assert concat_datasets([ds, dataclasses.replace(ds, feature_names=None)]).feature_names is None
    other = dataclasses.replace(ds, feature_names=("z",) + ds.feature_names[1:])
    with pytest.raises(ValueError, match="feature 0 is named 'feat 0' in one and 'z' in another"):
        concat_datasets([ds, other])
    with pytest.raises(ValueError, match="distinct"):
        dataclasses.replace(ds, feature_names=("a",) * 6)


# ---- refusals ---------------------------------------------------------------------------------
def test_missing_columns_are_named_with_the_columns_there_are():
    with pytest.raises(LtrError, match=r"no query column 'query' \(set query_column= or --query-column\); its columns are: qid, label, bm25"):
        dataset_from_frame(frame(), query_column="query")
    with pytest.raises(LtrError, match="no feature columns 'nope', 'gone'"):
        dataset_from_frame(frame(), feature_columns=["bm25", "nope", "gone"])
    with pytest.raises(LtrError, match="no document id column 'docno'"):
        dataset_from_frame(frame(), doc_id_column="docno")


@pytest.mark.parametrize(
    "column, values, message",
    [
        ("bm25", [1.5, 0.5, np.nan, 1.0, 0.0], r"row 2: column 'bm25' is missing a value \(null, or NaN in a pandas frame\)"),
        ("clicks", pd.array([4, 0, 1, None, 2], dtype="Int64"), r"row 3: column 'clicks' is missing a value"),
        ("bm25", [1.5, -np.inf, 2.0, 1.0, 0.0], "row 1: column 'bm25' holds -inf"),
        ("bm25", [1.5, 0.5, 2.0, 1.0, 1e300], "row 4: column 'bm25' holds 1e\\+300, beyond the float32 range"),
        ("label", [2, 0, np.inf, 1, 0], "row 2: column 'label' holds inf"),
        ("qid", [3.0, 3.0, 3.5, 1.0, 1.0], "row 2: column 'qid' holds 3.5; ids must be integers or strings"),
    ],
)
def test_bad_values_name_column_and_row(column, values, message):
    with pytest.raises(DataFormatError, match=message):
        dataset_from_frame(frame(**{column: values}))


def test_nan_in_an_arrow_table_is_refused_as_nan():
    table = pa.table({"qid": [1, 1], "label": [0.0, 1.0], "x": pa.array([0.5, np.nan], from_pandas=False)})
    with pytest.raises(DataFormatError, match="row 1: column 'x' holds nan; values must be finite"):
        dataset_from_frame(table)


def test_non_numeric_label_or_feature_is_refused():
    with pytest.raises(LtrError, match="the label column 'title' has type (large_)?string; it must hold numbers"):
        dataset_from_frame(frame(), label_column="title")
    with pytest.raises(LtrError, match="feature column 'title' has type (large_)?string"):
        dataset_from_frame(frame(), feature_columns=["title"])


def test_non_contiguous_query_is_refused_unless_sorting_is_asked_for(tmp_path):
    df = frame(qid=[3, 3, 1, 3, 1])
    with pytest.raises(DataFormatError, match="row 3: rows of query 3 are not contiguous: the query starts at row 0"):
        dataset_from_frame(df)
    df.to_parquet(tmp_path / "shuffled.parquet")
    with pytest.raises(DataFormatError, match="shuffled.parquet: row 3: rows of query 3 are not contiguous"):
        load_parquet(tmp_path / "shuffled.parquet")
    ds = load_parquet(tmp_path / "shuffled.parquet", sort_by_query=True, doc_id_column="title")
    # a stable sort by query id: query 1 first, each query's rows in their file order
    assert ds.query_ids.tolist() == [1, 3] and ds.doc_ids.tolist() == ["c", "e", "a", "b", "d"]
    assert ds.features[:, 0].tolist() == [2.0, 0.0, 1.5, 0.5, 1.0]


def test_user_must_be_constant_within_a_query():
    with pytest.raises(DataFormatError, match="row 1: user 8 differs from user 7 of the query's first row"):
        dataset_from_frame(frame(u=[7, 8, 7, 1, 1]), user_column="u")


def test_not_a_parquet_file(tmp_path):
    bad = tmp_path / "x.parquet"
    bad.write_text("1 qid:1 1:0.5\n")
    with pytest.raises(LtrError, match="not a readable Parquet file"):
        load_parquet(bad)


def test_labels_follow_the_readers_rules():
    ds = dataset_from_frame(frame(label=[2, -1, 1, -2, 0]))
    assert ds.labels.tolist() == [2, 0, 1, 0, 0] and ds.meta["negative_labels"] == 2  # judged non-relevant
    with pytest.raises(DataFormatError, match="row 2: column 'label': label 2000 is too large"):
        dataset_from_frame(frame(label=[2, 0, 2000, 1, 0]))


def test_the_0_1_methods_still_work_with_a_deprecation_warning(tmp_path):
    ds = make_mslr_like(n_queries=4, n_features=3, mean_list_length=4, seed=0)
    with pytest.warns(DeprecationWarning, match="ltr.data.parquet.to_frame"):
        df = ds.to_frame()
    with pytest.warns(DeprecationWarning, match="ltr.data.parquet.dataset_from_frame"):
        back = RankingDataset.from_frame(df, user_column="user")
    with pytest.warns(DeprecationWarning, match="ltr.data.parquet.to_parquet"):
        ds.to_parquet(tmp_path / "d.parquet")
    # the same data as the new functions give (a frame names its columns, so the features get names)
    assert back.equals(dataset_from_frame(to_frame(ds), user_column="user")) and back.feature_names == ("f1", "f2", "f3")
    assert load_parquet(tmp_path / "d.parquet").equals(load_parquet_of(ds, tmp_path / "e.parquet"))


def load_parquet_of(ds, path):
    to_parquet(ds, path)
    return load_parquet(path)
