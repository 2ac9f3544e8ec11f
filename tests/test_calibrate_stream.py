"""``ltr calibrate --stream``: binned sufficient statistics against the in-memory computations."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ltr.calibrate.stream_fit import fit_binned
from ltr.calibrate.stream_report import binned_auc, binned_report
from ltr.calibrate.stream_stats import BinnedStats, hash_split, stream_table
from ltr.base.errors import LtrError
from metrics.calibration import field_calibration, field_ece, field_rce, normalized_entropy, pcoc


def _table(n=40_000, seed=0, weights=True):
    """Scores (probabilities) from a pooled logit, two fields with their own effects, weights."""
    rng = np.random.default_rng(seed)
    adv = rng.integers(0, 12, n)
    dev = rng.choice(np.array(["phone", "tablet", "desktop"]), n, p=[0.6, 0.1, 0.3])
    x = rng.normal(-3.0, 1.0, n)
    eff = rng.normal(0, 0.4, 12)[adv] + np.where(dev == "tablet", 0.5, 0.0)
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-(0.9 * x + eff)))).astype(np.float64)
    s = 1 / (1 + np.exp(-x))
    w = rng.uniform(0.5, 2.0, n) if weights else None
    return s, y, {"adv": adv, "dev": dev}, w


def _stats(s, y, fields, w, batch=None, **kw):
    st = BinnedStats(list(fields), weighted=w is not None, **kw)
    step = batch or s.shape[0]
    for i in range(0, s.shape[0], step):
        st.add_batch(s[i:i + step], y[i:i + step], [v[i:i + step] for v in fields.values()],
                     None if w is None else w[i:i + step])
    return st.canonical()


def test_hash_split_does_not_depend_on_the_batches():
    whole = hash_split(0, 10_000, 0.3, seed=7)
    parts = np.concatenate([hash_split(i, 1000, 0.3, seed=7) for i in range(0, 10_000, 1000)])
    assert np.array_equal(whole, parts)
    assert abs(whole.mean() - 0.3) < 0.02
    assert not np.array_equal(whole, hash_split(0, 10_000, 0.3, seed=8))


def test_binned_auc_equals_the_row_auc_when_each_row_is_an_entry():
    from metrics.classification import auc, grouped_auc

    rng = np.random.default_rng(1)
    s = np.round(rng.normal(size=3000), 1)  # ties across rows
    y = (rng.uniform(size=3000) < 0.3).astype(float)
    g = rng.integers(0, 7, 3000)
    assert binned_auc(s, y, 1 - y) == pytest.approx(auc(y, s), abs=1e-14)
    assert binned_auc(s, y, 1 - y, g) == pytest.approx(grouped_auc(y, s, g).value, abs=1e-14)


def test_exact_before_metrics_equal_the_in_memory_ones():
    s, y, fields, w = _table()
    st = _stats(s, y, fields, w)
    rep = binned_report(st, fit_binned(st, "platt"), field_method=False, min_count=500)
    ev = ~hash_split(0, s.shape[0], 0.5, 0)
    b = rep["before"]
    assert b["normalized_entropy"] == pytest.approx(normalized_entropy(y[ev], s[ev], sample_weight=w[ev]), rel=1e-12)
    assert b["pcoc"] == pytest.approx(pcoc(y[ev], s[ev], sample_weight=w[ev]), rel=1e-12)
    for name, v in fields.items():
        assert b["fields"][name]["f_rce"] == pytest.approx(field_rce(y[ev], s[ev], v[ev], sample_weight=w[ev]), rel=1e-12)
        assert b["fields"][name]["field_ece"] == pytest.approx(field_ece(y[ev], s[ev], v[ev], sample_weight=w[ev]), rel=1e-12)
    mem = field_calibration(y[ev], s[ev], {k: v[ev].astype(str) for k, v in fields.items()}, sample_weight=w[ev],
                            min_count=500, n_boot=20)
    got = {(r["field"], r["value"]): r for r in b["values"]}
    assert len(got) == len(mem.rows) == 15
    for r in mem.rows:
        g = got[(r["field"], r["value"])]
        for key in ("count", "clicks", "predicted", "pcoc"):
            assert g[key] == pytest.approx(r[key], rel=1e-12)
    assert sum(r["count"] for r in b["values"] if r["field"] == "adv") == pytest.approx(w[ev].sum(), rel=1e-12)


@pytest.mark.parametrize("method, tol", [("platt", 1e-3), ("beta", 5e-3), ("spline", 5e-3), ("field-aware", 5e-3)])
def test_streamed_calibrator_is_close_to_the_in_memory_one(method, tol):
    from ltr.calibrate.factory import make_calibrator
    from ltr.calibrate.field_calibrators import make_global_map

    s, y, fields, _ = _table(n=60_000, seed=3, weights=False)
    st = _stats(s, y, fields, None)
    fit = hash_split(0, s.shape[0], 0.5, 0)
    cal = fit_binned(st, method)
    if method == "field-aware":
        ref = make_calibrator(method, fields=list(fields)).fit(s[fit], y[fit], {k: v[fit] for k, v in fields.items()})
        a, b = cal.predict(s, fields), ref.predict(s, fields)
    elif method == "platt":
        ref = make_calibrator("platt").fit(s[fit], y[fit])
        a, b = cal.predict(s), ref.predict(s)
    else:
        ref = make_global_map(method, s).fit(s[fit], y[fit])
        a, b = cal.predict(s), ref.predict(s)
    assert np.max(np.abs(a - b)) < tol  # the bins (width 0.05 in the logit) are the only difference
    assert np.max(np.abs(a - b)) > 0


def test_streamed_isotonic_is_close_on_average():
    from ltr.calibrate.factory import make_calibrator

    s, y, fields, _ = _table(n=60_000, seed=4, weights=False)
    st = _stats(s, y, fields, None)
    fit = hash_split(0, s.shape[0], 0.5, 0)
    a = fit_binned(st, "isotonic").predict(s)
    b = make_calibrator("isotonic").fit(s[fit], y[fit]).predict(s)
    assert np.mean(np.abs(a - b)) < 2e-3  # PAV on bins vs rows: equal away from the steps' edges


def test_after_metrics_are_close_to_the_calibrator_applied_to_the_rows():
    s, y, fields, w = _table(n=60_000, seed=5)
    st = _stats(s, y, fields, w)
    cal = fit_binned(st, "field-aware")
    rep = binned_report(st, cal, field_method=True)
    ev = ~hash_split(0, s.shape[0], 0.5, 0)
    p = cal.predict(s[ev], {k: v[ev] for k, v in fields.items()})
    a = rep["after"]
    assert a["normalized_entropy"] == pytest.approx(normalized_entropy(y[ev], p, sample_weight=w[ev]), rel=1e-4)
    assert a["pcoc"] == pytest.approx(pcoc(y[ev], p, sample_weight=w[ev]), rel=1e-3)
    assert a["fields"]["adv"]["f_rce"] == pytest.approx(field_rce(y[ev], p, fields["adv"][ev], sample_weight=w[ev]), abs=2e-3)
    assert rep["order"]["within_cells"] == {"fields": ["adv", "dev"], "counted_over": "entries", "reversed": 0,
                                            "ties_created": 0, "ties_broken": 0}


def _parquet_folder(tmp_path, s, y, fields, w):
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = tmp_path / "t"
    folder.mkdir()
    n = s.shape[0]
    for k, (a, b) in enumerate(((0, n // 3), (n // 3, n))):
        cols = {"score": s[a:b], "label": y[a:b], "w": w[a:b], **{f: v[a:b] for f, v in fields.items()}}
        pq.write_table(pa.table(cols), folder / f"part-{k}.parquet", row_group_size=5000)
    return folder


def test_batch_size_does_not_change_the_result(tmp_path):
    s, y, fields, w = _table(n=20_000, seed=6)
    folder = _parquet_folder(tmp_path, s, y, fields, w)
    kw = dict(field_columns=["adv", "dev"], weight_column="w")
    small, big = stream_table(folder, batch_size=1000, **kw), stream_table(folder, batch_size=10**6, **kw)
    assert np.array_equal(small.eval.keys, big.eval.keys) and small.vocab == big.vocab
    np.testing.assert_allclose(small.eval.sums, big.eval.sums, rtol=1e-12, atol=1e-12)
    ca, cb = fit_binned(small, "field-aware"), fit_binned(big, "field-aware")
    np.testing.assert_allclose(ca.predict(s, fields), cb.predict(s, fields), rtol=1e-9)
    ra, rb = (binned_report(x, c, field_method=True) for x, c in ((small, ca), (big, cb)))
    for side in ("before", "after"):
        assert ra[side]["normalized_entropy"] == pytest.approx(rb[side]["normalized_entropy"], rel=1e-12)
        assert ra[side]["mean_f_rce"] == pytest.approx(rb[side]["mean_f_rce"], rel=1e-9)
    # the stream reads the rows in the table's order: the same split as the rows in memory
    direct = _stats(s, y, fields, w)
    np.testing.assert_allclose(direct.eval.sums, big.eval.sums, rtol=1e-12, atol=1e-12)


def test_cli_stream_writes_the_report_and_one_tensorboard_image_per_field(tmp_path):
    from ltr.cli import main

    s, y, fields, w = _table(n=20_000, seed=7)
    folder = _parquet_folder(tmp_path, s, y, fields, w)
    out, tb = tmp_path / "out", tmp_path / "tb"
    rc = main(["calibrate", "--table", str(folder), "--stream", "--field-columns", "adv,dev", "--weight-column", "w",
               "--method", "field-aware", "--out", str(out), "--batch-size", "3000", "--tensorboard", str(tb)])
    assert rc == 0
    rep = json.loads((out / "report.json").read_text())
    assert rep["inputs"]["rows"] == 20_000
    assert rep["inputs"]["fit_rows"] + rep["inputs"]["eval_rows"] == 20_000
    assert rep["field_report"]["order"]["within_cells"]["reversed"] == 0
    assert "F-RCE adv" in (out / "report.txt").read_text()
    assert _images(tb) == {"calibration/field-aware/reliability_adv", "calibration/field-aware/reliability_dev"}


def _images(log_dir) -> set:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(log_dir), size_guidance={"images": 0})
    acc.Reload()
    return set(acc.Tags()["images"])


def test_cli_in_memory_tensorboard_has_one_image_per_field(tmp_path):
    import pandas as pd

    from ltr.cli import main

    s, y, fields, _ = _table(n=6000, seed=8, weights=False)
    path = tmp_path / "t.csv"
    pd.DataFrame({"score": s, "label": y, **fields}).to_csv(path, index=False)
    tb = tmp_path / "tb"
    assert main(["calibrate", "--table", str(path), "--field-columns", "adv,dev", "--method", "platt",
                 "--out", str(tmp_path / "o"), "--tensorboard", str(tb)]) == 0
    assert _images(tb) == {"calibration/platt/reliability", "calibration/platt/reliability_adv",
                           "calibration/platt/reliability_dev"}


def test_stream_refuses_what_it_cannot_do(tmp_path, capsys):
    import pandas as pd

    from ltr.cli import main

    s, y, fields, _ = _table(n=3000, seed=9, weights=False)
    path = tmp_path / "t.csv"
    pd.DataFrame({"score": np.r_[s[:-1], 2.5], "label": y, **fields}).to_csv(path, index=False)
    assert main(["calibrate", "--table", str(path), "--stream", "--field-columns", "adv", "--method", "multicalibration",
                 "--out", str(tmp_path / "o")]) != 0
    assert "--method multicalibration needs the rows in memory" in capsys.readouterr().err
    with pytest.raises(LtrError, match=r"row 3000 holds 2.5.*--score-scale logit"):
        stream_table(path, batch_size=1000)


def test_weights_of_one_give_the_unweighted_report():
    s, y, fields, _ = _table(n=20_000, seed=10, weights=False)
    plain = _stats(s, y, fields, None)
    ones = _stats(s, y, fields, np.ones_like(s))
    assert plain.fit.sums.shape[1] == 7 and ones.fit.sums.shape[1] == 12
    a = binned_report(plain, fit_binned(plain, "beta"), field_method=False)
    b = binned_report(ones, fit_binned(ones, "beta"), field_method=False)
    for side in ("before", "after"):
        assert a[side]["normalized_entropy"] == pytest.approx(b[side]["normalized_entropy"], rel=1e-12)
        assert [r["pcoc_high"] for r in a[side]["values"]] == pytest.approx([r["pcoc_high"] for r in b[side]["values"]], rel=1e-12)


def test_no_fields_and_logit_scores():
    s, y, _, _ = _table(n=20_000, seed=11, weights=False)
    logit = np.log(s) - np.log1p(-s)
    st = BinnedStats([], probabilities=False)
    st.add_batch(logit, y, [])
    rep = binned_report(st, fit_binned(st, "platt"), field_method=False)
    ev = ~hash_split(0, s.shape[0], 0.5, 0)
    assert rep["before"]["normalized_entropy"] == pytest.approx(normalized_entropy(y[ev], s[ev]), rel=1e-12)
    assert "fields" not in rep["before"] and rep["order"]["within_field_auc"] == {}
    with pytest.raises(LtrError, match="field-aware calibration needs --field-columns"):
        fit_binned(st, "field-aware")
