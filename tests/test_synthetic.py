"""ltr.data.synthetic and `ltr synth`: determinism, MSLR-like shape, a teacher that a better model approaches."""

from __future__ import annotations

import json

import numpy as np
import pytest

import metrics
from ltr.cli import main
from ltr.data import load_svmlight
from ltr.data.synthetic import (
    DEFAULT,
    LABEL_SHARES,
    make_mslr_like,
    make_synthetic_splits,
)


@pytest.fixture(scope="module")
def mslr_like():
    return make_mslr_like(1000, seed=0, return_teacher=True)


def test_same_seed_same_arrays_other_seed_other_arrays():
    a = make_mslr_like(120, 20, seed=5)
    b = make_mslr_like(120, 20, seed=5)
    c = make_mslr_like(120, 20, seed=6)
    assert a.equals(b) and np.array_equal(a.user_ids, b.user_ids)
    assert a.meta["description"] == b.meta["description"]
    assert not np.array_equal(a.query_offsets, c.query_offsets)
    assert not np.array_equal(a.features[:50], c.features[:50])


@pytest.mark.xdist_group("mslr_like")  # one worker builds the module fixture (seconds), not both
def test_shape_matches_the_mslr_spec(mslr_like):
    ds, _ = mslr_like
    lengths = ds.query_lengths
    assert ds.n_features == 136 and ds.n_queries == 1000
    assert 105 <= lengths.mean() <= 135  # asked 120; the sd of a 1000-query mean is about 5
    assert lengths.min() == 1 and lengths.max() <= 1000
    assert np.percentile(lengths, 99) > 3 * np.median(lengths)  # heavy right tail
    assert set(np.unique(ds.labels).tolist()) == {0.0, 1.0, 2.0, 3.0, 4.0}
    shares = np.bincount(ds.labels.astype(int)) / ds.n_items
    assert shares[0] == shares.max() and abs(shares[0] - LABEL_SHARES[0]) < 0.05
    assert shares[4] < shares[3] < shares[2] < shares[1]
    has_relevant = np.maximum.reduceat(ds.labels, ds.query_offsets[:-1]) > 0
    assert 1 - has_relevant.mean() == pytest.approx(0.05, abs=1e-9)
    assert ds.features.dtype == np.float32 and np.all(np.isfinite(ds.features))
    json.dumps(ds.meta["description"])  # JSON-able


@pytest.mark.xdist_group("mslr_like")  # one worker builds the module fixture (seconds), not both
def test_users_have_heavy_tailed_activity(mslr_like):
    ds, _ = mslr_like
    per_user = np.bincount(ds.user_ids)
    per_user = per_user[per_user > 0]
    assert (per_user == 1).mean() > 0.4  # many newcomers with one query
    assert per_user.max() >= 20 * np.median(per_user)  # a few very active users
    assert per_user.sum() == ds.n_queries
    fixed = make_mslr_like(300, 5, mean_list_length=5, n_users=40, seed=1)
    assert fixed.user_ids.max() < 40 and np.bincount(fixed.user_ids).max() > 5 * np.median(np.bincount(fixed.user_ids))


def test_empty_share_is_tunable():
    for share in (0.0, 0.3):
        ds = make_mslr_like(200, 8, mean_list_length=15, empty_query_share=share, seed=2)
        has_relevant = np.maximum.reduceat(ds.labels, ds.query_offsets[:-1]) > 0
        assert 1 - has_relevant.mean() == pytest.approx(share, abs=1e-9)


def test_a_better_model_truly_scores_higher():
    # chance < linear least squares < least squares on log and squared-log features < the hidden teacher
    ds, teacher = make_mslr_like(400, 40, mean_list_length=40, seed=2, return_teacher=True)
    train, test = ds.subset(np.arange(250)), ds.subset(np.arange(250, 400))
    rows = ds.row_indices(np.arange(250, 400))

    def ndcg10(scores):
        return float(np.nanmean(metrics.ndcg(scores, test.labels, test.query_offsets, k=10)))

    def least_squares(transform):
        x = np.column_stack([transform(train.features.astype(np.float64)), np.ones(train.n_items)])
        coef = np.linalg.lstsq(x, train.labels, rcond=None)[0]
        return np.column_stack([transform(test.features.astype(np.float64)), np.ones(test.n_items)]) @ coef

    chance = ndcg10(np.random.default_rng(1).random(test.n_items))
    linear = ndcg10(least_squares(lambda x: x))
    richer = ndcg10(least_squares(lambda x: np.column_stack([np.log1p(x), np.log1p(x) ** 2])))
    oracle = ndcg10(teacher[rows])
    # measured: 0.418 < 0.588 < 0.648 < 0.832
    assert chance + 0.1 < linear
    assert linear + 0.03 < richer
    assert richer + 0.1 < oracle


def test_splits_partition_the_queries():
    train, valid, test = make_synthetic_splits(200, 10, mean_list_length=10, valid_share=0.2, test_share=0.1, seed=4)
    assert (train.n_queries, valid.n_queries, test.n_queries) == (140, 40, 20)
    ids = [set(p.query_ids.tolist()) for p in (train, valid, test)]
    assert not (ids[0] & ids[1] or ids[0] & ids[2] or ids[1] & ids[2]) and len(set.union(*ids)) == 200
    assert train.meta["description"]["split"]["queries"] == [140, 40, 20]
    with pytest.raises(ValueError, match="below 1"):
        make_synthetic_splits(10, valid_share=0.5, test_share=0.5)


@pytest.mark.parametrize(
    "kwargs, message",
    [({"n_queries": 0}, "n_queries"), ({"mean_list_length": 2000}, "mean_list_length"),
     ({"empty_query_share": 1.5}, "empty_query_share"), ({"n_features": 2.5}, "integer")],
)
def test_bad_parameters(kwargs, message):
    with pytest.raises(ValueError, match=message):
        make_mslr_like(**kwargs)


def test_default_is_small():
    assert DEFAULT["n_queries"] <= 500 and DEFAULT["n_features"] == 136


def test_synth_command_writes_loadable_files(tmp_path, capsys):
    out = tmp_path / "syn"
    args = ["synth", "--out", str(out), "--queries", "60", "--seed", "7", "--features", "12",
            "--mean-length", "15", "--empty-share", "0.1", "--valid-share", "0.2", "--test-share", "0.2"]
    assert main(args) == 0
    description = json.loads((out / "description.json").read_text())
    assert description["parameters"]["seed"] == 7 and description["parameters"]["n_features"] == 12
    parts = [load_svmlight(out / name, cache=False) for name in ("train.txt", "valid.txt", "test.txt")]
    assert [p.n_queries for p in parts] == [36, 12, 12]
    assert description["files"]["train.txt"] == {"queries": 36, "items": parts[0].n_items}
    # the files hold exactly the generated split (features bit for bit, users too)
    expected = make_synthetic_splits(60, 12, mean_list_length=15, empty_query_share=0.1,
                                     valid_share=0.2, test_share=0.2, seed=7)
    assert all(p.equals(e) for p, e in zip(parts, expected))
    before = (out / "train.txt").read_bytes()
    assert main(args) == 2 and "--force" in capsys.readouterr().err
    assert main(args + ["--force", "--quiet"]) == 0
    assert (out / "train.txt").read_bytes() == before


def test_synth_help_documents_every_option(capsys):
    with pytest.raises(SystemExit):
        main(["synth", "--help"])
    text = capsys.readouterr().out
    for option in ("--out", "--queries", "--seed", "--features", "--mean-length", "--max-length", "--empty-share",
                   "--label-noise", "--users", "--valid-share", "--test-share", "--by-user", "--force", "--quiet"):
        assert option in text
