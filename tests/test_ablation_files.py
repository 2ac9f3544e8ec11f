"""``kind = "files"`` data sets of ``ltr ablate``: Parquet files and folders (with column options)
and stores, read as the commands read ``--train``; the same splits as the SVMlight files they hold."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from ltr.data import convert_to_store, make_mslr_like, save_svmlight, split_by_query, to_parquet
from ltr.base.errors import LtrError

ablation = importlib.import_module("ltr.study.ablation")


@pytest.fixture(scope="module")
def splits_on_disk(tmp_path_factory):
    folder = tmp_path_factory.mktemp("files_dataset")
    full = make_mslr_like(n_queries=30, n_features=6, mean_list_length=8, seed=4)
    parts = split_by_query(full, (0.6, 0.2, 0.2), seed=0)
    paths = {}
    for name, ds in zip(("train", "valid", "test"), parts):
        save_svmlight(ds, folder / f"{name}.txt")
        to_parquet(ds, folder / f"{name}.parquet", query_column="query", label_column="grade")
        paths[name] = folder / f"{name}.txt"
    convert_to_store(folder / "test.txt", folder / "test.store", progress=False)
    return folder, parts


def write_config(folder, dataset: str):
    path = folder / "study.toml"
    path.write_text('[ablation]\nmethods = ["ranknet"]\nseeds = 1\n[[datasets]]\n' + dataset)
    return ablation.load_config(path)


def assert_same_split(a, b):
    np.testing.assert_array_equal(a.query_offsets, b.query_offsets)
    np.testing.assert_array_equal(a.labels, b.labels)
    np.testing.assert_array_equal(np.asarray(a.features), np.asarray(b.features))


def test_parquet_with_column_options_and_a_store_give_the_svmlight_splits(splits_on_disk):
    folder, parts = splits_on_disk
    config = write_config(folder, (
        f'name = "tables"\nkind = "files"\ntrain = "{folder}/train.parquet"\nvalid = "{folder}/valid.parquet"\n'
        f'test = "{folder}/test.store"\nquery_column = "query"\nlabel_column = "grade"\n'))
    spec = config.datasets[0]
    assert spec.kind == "files"
    got = ablation.load_splits(spec, None)
    svm = write_config(folder, (f'name = "svm"\nkind = "svmlight"\ntrain = "{folder}/train.txt"\n'
                                f'valid = "{folder}/valid.txt"\ntest = "{folder}/test.txt"\n')).datasets[0]
    want = ablation.load_splits(svm, None)
    for a, b, written in zip(got, want, parts):
        assert_same_split(a, b)
        np.testing.assert_array_equal(a.labels, written.labels)


def test_missing_valid_is_split_off_train_as_for_svmlight(splits_on_disk):
    folder, _ = splits_on_disk
    common = f'train = "{folder}/train.PART"\ntest = "{folder}/test.PART"\nvalid_fraction = 0.25\nsplit_seed = 2\n'
    files = write_config(folder, 'name = "a"\nkind = "files"\nquery_column = "query"\nlabel_column = "grade"\n'
                         + common.replace("PART", "parquet")).datasets[0]
    svm = write_config(folder, 'name = "b"\nkind = "svmlight"\n' + common.replace("PART", "txt")).datasets[0]
    for a, b in zip(ablation.load_splits(files, None), ablation.load_splits(svm, None)):
        assert_same_split(a, b)


@pytest.mark.parametrize("extra, message", [
    ('query_column = 3\n', "query_column must be a column name"),
    ('feature_columns = "f1"\n', "feature_columns must be a list of column names"),
    ('sort_by_query = "yes"\n', "sort_by_query must be true or false"),
    ('label = "grade"\n', "unknown key 'label'"),
])
def test_bad_files_options_name_the_key(splits_on_disk, extra, message):
    folder, _ = splits_on_disk
    with pytest.raises(LtrError, match=message):
        write_config(folder, f'name = "t"\nkind = "files"\ntrain = "{folder}/train.parquet"\n'
                             f'test = "{folder}/test.parquet"\n' + extra)
    with pytest.raises(LtrError, match="test 'nowhere.parquet' does not exist"):
        write_config(folder, f'name = "t"\nkind = "files"\ntrain = "{folder}/train.parquet"\ntest = "nowhere.parquet"\n')
    with pytest.raises(LtrError, match="a files data set needs train and test"):
        write_config(folder, f'name = "t"\nkind = "files"\ntrain = "{folder}/train.parquet"\n')
