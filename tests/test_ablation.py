"""ltr ablate: grid enumeration, resumption, parallel determinism, the report's statistics and content.

Most tests use ``fake_cell``, a cheap stand-in with the same record layout as ``ltr.study.ablation.run_cell``
and a planted effect (lambdarank better than ranknet by 0.08 on every query, mse equal in
expectation); the last ones train real tiny cells end to end.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from ltr.base.errors import LtrError
from ltr.study import ablation
from ltr.study.ablation import (
    AblationConfig,
    Cell,
    DatasetSpec,
    cell_path,
    enumerate_cells,
    run_ablation,
)

# Only light imports at module level: the parallel test's worker processes import this module to
# find fake_cell. scipy and the report module are imported where they are used.

ROOT = Path(__file__).resolve().parents[1]
N_QUERIES = 30
EFFECT = {"ranknet": 0.0, "lambdarank": 0.08, "mse": 0.0, "lightgbm": -0.02}


def fake_cell(cell: Cell, config: AblationConfig) -> dict:
    """Per-query values = query difficulty + method effect + seed noise; query 0 has no relevant item."""
    def rng_for(*key):
        h = hashlib.sha256(repr(key).encode()).digest()
        return np.random.default_rng(int.from_bytes(h[:8], "little"))

    difficulty = rng_for(cell.dataset, cell.fold).uniform(0.2, 0.8, N_QUERIES)
    names, per_query, mean = {}, {}, {}
    for j, short in enumerate(config.metrics):
        stamped = f"{short}[gain=exp2,fake=yes]"
        noise = rng_for(cell.dataset, cell.fold, cell.method, cell.seed, short).normal(0, 0.05, N_QUERIES)
        v = np.clip(difficulty + EFFECT[cell.method] + noise + 0.01 * j, 0, 1)
        v[0] = np.nan
        names[short], per_query[stamped], mean[stamped] = stamped, v, float(np.nanmean(v))
    first = 0 if cell.fold is None else 1000 * cell.fold
    return {"format": ablation.CELL_FORMAT, "dataset": cell.dataset, "method": cell.method, "seed": cell.seed,
            "fold": cell.fold, "metric_names": names, "mean": mean, "per_query": per_query,
            "query_ids": [str(first + i) for i in range(N_QUERIES)], "train_info": {"best_epoch": 1},
            "wall_time_s": 0.0}


def small_config(**kw) -> AblationConfig:
    base = dict(datasets=[DatasetSpec("toy", "synthetic", {"n_queries": 10}),
                          DatasetSpec("letor", "folds", {"path": "nowhere", "folds": [1, 2]})],
                methods=["ranknet", "lambdarank", "mse", "lightgbm"], seeds=[0, 1, 2],
                metrics=["ndcg@10", "map"], n_resamples=2000)
    base.update(kw)
    return AblationConfig(**base)


def write_report(*args, **kwargs):
    from ltr.study.report import write_report as real

    return real(*args, **kwargs)


def table_of(out: Path) -> str:
    return (out / "results.md").read_text()


# ----------------------------------------------------------------------------- grid and resumption
def test_enumerate_cells_and_paths(tmp_path):
    cfg = small_config()
    cells = enumerate_cells(cfg)
    assert len(cells) == 3 * (1 + 2) * 4  # seeds x (toy + 2 folds) x methods
    assert len(set(cells)) == len(cells)
    assert cells[0] == Cell("toy", "ranknet", 0, None)
    assert cell_path(tmp_path, Cell("letor", "lambdarank", 2, 1)) == tmp_path / "cells/letor/lambdarank/seed2-fold1.json"


def test_resume_reruns_only_missing_and_damaged_cells_and_gives_the_same_table(tmp_path):
    cfg = small_config()
    first = run_ablation(cfg, tmp_path, workers=1, progress=False, cell_fn=fake_cell)
    assert (first.n_cells, first.n_run, first.n_reused) == (36, 36, 0)
    write_report(first.records, cfg, tmp_path, cells={}, tensorboard=False)
    table1 = table_of(tmp_path)

    cell_path(tmp_path, Cell("toy", "mse", 1)).unlink()
    cell_path(tmp_path, Cell("letor", "ranknet", 2, 2)).write_text('{"format": "ltr-abl')  # killed mid-write
    again = run_ablation(cfg, tmp_path, workers=1, progress=False, cell_fn=fake_cell)
    assert again.n_run == 2 and again.n_reused == 34
    assert sorted(again.ran) == sorted(["toy / mse / seed 1", "letor / ranknet / seed 2 fold 2"])
    write_report(again.records, cfg, tmp_path, cells={}, tensorboard=False)
    assert table_of(tmp_path) == table1

    nothing = run_ablation(cfg, tmp_path, workers=1, progress=False, cell_fn=fake_cell)
    assert nothing.n_run == 0 and nothing.n_reused == 36


def test_interrupted_run_resumes_to_the_uninterrupted_result(tmp_path):
    cfg = small_config()
    full = tmp_path / "full"
    ref = run_ablation(cfg, full, workers=1, progress=False, cell_fn=fake_cell)
    write_report(ref.records, cfg, full, tensorboard=False)

    part = tmp_path / "part"
    seen = []

    def kill_after_five(cell, rec):
        seen.append(cell)
        if len(seen) == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_ablation(cfg, part, workers=1, progress=False, cell_fn=fake_cell, on_cell=kill_after_five)
    assert len(list((part / "cells").rglob("*.json"))) == 5
    resumed = run_ablation(cfg, part, workers=1, progress=False, cell_fn=fake_cell)
    assert resumed.n_run == 31 and resumed.n_reused == 5
    write_report(resumed.records, cfg, part, tensorboard=False)
    assert table_of(part) == table_of(full)
    assert json.loads((part / "results.json").read_text())["datasets"] == \
        json.loads((full / "results.json").read_text())["datasets"]


def test_changed_settings_make_cells_stale(tmp_path):
    cfg = small_config(datasets=[DatasetSpec("toy", "synthetic", {"n_queries": 10})])
    run_ablation(cfg, tmp_path, workers=1, progress=False, cell_fn=fake_cell)
    changed = ablation.config_copy(cfg, train={"epochs": 3})  # neural cells only
    res = run_ablation(changed, tmp_path, workers=1, progress=False, cell_fn=fake_cell)
    assert res.n_stale == res.n_run == 3 * 3 and res.n_reused == 3  # lightgbm cells reused
    assert all("lightgbm" not in k for k in res.ran)


# ----------------------------------------------------------------------------- statistics and report
@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    cfg = small_config()
    res = run_ablation(cfg, out, workers=1, progress=False, cell_fn=fake_cell)
    summary = write_report(res.records, cfg, out, cells={"total": 36, "run": 36, "reused": 0})
    return out, cfg, res.records, summary


def _seed_arrays(records, dataset, method, stamped):
    by_seed = {}
    for r in sorted((r for r in records if r["dataset"] == dataset and r["method"] == method),
                    key=lambda r: (r["seed"], -1 if r["fold"] is None else r["fold"])):
        vals = np.array([np.nan if v is None else v for v in r["per_query"][stamped]])
        by_seed.setdefault(r["seed"], []).append(vals)
    return np.stack([np.concatenate(v) for _, v in sorted(by_seed.items())])


def test_intervals_and_paired_tests_match_scipy(report):
    from scipy import stats

    _, cfg, records, summary = report
    for ds in summary["datasets"]:
        for short in cfg.metrics:
            stamped = summary["metrics"][short]
            ref = _seed_arrays(records, ds["name"], "ranknet", stamped)
            for row in ds["methods"]:
                arr = _seed_arrays(records, ds["name"], row["method"], stamped)
                per_seed = np.nanmean(arr, axis=1)
                lo, hi = stats.t.interval(0.95, len(per_seed) - 1, loc=per_seed.mean(), scale=stats.sem(per_seed))
                got = row["metrics"][short]
                assert got["mean"] == pytest.approx(per_seed.mean(), abs=1e-12)
                assert (got["low"], got["high"]) == (pytest.approx(lo, abs=1e-12), pytest.approx(hi, abs=1e-12))
                assert got["low"] <= got["mean"] <= got["high"]
                if row["method"] == "ranknet":
                    continue
                comp = next(c for c in ds["comparisons"] if c["method"] == row["method"] and c["metric"] == short)
                a, b = arr.mean(axis=0), ref.mean(axis=0)
                expected = stats.ttest_rel(a, b, nan_policy="omit")  # the first query of each part is NaN
                assert comp["t_p"] == pytest.approx(expected.pvalue, rel=1e-9)
                assert comp["n_queries"] == ds["n_test_queries"] - len(ds["folds"] or [0])


def test_planted_effects_are_found_and_holm_is_consistent(report):
    _, cfg, _, summary = report
    for ds in summary["datasets"]:
        by = {(c["method"], c["metric"]): c for c in ds["comparisons"]}
        for short in cfg.metrics:
            lam = by[("lambdarank", short)]
            assert lam["mean_difference"] == pytest.approx(0.08, abs=0.02)
            assert lam["t_p_holm"] < 1e-6 and lam["bootstrap_p_holm"] <= 3 / 2001
            assert by[("mse", short)]["t_p"] > 0.01  # no planted effect
            family = [by[(m, short)] for m in ("lambdarank", "mse", "lightgbm")]
            for key in ("t_p", "bootstrap_p"):
                raw = np.array([c[key] for c in family])
                adj = np.array([c[f"{key}_holm"] for c in family])
                assert np.all(adj >= raw - 1e-15) and np.all(adj <= 1.0)
                order = np.argsort(raw, kind="stable")
                assert np.all(np.diff(adj[order]) >= 0)  # monotone in the raw order


def test_results_files_schema_and_table_rows(report):
    out, cfg, _, summary = report
    data = json.loads((out / "results.json").read_text())  # strict JSON: no NaN tokens
    assert "NaN" not in (out / "results.json").read_text()
    assert data["format"] == "ltr-ablation-results-1"
    assert data["reference"] == "ranknet" and data["confidence"] == 0.95
    assert set(data["metrics"]) == set(cfg.metrics) and data["metrics"]["map"] == "map[gain=exp2,fake=yes]"
    assert [d["name"] for d in data["datasets"]] == ["toy", "letor"]
    letor = data["datasets"][1]
    assert letor["folds"] == [1, 2] and letor["n_test_queries"] == 2 * N_QUERIES
    assert [m["method"] for m in letor["methods"]] == cfg.methods
    m0 = letor["methods"][0]["metrics"]["ndcg@10"]
    assert set(m0) >= {"name", "mean", "low", "high", "per_seed", "n_seeds", "query_interval"}
    assert len(m0["per_seed"]) == 3
    c0 = letor["comparisons"][0]
    assert set(c0) >= {"method", "reference", "metric", "mean_difference", "t_p", "t_p_holm", "bootstrap_p",
                       "bootstrap_p_holm", "n_queries", "wins", "losses", "ties"}
    assert len(letor["comparisons"]) == 3 * len(cfg.metrics)

    md = table_of(out)
    assert "`ndcg@10[gain=exp2,fake=yes]`" in md
    for ds in ("toy", "letor"):
        assert f"## {ds} " in md
    rows = [line for line in md.splitlines() if line.startswith("| ")]
    # per data set: header + 4 method rows, header + 3 comparison rows
    assert len(rows) == 2 * (1 + 4 + 1 + 3)
    lam = next(line for line in rows if line.startswith("| lambdarank | +"))
    assert lam.count("*") >= 2  # significant on both metrics
    assert (out / "means.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    runs = sorted(p.parent.relative_to(out / "tensorboard").as_posix() for p in (out / "tensorboard").rglob("events.*"))
    assert len(runs) == 36 and "letor/lambdarank/seed0-fold1" in runs


def test_report_refuses_mismatched_queries(report):
    from ltr.study.report import summarize

    _, cfg, records, _ = report
    bad = [dict(r) for r in records]
    victim = next(r for r in bad if r["method"] == "mse" and r["dataset"] == "toy")
    victim["query_ids"] = list(reversed(victim["query_ids"]))
    with pytest.raises(LtrError, match="other queries"):
        summarize(bad, cfg)


def test_report_warns_when_cells_come_from_different_code(report):
    from ltr.study.report import render_markdown, summarize

    _, cfg, records, summary = report
    assert "Warning" not in render_markdown(summary)
    mixed = [dict(r, code="aaaa" if i % 2 else "bbbb") for i, r in enumerate(records)]
    s = summarize(mixed, cfg)
    assert s["code_versions"] == ["aaaa", "bbbb"]
    assert "computed by 2 different versions of the code (aaaa, bbbb)" in render_markdown(s)
    assert s["datasets"] == summarize(records, cfg)["datasets"]  # the numbers do not change


# ----------------------------------------------------------------------------- configuration
def test_shipped_config_loads():
    from conftest import shared_path

    shared_path("letor4-mq2008")  # the study names the shared MQ2008 folds, which loading checks
    study = ablation.load_config(ROOT / "experiments" / "ablate_pairwise_vs_lambda.toml")
    assert {d.kind for d in study.datasets} == {"synthetic", "folds"}
    assert study.reference == "ranknet" and len(study.seeds) >= 5
    assert set(ablation.ALL_METHODS) <= set(study.methods)
    mq = next(d for d in study.datasets if d.kind == "folds")
    assert mq.folds() == [1, 2, 3, 4, 5]


def test_config_errors_name_the_problem(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[ablation]\nmethods = ["ranknet", "lambdarank@x"]\n[[datasets]]\nname = "s"\nkind = "synthetic"\n')
    with pytest.raises(LtrError, match="unknown method 'lambdarank@x'"):
        ablation.load_config(bad)
    bad.write_text('[ablation]\nseed = 3\n[[datasets]]\nname = "s"\nkind = "synthetic"\n')
    with pytest.raises(LtrError, match="unknown key 'seed'"):
        ablation.load_config(bad)
    bad.write_text('[ablation]\nmethods = ["lambdarank"]\n[[datasets]]\nname = "s"\nkind = "synthetic"\n')
    with pytest.raises(LtrError, match="reference method 'ranknet'"):
        ablation.load_config(bad)
    bad.write_text('[train]\nseed = 1\n[[datasets]]\nname = "s"\nkind = "synthetic"\n')
    with pytest.raises(LtrError, match="set by the ablation"):
        ablation.load_config(bad)


def test_fold_rotation_matches_the_letor_readme():
    # Fold1 train S1,S2,S3 vali S4 test S5 ... Fold5 train S5,S1,S2 vali S3 test S4
    assert [ablation.fold_parts(f) for f in range(1, 6)] == [
        ([1, 2, 3], 4, 5), ([2, 3, 4], 5, 1), ([3, 4, 5], 1, 2), ([4, 5, 1], 2, 3), ([5, 1, 2], 3, 4)]
    # every part is the test part exactly once
    assert sorted(ablation.fold_parts(f)[2] for f in range(1, 6)) == [1, 2, 3, 4, 5]


# ----------------------------------------------------------------------------- real cells, end to end
TINY = dict(n_queries=60, n_features=12, mean_list_length=12, seed=3)


def tiny_config(**kw) -> AblationConfig:
    base = dict(datasets=[DatasetSpec("tiny", "synthetic", dict(TINY))],
                methods=["ranknet", "lambdarank@5", "lightgbm"], seeds=[0, 1], n_resamples=500,
                train={"epochs": 2, "batch_size": 16, "patience": 2},
                model={"type": "mlp", "hidden": [8], "normalize": "standard"},
                lightgbm={"num_leaves": 7, "min_data_in_leaf": 5, "bagging_fraction": 0.8, "bagging_freq": 1},
                gbdt={"num_boost_round": 10, "early_stopping_rounds": 5})
    base.update(kw)
    return AblationConfig(**base)


def test_real_cell_is_deterministic_and_scored_by_metrics_evaluate():
    import metrics
    from ltr.data.synthetic import make_mslr_like

    cfg = tiny_config()
    rec = ablation.run_cell(Cell("tiny", "ranknet", 0), cfg)
    again = ablation.run_cell(Cell("tiny", "ranknet", 0), cfg)
    assert set(rec["metric_names"]) == set(cfg.metrics)
    stamped = rec["metric_names"]["ndcg@10"]
    assert stamped.startswith("ndcg@10[") and "gain=exp2" in stamped and "empty=skip" in stamped
    np.testing.assert_array_equal(rec["per_query"][stamped], again["per_query"][stamped])
    v = rec["per_query"][stamped]
    assert rec["mean"][stamped] == pytest.approx(np.nanmean(v))
    # the test split is the same for every cell: 20% of the generator's queries, split seed 0
    full = make_mslr_like(**TINY)
    test = ablation.load_splits(cfg.datasets[0], None)[2]
    assert len(v) == test.n_queries == round(0.2 * full.n_queries)
    assert rec["query_ids"] == [str(q) for q in test.query_ids.tolist()]
    # queries with no relevant item are NaN under empty=skip
    empty = np.add.reduceat(test.labels >= 1, test.query_offsets[:-1]) == 0
    assert np.array_equal(np.isnan(v), empty)
    assert 1 <= rec["train_info"]["best_epoch"] <= 2
    assert rec["code"] == ablation.code_version() and len(rec["code"]) == 12
    lgb = ablation.run_cell(Cell("tiny", "lightgbm", 1), cfg)
    assert lgb["metric_names"] == rec["metric_names"] and lgb["train_info"]["best_iteration"] >= 1
    # LightGBM's test scores judged by metrics.evaluate directly give the same per-query values
    from ltr.gbdt.lightgbm import predict_booster, train_lightgbm

    train, valid, test = ablation.load_splits(cfg.datasets[0], None)
    booster, _ = train_lightgbm(train, valid, {"num_threads": 1, **cfg.lightgbm}, seed=1, **cfg.gbdt)
    direct = metrics.evaluate(predict_booster(booster, test.features), test.labels, test.query_offsets, ["ndcg@10"])
    np.testing.assert_array_equal(direct.per_query[stamped], lgb["per_query"][stamped])


@pytest.mark.slow
def test_real_cells_are_the_same_in_worker_processes(tmp_path):
    # one neural and one LightGBM cell, one per worker process: each kind must not depend on the process
    # (spawned workers cost a fresh import of torch and LightGBM each, the bulk of this test's time)
    cfg = tiny_config(methods=["ranknet", "lightgbm"], seeds=[1])
    serial = run_ablation(cfg, tmp_path / "serial", workers=1, progress=False)
    parallel = run_ablation(cfg, tmp_path / "parallel", workers=2, progress=False)
    assert parallel.n_run == serial.n_run == 2
    # everything but the wall times and the code hash (taken per process: an edit of the source tree
    # between the two runs changes it, not the numbers)
    def strip(records):
        return [{k: ({i: w for i, w in v.items() if i != "timing"} if k == "train_info" else v)
                 for k, v in r.items() if k not in ("wall_time_s", "code")} for r in records]

    assert strip(serial.records) == strip(parallel.records)


def without_wall_times(text: str) -> str:
    """A results.md text with the last column (s/cell) of its means tables removed."""
    out, in_table = [], False
    for line in text.splitlines():
        in_table = line.startswith("|") and (in_table or line.rstrip().endswith("| s/cell |"))
        out.append(line.rstrip().rsplit("|", 2)[0] + "|" if in_table else line)
    return "\n".join(out)


def test_cli_end_to_end_on_a_tiny_config_and_resume(tmp_path, capsys):
    from ltr.cli import main

    cfg_file = tmp_path / "tiny.toml"
    cfg_file.write_text(
        '[ablation]\nmethods = ["ranknet", "lambdarank@5", "lightgbm"]\nseeds = 2\nn_resamples = 500\n'
        '[train]\nepochs = 2\nbatch_size = 16\npatience = 2\n'
        '[model]\ntype = "mlp"\nhidden = [8]\nnormalize = "standard"\n'
        '[lightgbm]\nnum_leaves = 7\nmin_data_in_leaf = 5\n'
        '[gbdt]\nnum_boost_round = 10\nearly_stopping_rounds = 5\n'
        '[[datasets]]\nname = "tiny"\nkind = "synthetic"\nn_queries = 60\nn_features = 12\n'
        'mean_list_length = 12\nseed = 3\n')
    out = tmp_path / "out"
    args = ["ablate", "--config", str(cfg_file), "--out", str(out), "--workers", "1", "--no-progress", "--no-tensorboard"]
    assert main(args) == 0
    first = capsys.readouterr()
    assert "| ranknet | " in first.out and "| lambdarank@5 | " in first.out and "6 run (0 stale), 0 reused" in first.err
    data = json.loads((out / "results.json").read_text())
    assert data["cells"]["total"] == 6 and data["datasets"][0]["name"] == "tiny"
    assert len(list((out / "cells" / "tiny").rglob("seed*.json"))) == 6
    (out / "cells" / "tiny" / "lightgbm" / "seed1.json").unlink()
    assert main(args) == 0
    second = capsys.readouterr()
    assert "1 run (0 stale), 5 reused" in second.err
    # the same table, but for the wall time per cell (a measurement, not a result: the re-run cell's differs)
    assert (without_wall_times(second.out.split("Cells:")[1].split("\n", 1)[1])
            == without_wall_times(first.out.split("Cells:")[1].split("\n", 1)[1]))
    assert main(["ablate", "--config", str(cfg_file), "--out", str(tmp_path / "none"), "--report-only"]) == 2
    assert "missing or stale" in capsys.readouterr().err


def test_svmlight_data_sets_with_and_without_a_valid_file(tmp_path, monkeypatch):
    monkeypatch.setenv("LTR_CACHE_DIR", str(tmp_path / "cache"))  # the reader's binary caches go here
    from ltr.data import save_svmlight, split_by_query
    from ltr.data.synthetic import make_mslr_like

    full = make_mslr_like(**TINY)
    train, valid, test = split_by_query(full, (0.6, 0.2, 0.2), seed=0)
    for name, part in (("train", train), ("valid", valid), ("test", test)):
        save_svmlight(part, tmp_path / f"{name}.txt")
    three = DatasetSpec("three", "svmlight", {"train": str(tmp_path / "train.txt"), "valid": str(tmp_path / "valid.txt"),
                                              "test": str(tmp_path / "test.txt")})
    tr, va, te = ablation.load_splits(three, None)
    assert (tr.n_queries, va.n_queries, te.n_queries) == (train.n_queries, valid.n_queries, test.n_queries)
    assert np.array_equal(te.labels, test.labels) and np.array_equal(te.features, test.features)
    two = DatasetSpec("two", "svmlight", {"train": str(tmp_path / "train.txt"), "test": str(tmp_path / "test.txt"),
                                          "valid_fraction": 0.25})
    tr2, va2, te2 = ablation.load_splits(two, None)  # valid split off the training file, by query
    assert va2.n_queries == round(0.25 * train.n_queries) and tr2.n_queries + va2.n_queries == train.n_queries
    assert not set(va2.query_ids.tolist()) & set(tr2.query_ids.tolist())
    assert te2.n_queries == test.n_queries
    missing = DatasetSpec("gone", "svmlight", {"train": str(tmp_path / "nope.txt"), "test": str(tmp_path / "test.txt")})
    with pytest.raises(LtrError, match="not found"):
        ablation.load_splits(missing, None)


def test_mq2008_fold_cell_tests_on_the_right_part(tmp_path, monkeypatch):
    monkeypatch.setenv("LTR_CACHE_DIR", str(tmp_path / "cache"))
    from conftest import shared_path

    from ltr.data import load_svmlight

    folder = shared_path("letor4-mq2008")
    shared_path("letor4-mq2008", "S5.txt")
    cfg = tiny_config(datasets=[DatasetSpec("mq", "folds", {"path": str(folder), "folds": [2]})], methods=["ranknet", "lightgbm"])
    train, valid, test = ablation.load_splits(cfg.datasets[0], 2)  # Fold2: train S2-S4, valid S5, test S1
    s1 = load_svmlight(folder / "S1.txt", cache=False)
    s5 = load_svmlight(folder / "S5.txt", cache=False)
    assert np.array_equal(test.query_ids, s1.query_ids) and np.array_equal(valid.labels, s5.labels)
    assert train.n_queries == 157 * 3 and train.n_features == 46
    rec = ablation.run_cell(Cell("mq", "lightgbm", 0, 2), cfg)
    assert len(rec["query_ids"]) == 157 == len(rec["per_query"][rec["metric_names"]["map"]])


def test_code_version_hashes_the_result_code_and_ignores_the_report(tmp_path):
    import hashlib
    from pathlib import Path

    # the project's own sources: not the hash of nothing (the folders are found from ltr/study/)
    assert ablation.code_version() != hashlib.sha256(b"").hexdigest()[:12]
    assert ablation.code_version() == ablation.source_hash(Path(ablation.__file__).resolve().parents[2])
    for rel in ("metrics/ndcg.py", "losses/pairwise.py", "ltr/train/trainer.py", "ltr/commands/train.py",
                "ltr/study/report.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x = 1\n")
    before = ablation.source_hash(tmp_path)
    (tmp_path / "ltr/commands/train.py").write_text("x = 2\n")  # the command line: same results
    (tmp_path / "ltr/study/report.py").write_text("x = 2\n")  # the report: same cells
    assert ablation.source_hash(tmp_path) == before
    for rel in ("metrics/ndcg.py", "losses/pairwise.py", "ltr/train/trainer.py"):
        (tmp_path / rel).write_text("x = 3\n")
        after = ablation.source_hash(tmp_path)
        assert after != before
        before = after
