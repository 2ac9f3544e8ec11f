"""The ``auto`` input transform: per-feature decisions fitted on the training split only, saved with the
model, reloaded, and safe against features the training split never varied or values it never saw."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from test_cli_train import read_run, run_scores

from ltr.cli import main
from ltr.data import RankingDataset, load_svmlight, save_svmlight
from ltr.data.auto_transform import SPREAD_LIMIT, AutoFit, fit_auto
from ltr.data.normalize import Normalizer
from ltr.train.models import load_model
from ltr.train.scorers import FeatureTransform


def columns(n: int = 400, seed: int = 0) -> np.ndarray:
    """A symmetric column, a heavy-tailed count, a constant, a signed heavy tail and a 0/1 flag."""
    rng = np.random.default_rng(seed)
    return np.column_stack([
        rng.normal(3.0, 2.0, n),
        np.floor(rng.pareto(1.2, n) * 50),
        np.full(n, 7.0),
        rng.standard_t(1.5, n) * 100,
        (rng.random(n) < 0.1).astype(float),
    ])


def test_decisions_and_statistics_match_a_hand_computation():
    x = columns()
    fit = fit_auto(x)
    assert fit.actions == ["linear", "log", "constant", "log", "linear"]
    f = np.column_stack([x[:, 0], np.log1p(x[:, 1]), x[:, 2], np.sign(x[:, 3]) * np.log1p(np.abs(x[:, 3])), x[:, 4]])
    q1, q2, q3 = np.quantile(f, [0.25, 0.5, 0.75], axis=0)
    expected_scale = (q3 - q1) / 1.349
    expected_scale[2] = 1.0  # constant: IQR and std are 0
    expected_scale[4] = f[:, 4].std()  # a rare 0/1 flag has IQR 0: its standard deviation instead
    np.testing.assert_allclose(fit.center, q2)
    np.testing.assert_allclose(fit.scale, expected_scale)
    np.testing.assert_allclose(fit.high, (f.max(axis=0) - q2) / expected_scale)
    z = fit.transform(x)
    np.testing.assert_allclose(z[:, :2], ((f - q2) / expected_scale)[:, :2])
    assert np.all(z[:, 2] == 0)


def test_the_spread_rule_is_the_documented_one():
    rng = np.random.default_rng(1)
    mild = rng.gamma(8.0, 1.0, 5000)        # spans about 8 robust standard deviations: stays linear
    strong = rng.lognormal(0.0, 1.0, 5000)  # spans about 40, its log about 8: log
    x = np.column_stack([mild, strong])
    fit = fit_auto(x)
    assert fit.actions == ["linear", "log"]
    q1, q3 = np.quantile(x, [0.25, 0.75], axis=0)
    spread = (x.max(axis=0) - x.min(axis=0)) / ((q3 - q1) / 1.349)
    assert spread[0] < SPREAD_LIMIT < spread[1]


def test_streaming_fit_equals_the_in_memory_fit():
    x = columns(1000)
    whole, blocks = fit_auto(x), fit_auto(x, block_rows=7)
    for name in ("log", "center", "scale", "low", "high", "keep"):
        np.testing.assert_array_equal(getattr(whole, name), getattr(blocks, name))


def reference_fit(x: np.ndarray, rows: np.ndarray) -> dict[str, np.ndarray]:
    """The auto rule computed on the whole matrix at once (the in-RAM formula, nothing streamed)."""
    x = np.asarray(x, dtype=np.float64)
    low, high = x.min(axis=0), x.max(axis=0)
    sample = x[rows]

    def robust(f):
        q1, median, q3 = np.quantile(f, [0.25, 0.5, 0.75], axis=0)
        scale, std = (q3 - q1) / 1.349, f.std(axis=0)
        return median, np.where(scale > 0, scale, np.where(std > 0, std, 1.0))

    signed = lambda v: np.sign(v) * np.log1p(np.abs(v))  # noqa: E731
    (rc, rs), (lc, ls) = robust(sample), robust(signed(sample))
    keep = high > low
    log = keep & ((high - low) / rs > SPREAD_LIMIT) & ((signed(high) - signed(low)) / ls < (high - low) / rs / 2)
    center, scale = np.where(log, lc, rc), np.where(log, ls, rs)
    return {"log": log, "keep": keep, "center": center, "scale": scale,
            "low": (np.where(log, signed(low), low) - center) / scale, "high": (np.where(log, signed(high), high) - center) / scale}


def wide_columns(n: int, seed: int = 0) -> np.ndarray:
    """40 float32 columns (more than one column chunk): the five kinds of ``columns`` repeated, and one
    feature constant in the first half of the rows only (a block constant, the data set not)."""
    x = np.tile(columns(n, seed), 8).astype(np.float32)
    x[: n // 2, 7] = 5.0
    return x


@pytest.mark.parametrize("sample_rows", [None, 300])
def test_fit_on_a_store_equals_the_in_ram_fit_and_the_whole_matrix_formula(tmp_path, monkeypatch, sample_rows):
    from ltr.data import auto_transform, open_store
    from ltr.data.store import convert_to_store

    if sample_rows is not None:  # more rows than the sample: the evenly spaced rows are gathered from the store
        monkeypatch.setattr(auto_transform, "SAMPLE_ROWS", sample_rows)
    x = wide_columns(2000)
    ds = RankingDataset(features=x, labels=np.zeros(len(x)), query_offsets=np.arange(0, 2001, 20), query_ids=np.arange(100))
    save_svmlight(ds, tmp_path / "d.txt")
    convert_to_store(tmp_path / "d.txt", tmp_path / "d.store", progress=False)
    store = open_store(tmp_path / "d.store").features
    expected = reference_fit(x, auto_transform.sample_rows(len(x)))
    assert expected["keep"][7] and not expected["keep"][2]
    for fit in (fit_auto(x), fit_auto(store, block_rows=97), fit_auto(np.asarray(store), block_rows=1 << 20)):
        for name, value in expected.items():
            np.testing.assert_array_equal(getattr(fit, name), value, err_msg=name)


def test_a_non_finite_value_in_a_late_block_is_refused_as_in_one_block():
    x = wide_columns(500)
    x[450, 3] = np.nan
    for rows in (7, 10_000):
        with pytest.raises(ValueError, match="non-finite"):
            fit_auto(x, block_rows=rows)


def test_fit_on_a_store_holds_the_sample_and_one_block_not_the_data(tmp_path, monkeypatch):
    """Bounded memory, measured by tracemalloc (numpy's buffers are traced): a store 40x the sample."""
    import tracemalloc

    from ltr.data import auto_transform
    from ltr.data.store import StoreWriter, open_store
    from ltr.data.blocks import Block

    monkeypatch.setattr(auto_transform, "SAMPLE_ROWS", 1000)

    class Source:
        name, feature_names, n_features = "rows", None, 40

        def describe(self, row):
            return f"row {row}"

        def error_at(self, row, message):
            return ValueError(message)

    rng = np.random.default_rng(0)
    with StoreWriter(tmp_path / "big.store", Source()) as writer:
        for start in range(0, 40_000, 4000):
            writer.append(Block(features=rng.lognormal(size=(4000, 40)).astype(np.float32), labels=np.zeros(4000),
                                query_keys=np.arange(start, start + 4000) // 40, positions=np.arange(start, start + 4000)))
        writer.close()
    store = open_store(tmp_path / "big.store").features
    data_bytes = store.nbytes  # 6.4 MB
    tracemalloc.start()
    fit = fit_auto(store, block_rows=1000)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert fit.actions.count("log") == 40
    # the sample (1000 x 40 float32) and a block (1000 x 40) with float64 temporaries: far below the data
    assert peak < 0.15 * data_bytes, (peak, data_bytes)


def test_state_round_trips_through_json_and_the_torch_module():
    x = columns()
    norm = Normalizer("auto").fit(x)
    back = Normalizer.from_dict(json.loads(json.dumps(norm.to_dict())))
    np.testing.assert_array_equal(back.transform(x), norm.transform(x))
    module = FeatureTransform.from_normalizer(norm)
    np.testing.assert_allclose(module(torch.from_numpy(x.astype(np.float32))).numpy(), norm.transform(x), atol=2e-6)
    with pytest.raises(ValueError, match="auto"):
        Normalizer.from_dict({"kind": "auto", "n_features": 5, "mean": None, "scale": None})
    with pytest.raises(ValueError, match="one value per feature"):
        AutoFit.from_dict({**norm.to_dict()["auto"], "keep": [[1]]})


@pytest.mark.parametrize("kind", FeatureTransform.KINDS)
def test_the_in_place_forward_is_the_formula_bit_for_bit_and_leaves_its_input_alone(kind):
    """forward works in place on one fresh tensor; every value, signed zeros, infinities and NaN included,
    is ``clip((f(x) - shift) / scale) * keep`` computed one operation at a time."""
    x = columns()
    t = FeatureTransform.fit(x, kind)
    batch = torch.from_numpy(np.vstack([x, [[0.0, -0.0, np.inf, -np.inf, np.nan]]]).astype(np.float32)).reshape(1, -1, 5)
    given = batch.clone()
    f = torch.where(t.log1p_mask, torch.sign(batch) * torch.log1p(torch.abs(batch)), batch) if kind != "standard" else batch
    expected = (f - t.shift) / t.scale
    if kind == "auto":
        expected = torch.minimum(torch.maximum(expected, t.low), t.high) * t.keep
    out = t(batch)
    assert torch.equal(out.view(torch.int32), expected.view(torch.int32))  # bit patterns: -0.0 and NaN too
    assert torch.equal(batch.view(torch.int32), given.view(torch.int32))


def test_unseen_values_cannot_break_a_prediction():
    x = columns()
    t = FeatureTransform.fit(x, "auto")
    row = torch.from_numpy(x[:1].astype(np.float32))
    wild = row.clone()
    wild[0, 2] = 1e30      # the feature the training split never varied
    wild[0, 1] = 3e38      # far beyond the training maximum of a log feature
    out = t(wild)
    assert torch.isfinite(out).all() and out[0, 2] == 0
    at_max = row.clone()
    at_max[0, 1] = float(x[:, 1].max())
    assert out[0, 1] == t(at_max)[0, 1]  # clipped to the most extreme training value


def write_split(path, x, seed):
    rng = np.random.default_rng(seed)
    lengths = np.full(len(x) // 8, 8)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    y = np.clip(np.round(np.log1p(x[: offsets[-1], 1]) / 2 + x[: offsets[-1], 0] / 3 + rng.normal(0, 0.3, offsets[-1])), 0, 4)
    ds = RankingDataset(x[: offsets[-1]].astype(np.float32), y, offsets, np.arange(len(lengths)) + 1000 * seed)
    save_svmlight(ds, path)
    return ds


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    d = tmp_path_factory.mktemp("auto")
    train = write_split(d / "train.txt", columns(400, 0), 0)
    valid_x = columns(160, 1)
    valid_x[:, 2] = np.random.default_rng(5).normal(size=160)  # varies outside the training split
    write_split(d / "valid.txt", valid_x * 3.0, 1)             # other statistics than the training split
    write_split(d / "test.txt", valid_x, 2)
    out = d / "run"
    assert main(["train", "--train", str(d / "train.txt"), "--valid", str(d / "valid.txt"), "--test", str(d / "test.txt"),
                 "--epochs", "2", "--quiet", "--out", str(out)]) == 0
    return d, out, train


def test_ltr_train_fits_auto_by_default_on_the_training_split_only(run):
    d, out, train = run
    model = load_model(out)
    expected = fit_auto(load_svmlight(d / "train.txt", cache=False).features)
    assert len(model.members) == 3  # ltr train's default: three seeds, each with the same transform
    for member in model.members:
        t = member.normalizer
        assert t.kind == "auto"
        np.testing.assert_allclose(t.shift.numpy(), expected.center, rtol=1e-6)
        np.testing.assert_allclose(t.scale.numpy(), expected.scale, rtol=1e-6)
        assert t.keep.tolist() == [1.0, 1.0, 0.0, 1.0, 1.0]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["model"]["normalize"] == "auto"
    assert summary["input_transform"]["counts"] == {"log": 2, "linear": 2, "constant": 1}
    report = json.loads((out / "input_transform.json").read_text())
    assert [f["action"] for f in report["features"]] == fit_auto(train.features).actions


def test_a_feature_constant_in_training_does_not_move_predictions(run, tmp_path):
    d, out, _ = run
    test = load_svmlight(d / "test.txt", cache=False)
    shifted = test.features.copy()
    shifted[:, 2] = np.random.default_rng(9).normal(0, 1e6, len(shifted))
    save_svmlight(test.with_features(shifted), tmp_path / "shifted.txt")
    for name, path in (("a", d / "test.txt"), ("b", tmp_path / "shifted.txt")):
        assert main(["predict", "--model", str(out), "--data", str(path), "--out", str(tmp_path / f"{name}.run")]) == 0
    a = run_scores(read_run(tmp_path / "a.run"), test)
    b = run_scores(read_run(tmp_path / "b.run"), test)
    assert np.all(np.isfinite(a)) and np.array_equal(a, b)


def test_query_normalize_equals_a_per_query_numpy_computation():
    from ltr.data.batching import make_batch
    from ltr.train.scorers import query_normalize

    x = columns(60)
    offsets = np.array([0, 5, 6, 20, 60])
    ds = RankingDataset(x.astype(np.float32), np.zeros(60), offsets, np.arange(4))
    batch = make_batch(ds, np.arange(4))
    for how in ("zscore", "minmax"):
        out = query_normalize(batch.features.double(), batch.mask, how).numpy()
        for q in range(4):
            rows = ds.features[offsets[q]:offsets[q + 1]].astype(np.float64)
            if how == "zscore":
                std = rows.std(axis=0)
                expected = (rows - rows.mean(axis=0)) / np.where(std > 0, std, 1.0)
            else:
                span = rows.max(axis=0) - rows.min(axis=0)
                expected = (rows - rows.min(axis=0)) / np.where(span > 0, span, 1.0)
            n = len(rows)
            np.testing.assert_allclose(out[q, :n], expected, atol=1e-9)
            assert np.all(out[q, n:] == 0)


def test_query_norm_model_scores_whole_queries_and_round_trips(run, tmp_path):
    d, _, _ = run
    out = tmp_path / "qn"
    assert main(["train", "--train", str(d / "train.txt"), "--valid", str(d / "valid.txt"), "--query-norm", "zscore",
                 "--epochs", "1", "--quiet", "--out", str(out)]) == 0
    model = load_model(out)
    assert [m.query_norm for m in model.members] == ["zscore"] * 3 and model.listwise
    assert [m["query_norm"] for m in json.loads((out / "model.json").read_text())["members"]] == ["zscore"] * 3
    test = load_svmlight(d / "test.txt", cache=False)
    assert main(["predict", "--model", str(out), "--data", str(d / "test.txt"), "--out", str(tmp_path / "t.run")]) == 0
    scores = run_scores(read_run(tmp_path / "t.run"), test)
    with torch.no_grad():  # the first query alone, as one list: the same scores
        a, b = test.query_offsets[0], test.query_offsets[1]
        alone = model(torch.from_numpy(test.features[a:b])).double().numpy()
    np.testing.assert_allclose(scores[a:b], alone, rtol=1e-5, atol=1e-6)


def test_appended_query_norm_doubles_the_first_layer_and_keeps_the_global_values():
    from ltr.train.models import build_model

    model = build_model({"type": "mlp", "n_features": 5, "hidden": [4], "query_norm": "append_zscore"})
    assert model.input_width == 10 and model.linears[0].in_features == 10 and model.listwise
    x = torch.from_numpy(columns(6).astype(np.float32))[None]           # one list of 6 items
    mask = torch.ones(1, 6, dtype=torch.bool)
    prepared = model._prepare(x, mask)
    assert torch.equal(prepared[..., :5], x)                              # no input transform here
    z = (x - x.mean(dim=1, keepdim=True)) / x.std(dim=1, unbiased=False, keepdim=True).clamp(min=1e-30)
    z[..., 2] = 0.0                                                        # constant within the list
    torch.testing.assert_close(prepared[..., 5:], z, rtol=1e-5, atol=1e-5)
    assert build_model(model.config()).config() == model.config()
