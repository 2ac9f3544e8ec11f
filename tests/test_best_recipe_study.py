"""The statistics of experiments/best_recipe_study.py (no training: hand-made per-query values)."""

import math

import numpy as np
import pytest
from experiment_scripts import load_experiment


@pytest.fixture(scope="module")
def study():
    return load_experiment("best_recipe_study")


def test_holm_against_a_hand_computation(study):
    # sorted: 0.005, 0.01, 0.03, 0.04 -> 4*0.005=0.02, 3*0.01=0.03, 2*0.03=0.06, 1*0.04=0.04 -> running max 0.06
    adjusted = study.holm([0.01, 0.04, 0.03, 0.005])
    np.testing.assert_allclose(adjusted, [0.03, 0.06, 0.06, 0.02], rtol=0, atol=1e-15)
    np.testing.assert_allclose(study.holm([0.5, 0.6]), [1.0, 1.0])  # capped at 1, then the running max
    np.testing.assert_allclose(study.holm([0.2]), [0.2])


def test_bootstrap_interval_is_deterministic_given_a_seed_and_about_the_normal_one(study):
    x = np.random.default_rng(7).normal(0.5, 1.0, size=400)
    a = study.bootstrap_interval(x, seed=3)
    assert a == study.bootstrap_interval(x, seed=3)
    assert a != study.bootstrap_interval(x, seed=4)
    half = 1.96 * x.std(ddof=1) / math.sqrt(x.size)  # the normal interval the bootstrap approximates
    assert a[0] < x.mean() < a[1]
    assert abs((a[1] - a[0]) / 2 - half) < 0.1 * half
    assert study.bootstrap_interval(np.full(10, 0.25), seed=0) == (0.25, 0.25)


def test_seed_interval_by_hand(study):
    lo, hi = study.seed_interval([1.0, 2.0, 3.0])  # mean 2, sd 1, t_{0.975, 2} = 4.302653
    half = 4.302652729911275 / math.sqrt(3)
    assert lo == pytest.approx(2 - half, abs=1e-9) and hi == pytest.approx(2 + half, abs=1e-9)
    assert all(math.isnan(v) for v in study.seed_interval([0.7]))


def test_paired_tests_by_hand(study):
    from scipy import stats

    r = study.paired_tests([0.5, 0.7, 0.6], [0.4, 0.5, 0.55])  # d = 0.1, 0.2, 0.05
    d_sd = math.sqrt(((0.1 - 0.35 / 3) ** 2 + (0.2 - 0.35 / 3) ** 2 + (0.05 - 0.35 / 3) ** 2) / 2)
    t = (0.35 / 3) / (d_sd / math.sqrt(3))
    assert r["diff"] == pytest.approx(0.35 / 3, abs=1e-12)
    assert r["t_p"] == pytest.approx(2 * stats.t.sf(t, 2), rel=1e-9)
    # five equal differences: only the all-plus and all-minus sign vectors reach |mean| = 1: p = 2 / 32
    ones = study.paired_tests(np.ones(5), np.zeros(5), n_perm=20000, seed=1)
    assert abs(ones["rand_p"] - 2 / 32) < 0.006


def _record(candidate, fold, seed, values, valid, **extra):
    return {"candidate": candidate, "dataset": "d", "fold": fold, "seed": seed, "per_query": values, "valid": valid,
            "test": float(np.nanmean([np.nan if v is None else v for v in values])), "wall_s": 1.0, **extra}


def test_summarise_picks_and_pairs_the_blend_with_its_members(study):
    rng = np.random.default_rng(0)
    base = rng.uniform(0.3, 0.8, size=(2, 30))  # two folds of 30 test queries
    records = []
    for fold in range(2):
        for seed in range(2):
            shift = {"lightgbm": 0.0, "xgboost": -0.05, "catboost_yetirank": 0.02, "catboost_qsm200": 0.01,
                     "neural": 0.01, "neural_ens3": 0.03, "blend": 0.04}
            for name, s in shift.items():
                values = list(base[fold] + s + 0.001 * seed)
                values[0] = None  # a query without a relevant item: skipped by every candidate
                extra = {"members": ["lightgbm", "neural_ens3"], "member_seeds": [0, seed]} if name == "blend" else {}
                rec_seed = 0 if name in study.ENGINES else seed  # the engines ran with one seed
                if name in study.ENGINES and seed:
                    continue
                valid = 0.6 if name == "neural_ens3" else 0.5 + s  # validation prefers another recipe than test
                records.append(_record(name, fold, rec_seed, values, valid=valid, **extra))
    s = study.summarise(records, "d", folds=2)
    assert s["best_engine"] == "catboost_yetirank" and s["best_recipe"] == "blend"
    assert s["recipe_by_valid"] == "neural_ens3"
    assert s["rows"]["lightgbm"]["seeds"] == 1 and s["rows"]["blend"]["seeds"] == 2
    assert s["rows"]["blend"]["queries"] == 58
    assert s["rows"]["neural_ens3"]["mean"] == pytest.approx(base[:, 1:].mean() + 0.03 + 0.0005, abs=1e-12)
    diffs = {(c["a"], c["b"]): c["diff"] for c in s["comparisons"]}
    assert diffs[("blend", "catboost_yetirank")] == pytest.approx(0.0205, abs=1e-12)
    assert diffs[("blend", "gbdt_member")] == pytest.approx(0.0405, abs=1e-12)  # lightgbm, seed 0 only
    assert diffs[("blend", "neural_member")] == pytest.approx(0.01, abs=1e-12)
    holm_t = study.holm([c["t_p"] for c in s["comparisons"]])
    assert [c["holm_t_p"] for c in s["comparisons"]] == list(holm_t)


def test_weight_rules_are_compared_in_a_family_of_their_own(study):
    rng = np.random.default_rng(1)
    base = rng.uniform(0.3, 0.8, size=40)
    shift = {"lightgbm": 0.0, "neural": 0.01, "blend": 0.02, "blend_all": 0.0, "blend_all_equal": 0.02,
             "blend_cv": 0.03, "blend_all_cv": 0.01}
    records = []
    for seed in range(2):
        for name, s in shift.items():
            if name == "lightgbm" and seed:
                continue
            noise = rng.normal(0, 0.01, size=40)  # per query: the paired tests see a spread
            extra = {"members": ["lightgbm", "neural"], "member_seeds": [0, seed]} if name.startswith("blend") else {}
            records.append(_record(name, 0, 0 if name == "lightgbm" else seed, list(base + s + noise), valid=0.5, **extra))
    s = study.summarise(records, "d", folds=1)
    rules = {(c["a"], c["b"]): c for c in s["rule_comparisons"]}
    assert list(rules) == list(study.RULE_PAIRS[:3])  # the pairs whose both sides ran
    rows = s["rows"]
    for (a, b), c in rules.items():
        assert c["diff"] == pytest.approx(rows[a]["mean"] - rows[b]["mean"], abs=1e-12)
    assert rules[("blend_cv", "blend")]["diff"] == pytest.approx(0.01, abs=0.006)
    assert rules[("blend_all_cv", "blend_all_equal")]["diff"] == pytest.approx(-0.01, abs=0.006)
    # Holm within the three rule comparisons only; the main family is unchanged by them
    assert [c["holm_t_p"] for c in s["rule_comparisons"]] == list(study.holm([c["t_p"] for c in s["rule_comparisons"]]))
    assert {(c["a"], c["b"]) for c in s["comparisons"]}.isdisjoint(rules)
    assert [c["holm_t_p"] for c in s["comparisons"]] == list(study.holm([c["t_p"] for c in s["comparisons"]]))
    md = study.report(records, {"d": [None]}, [])
    table = md.split("| weight rules (Holm over these) |")[1]
    assert f"| blend_cv − blend | {rules[('blend_cv', 'blend')]['diff']:+.4f} |" in table


def test_report_puts_each_family_under_its_own_header(study):
    rng = np.random.default_rng(2)
    base = rng.uniform(0.3, 0.8, size=30)
    names = ("lightgbm", "neural", "blend", "blend_cv", "blend_all", "blend_all_cv", "neural_tuned", "blend_tuned_cv",
             "blend_all_tuned_cv")
    records = [_record(name, 0, 0, list(base + rng.normal(0, 0.01, size=30)), valid=0.5,
                       **({"members": ["lightgbm", "neural"], "member_seeds": [0, 0]} if name.startswith("blend") else {}))
               for name in names]
    s = study.summarise(records, "d", folds=1)
    md = study.report(records, {"d": [None]}, [])
    assert md.count("| weight rules (Holm over these) |") == 1 and md.count("| tuned − untuned (Holm over these) |") == 1
    main, rules_part = md.split("| weight rules (Holm over these) |")
    rules_part, tuned_part = rules_part.split("| tuned − untuned (Holm over these) |")
    for part, key in ((main, "comparisons"), (rules_part, "rule_comparisons"), (tuned_part, "tuned_comparisons")):
        assert s[key]  # each family ran
        for c in s[key]:  # each row under its own family's header, with that family's Holm p
            assert f"| {c['a']} − {c['b']} | {c['diff']:+.4f} |" in part
            assert f"| {c['holm_t_p']:.2g} | {c['rand_p']:.2g} | {c['holm_rand_p']:.2g} |" in part


def test_best_engine_is_the_pooled_test_mean_over_folds_and_waits_for_every_cell(study, tmp_path):
    # fold 0 holds 40 test queries, fold 1 holds 4: the mean of the two fold means favours xgboost
    # ((0.50 + 0.90) / 2 = 0.70 > (0.60 + 0.60) / 2), the pooled mean lightgbm ((40 * 0.6 + 4 * 0.6) / 44 = 0.6
    # > (40 * 0.5 + 4 * 0.9) / 44 = 0.536), and summarise's best engine is the pooled one
    store = study.Store(tmp_path / "results.json")
    cands = {n: study.candidates([])[n] for n in ("lightgbm", "xgboost", "neural")}
    values = {("lightgbm", 0): 0.6, ("lightgbm", 1): 0.6, ("xgboost", 0): 0.5, ("xgboost", 1): 0.9}
    assert study.best_engine_of(store, cands, "d", 2, 1) is None
    for (name, fold), v in values.items():
        store.put(_record(name, fold, 0, [v] * (40 if fold == 0 else 4), valid=0.5))
        complete = len(store.records) == len(values)
        assert (study.best_engine_of(store, cands, "d", 2, 1) is not None) == complete
    assert study.best_engine_of(store, cands, "d", 2, 1) == "lightgbm"
    assert study.best_engine_of(store, cands, "d", 2, 2) is None  # a second engine seed not run yet
    for fold in range(2):
        store.put(_record("neural", fold, 0, [0.55] * (40 if fold == 0 else 4), valid=0.5))
    assert study.summarise(store.records, "d", folds=2)["best_engine"] == "lightgbm"


def test_the_best_engine_blend_is_compared_with_both_members(study):
    rng = np.random.default_rng(3)
    base = rng.uniform(0.3, 0.8, size=30)
    shift = {"lightgbm": 0.0, "catboost_qsm200": 0.02, "neural": 0.01, "blend": 0.015, "blend_best_cv": 0.03,
             "blend_best_equal": 0.025}
    members = {"blend": ["lightgbm", "neural"], "blend_best_cv": ["catboost_qsm200", "neural"],
               "blend_best_equal": ["catboost_qsm200", "neural"]}
    records = [_record(n, 0, 0, list(base + d + rng.normal(0, 0.005, size=30)), valid=0.5,
                       **({"members": members[n], "member_seeds": [0, 0]} if n in members else {}))
               for n, d in shift.items()]
    s = study.summarise(records, "d", folds=1)
    diffs = {(c["a"], c["b"]): c["diff"] for c in s["comparisons"]}
    assert s["best_engine"] == "catboost_qsm200" and s["best_recipe"] == "blend_best_cv"
    assert diffs[("blend_best_cv", "catboost_qsm200")] == pytest.approx(0.01, abs=0.004)
    assert diffs[("blend_best_cv", "neural_member")] == pytest.approx(0.02, abs=0.004)  # blend's neural member
    md = study.report(records, {"d": [None]}, [])
    assert (f"- d: blend_best_cv − its GBDT member catboost_qsm200 {diffs[('blend_best_cv', 'catboost_qsm200')]:+.4f}, "
            f"− its neural member {diffs[('blend_best_cv', 'neural_member')]:+.4f}: blend_best_cv ≥ each met") in md
    rules = {(c["a"], c["b"]): c["diff"] for c in s["rule_comparisons"]}  # cv against equal weights: a weight rule
    assert rules == {("blend_best_cv", "blend_best_equal"): pytest.approx(0.005, abs=0.004)}


# ---------------------------------------------------------------- the tuned neural candidate

def test_tune_space_passes_the_toolkits_checks_and_takes_the_cells_seed(study, tmp_path):
    from ltr.study.tune import load_tune_config

    base = load_tune_config(study.TUNE_SPACE)
    assert base.kind == "neural" and base.metric == "ndcg@10"
    assert base.fixed["model"]["ensemble"] == 1  # one MLP a trial; the final run trains three
    assert base.fixed["loss"]["name"] == "softmax" and base.space["loss"]["name"]["choices"] == ["softmax", "lambdarank"]
    assert base.space["model"]["hidden"]["choices"] == [[64], [128, 64], [256, 128]]  # around the default [128, 64]
    cell = tmp_path / "space.toml"
    cell.write_text(study.tune_space_text(7))
    copy = load_tune_config(cell)
    assert copy.seed == 7 and copy.fixed["train"]["seed"] == 7 and base.seed == 0
    assert copy.space == base.space
    assert {t: {k: v for k, v in c.items() if k != "seed"} for t, c in copy.fixed.items()} == \
        {t: {k: v for k, v in c.items() if k != "seed"} for t, c in base.fixed.items()}


def test_tuned_argvs_and_candidate(study, tmp_path):
    files = (tmp_path / "tr.txt", tmp_path / "va.txt", tmp_path / "te.txt")
    out = tmp_path / "cell" / "neural_tuned-seed5"
    tune, final, space, folder = study.tuned_argvs(9, files, 5, out)
    assert space == tmp_path / "cell" / "neural_tuned-seed5-space.toml"
    assert folder == tmp_path / "cell" / "neural_tuned-seed5-tune"
    assert tune == ["tune", "--config", str(space), "--trials", "9", "--out", str(folder),
                    "--train", str(files[0]), "--valid", str(files[1])]
    assert final == ["train", "--config", str(folder / "best.toml"), "--train", str(files[0]), "--valid", str(files[1]),
                     "--test", str(files[2]), "--out", str(out), "--quiet", "--ensemble", "3", "--seed", "5"]
    assert study.candidates([], 9)["neural_tuned"] == ("tune", ["--trials", "9"])
    assert study.candidates(["--lr", "0.01"])["neural"] == ("train", ["--lr", "0.01"])  # --neural-options: not the tuned one
    assert "neural_tuned" not in study.candidates([])  # opt-in: the commands published before it run as they did
    assert "neural_tuned" in study.RECIPES and set(study.TUNED_BLENDS) == {"blend_tuned_cv", "blend_all_tuned_cv"}


def test_one_cell_with_the_tuned_candidate_end_to_end(study, tmp_path, monkeypatch):
    """A tiny cell (60 synthetic queries, 2 trials of 2 epochs): the tuned run, its blends' members, the seed
    in the study's best.toml, three MLPs in the final run; then the other candidates again without it."""
    import tomllib

    from ltr.cli import main
    from ltr.data import load_svmlight

    assert main(["synth", "--out", str(tmp_path / "data"), "--queries", "60", "--mean-length", "15", "--seed", "0",
                 "--quiet"]) == 0
    files = tuple(tmp_path / "data" / f"{s}.txt" for s in ("train", "valid", "test"))
    space = tomllib.loads(study.TUNE_SPACE.read_text())
    space["train"].update(epochs=2, patience=None)
    from ltr.train.config import toml_text

    small = tmp_path / "space.toml"
    small.write_text(toml_text(space))
    monkeypatch.setattr(study, "TUNE_SPACE", small)
    cands = {k: v for k, v in study.candidates(["--epochs", "2", "--ensemble", "1"], 2).items()
             if k in ("lightgbm", "neural", "neural_tuned")}
    # 30 trees, all kept: early stopping (patience 50) grows 97 here to keep 47; with 30 rounds it would keep 1
    cands["lightgbm"] = ("gbdt", [*cands["lightgbm"][1], "--num-boost-round", "30", "--early-stopping-rounds", "0"])
    test = load_svmlight(files[2], cache=False)
    store = study.Store(tmp_path / "out" / "results.json")
    study.run_cell(store, cands, "tiny", 0, files, 3, 0, tmp_path / "out", test)
    rec = store.get("neural_tuned", "tiny", 0, 3)
    assert rec["argv"] == ["tune", "--trials", "2"] and sum(rec["trial_counts"].values()) == 2
    assert rec["final_config"]["model"]["ensemble"] == 3 and rec["final_config"]["train"]["seed"] == 3
    best = tomllib.loads(rec["best_config"])
    assert best["model"]["ensemble"] == 1 and best["train"]["seed"] == 3 and best["train"]["epochs"] == 2
    assert best["loss"]["name"] in ("softmax", "lambdarank")
    assert len(rec["per_query"]) == test.n_queries
    assert store.get("blend_tuned_cv", "tiny", 0, 3)["members"] == ["lightgbm", "neural_tuned"]
    assert store.get("blend_all_tuned_cv", "tiny", 0, 3)["members"] == ["lightgbm", "neural_tuned"]
    assert store.get("blend_cv", "tiny", 0, 3)["members"] == ["lightgbm", "neural"]
    cell = tmp_path / "out" / "runs" / "tiny" / "fold0"
    assert not (cell / "neural_tuned-seed3").exists() and (cell / "neural_tuned-seed3-tune" / "best.toml").exists()
    # the same cell without neural_tuned: the other candidates' numbers do not depend on it
    alone = study.Store(tmp_path / "out2" / "results.json")
    study.run_cell(alone, {k: v for k, v in cands.items() if k != "neural_tuned"}, "tiny", 0, files, 3, 0,
                   tmp_path / "out2", test)
    assert {r["candidate"] for r in alone.records} == {"lightgbm", "neural", *study.BLENDS}
    for r in alone.records:
        assert r["per_query"] == store.get(r["candidate"], "tiny", 0, 3 if r["candidate"] != "lightgbm" else 0)["per_query"]
    # the best-engine blend, once the engines are known: the neural run is trained again (its test values
    # checked against the record), blended with the best engine, and its folder removed again
    assert study.best_engine_of(alone, cands, "tiny", 1, 1) == "lightgbm"
    study.run_cell(alone, {k: v for k, v in cands.items() if k != "neural_tuned"}, "tiny", 0, files, 3, 0,
                   tmp_path / "out2", test, best_engine="lightgbm")
    for name in study.BEST_BLENDS:
        best = alone.get(name, "tiny", 0, 3)
        assert best["members"] == ["lightgbm", "neural"] and best["member_seeds"] == [0, 3]
        assert len(best["per_query"]) == test.n_queries
    assert alone.get("blend_best_equal", "tiny", 0, 3)["weights"] == [0.5, 0.5]
    assert not (tmp_path / "out2" / "runs" / "tiny" / "fold0" / "neural-seed3").exists()
