"""ltr.data.normalize: fitted on the training split only, JSON round trip, the log1p variants."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ltr.data import RankingDataset
from ltr.data.normalize import KINDS, Normalizer


def test_standard_uses_training_statistics_only():
    rng = np.random.default_rng(0)
    train = rng.normal(3.0, 2.0, size=(500, 4))
    train[:, 3] = 7.0  # constant on the training split
    other = rng.normal(10.0, 5.0, size=(50, 4))
    norm = Normalizer("standard").fit(train)
    z = norm.fit(train).transform(train)
    assert np.allclose(z[:, :3].mean(0), 0, atol=1e-5) and np.allclose(z[:, :3].std(0), 1, atol=1e-5)
    assert np.all(z[:, 3] == 0)
    out = norm.transform(other)
    expected = (other - train.mean(0)) / np.where(train.std(0) > 0, train.std(0), 1.0)
    assert out.dtype == np.float32 and np.allclose(out, expected, rtol=1e-6, atol=1e-5)


def test_log1p_variants_by_hand():
    x = np.array([[0.0, -3.0, 99.0], [np.e - 1, 3.0, 0.0]])
    assert np.allclose(Normalizer("log1p").fit_transform(x), [[0, -np.log(4), np.log(100)], [1, np.log(4), 0]])
    both = Normalizer("log1p_standard").fit_transform(x)
    assert np.allclose(both, [[-1, -1, 1], [1, 1, -1]], atol=1e-6)
    assert np.array_equal(Normalizer("none").fit_transform(x), x.astype(np.float32))


def test_dataset_in_dataset_out_and_json_round_trip():
    ds = RankingDataset(np.arange(12.0).reshape(6, 2) ** 2, np.zeros(6), [0, 2, 6], [1, 2])
    for kind in KINDS:
        norm = Normalizer(kind).fit(ds)
        out = norm.transform(ds)
        assert isinstance(out, RankingDataset) and out.query_offsets.tolist() == [0, 2, 6]
        again = Normalizer.from_dict(json.loads(json.dumps(norm.to_dict())))
        assert np.array_equal(again.transform(ds.features), out.features)


def test_errors():
    with pytest.raises(ValueError, match="unknown normalisation"):
        Normalizer("minmax")
    with pytest.raises(RuntimeError, match="before fit"):
        Normalizer().transform(np.zeros((2, 2)))
    norm = Normalizer().fit(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="expected 2 features"):
        norm.transform(np.zeros((3, 5)))
    with pytest.raises(ValueError, match="non-finite"):
        Normalizer().fit(np.array([[np.nan]]))
