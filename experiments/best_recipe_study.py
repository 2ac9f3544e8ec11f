"""Does the toolkit's best recipe beat the best of the three GBDT engines? Issue 20, parts 4 and 5.

Per data set (the data of ``experiments/defaults_study.py``: its :func:`prepare` is imported, not
copied), per seed and fold, as a user runs them (``ltr.cli.main`` in this process):

- the engines: ``ltr gbdt --engine lightgbm`` (lambdarank), ``--engine xgboost`` (rank:ndcg),
  ``--engine catboost`` (YetiRank) and ``--engine catboost --objective QuerySoftMax
  --early-stopping-rounds 200``;
- the neural scorer: ``ltr train`` with ``--neural-options`` (default: none, i.e. whatever
  ``ltr train`` does by default), and the same with ``--ensemble 3``;
- the blends (:data:`BLENDS`): ``blend``, ``ltr blend`` of the cell's best engine and best neural run,
  each picked by validation NDCG@10, its weights searched on the validation file; ``blend_all``, every
  engine and the best neural run, weights searched; ``blend_all_equal``, the same members with
  ``--weights equal`` (1/5 each, nothing fitted); ``blend_cv`` and ``blend_all_cv``, the members of
  ``blend`` and ``blend_all`` with ``--weights cv`` (the searched weights shrunk toward equal ones by
  an amount chosen by 5-fold cross-validation over the validation queries);
- the tuned neural scorer (:data:`TUNED`, ``neural_tuned``): ``ltr tune`` on the cell's train and valid
  files over :data:`TUNE_SPACE` (one MLP a trial, ``--tune-trials`` trials, the cell's seed as TPE's and
  the trials' seed), then ``ltr train --config BEST.toml --ensemble 3`` (three MLPs, as ``neural``); and
  its blends (:data:`TUNED_BLENDS`, ``--weights cv``): ``blend_tuned_cv``, the cell's best engine by
  validation and ``neural_tuned``; ``blend_all_tuned_cv``, every engine and ``neural_tuned``. These are
  kept apart from the blends above, whose neural member stays the best of ``neural`` / ``neural_ens3``,
  so the other candidates give the same numbers with or without ``neural_tuned``, which runs only when
  ``--tune-trials N`` (N > 0) asks for it.
  ``--neural-options`` do not apply to it: its fixed settings are the space file's.
- with ``--best-engine-blend`` (:data:`BEST_BLENDS`): ``blend_best_cv`` and ``blend_best_equal``, the data
  set's best engine (the engine with the highest mean test NDCG@10 over all its cells, the study's "best
  engine", so a choice in hindsight as that row is) and the cell's best neural run, ``--weights cv`` or
  ``equal``: the blend that issue 20's third target names ("a blend of the best GBDT and the best neural
  model"). They run once every cell's engines are recorded; the neural runs of cells that ran before then
  are trained again for them, and their test values are checked equal to the recorded ones.

Every run's model folder is scored on the test file (``ltr.models.load_scorer``) and NDCG@10 is taken
per query with the toolkit's conventions (``ltr.runs.evaluate_scores``); the mean is checked against
the run's own ``summary.json``. Folds are concatenated (MQ2008's five test parts are disjoint), so a
data set has one vector of per-query values per candidate and seed.

Statistics (per data set, :func:`summarise`):

- mean test NDCG@10 per candidate; a 95 % t-interval over seeds (each seed's mean over queries,
  ``mean ± t_{0.975, n-1} * sd / sqrt(n)``) and a 95 % percentile bootstrap interval over queries of
  the seed-averaged per-query values (:func:`bootstrap_interval`);
- the best engine: the engine with the highest mean test NDCG@10; the best recipe: of ``neural``,
  ``neural_ens3`` and the blends, the one with the highest mean test NDCG@10 (both picked on test, the
  best of each side in hindsight), and beside it the recipe with the highest mean validation NDCG@10
  (the pick a user could make; the blend's validation value is in-sample, so it is usually the blend);
- paired comparisons on the seed-averaged per-query values ``d_q = a_q - b_q``: mean difference, its
  bootstrap interval over queries, a paired t-test and a sign-flip randomization test
  (:func:`paired_tests`), Holm-corrected within the data set's family of comparisons (:func:`holm`);
  the weight rules against each other (:data:`RULE_PAIRS`: ``blend_cv`` − ``blend``, ``blend_all_cv``
  − ``blend_all``, ``blend_all_cv`` − ``blend_all_equal``, ``blend_best_cv`` − ``blend_best_equal``) form
  a second family with its own Holm, and the tuned runs against their untuned counterparts
  (:data:`TUNED_PAIRS`) a third.

Resumable: OUT/results.json holds every run (with its per-query values); OUT/results.md the tables.
A run is reused when its options are the same, so after a change of ``ltr train``'s (or ``ltr gbdt``'s)
defaults start a new OUT (a different ``--neural-options`` in the same OUT is refused).

    LTR_THREADS=1 OMP_NUM_THREADS=1 python experiments/best_recipe_study.py --out runs/best-recipe --seeds 3
    python experiments/best_recipe_study.py --out runs/best-recipe-b16 --neural-options "--batch-size 16"
    python experiments/best_recipe_study.py --out runs/br-tuned --only-datasets lgbm_example --skip neural_ens3 --tune-trials 12
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import shutil
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from defaults_study import NDCG10, prepare, quiet_ltr  # noqa: E402

#: engine candidates: name -> options of `ltr gbdt`
ENGINES: dict[str, list[str]] = {
    "lightgbm": ["--engine", "lightgbm"],
    "xgboost": ["--engine", "xgboost"],
    "catboost_yetirank": ["--engine", "catboost"],
    "catboost_qsm200": ["--engine", "catboost", "--objective", "QuerySoftMax", "--early-stopping-rounds", "200"],
}
NEURAL = ("neural", "neural_ens3")
#: blend candidates: name -> (members: "pair" = the cell's best engine and best neural run by validation,
#: "all" = every engine of the cell and its best neural run; `ltr blend --weights` rule)
BLENDS = {"blend": ("pair", "search"), "blend_all": ("all", "search"), "blend_all_equal": ("all", "equal"),
          "blend_cv": ("pair", "cv"), "blend_all_cv": ("all", "cv")}
#: the tuned neural candidate: `ltr tune` over TUNE_SPACE, then `ltr train --config best.toml --ensemble 3`
TUNED = "neural_tuned"
TUNE_SPACE = Path(__file__).resolve().parent / "best_recipe_tune_space.toml"
#: its blends: name -> (members as in BLENDS, with neural_tuned as the neural member; weight rule)
TUNED_BLENDS = {"blend_tuned_cv": ("pair", "cv"), "blend_all_tuned_cv": ("all", "cv")}
#: the blend that target 3 names, "the best GBDT and the best neural model": the data set's best engine (the
#: study's "best engine", the highest mean test NDCG@10 over all its cells, so picked in hindsight as that row
#: is) and the cell's best neural run by validation, weights by `cv` on the cell's validation file, or equal
#: (nothing fitted). It needs every cell's engines first, so it runs once they are all recorded
#: (``--best-engine-blend``, opt-in)
BEST_BLENDS = {"blend_best_cv": ("best", "cv"), "blend_best_equal": ("best", "equal")}
RECIPES = ("neural", "neural_ens3", *BLENDS, TUNED, *TUNED_BLENDS, *BEST_BLENDS)
#: the weight rules against each other (same members, same cells): a family of its own for Holm
RULE_PAIRS = (("blend_cv", "blend"), ("blend_all_cv", "blend_all"), ("blend_all_cv", "blend_all_equal"),
              ("blend_best_cv", "blend_best_equal"))
#: tuned against untuned (same cells): a third family
TUNED_PAIRS = (("neural_tuned", "neural"), ("blend_tuned_cv", "blend_cv"), ("blend_all_tuned_cv", "blend_all_cv"))


# ---------------------------------------------------------------- statistics (tested, no training)

def holm(pvalues) -> np.ndarray:
    """Holm's step-down adjusted p-values: with ``p_(1) <= ... <= p_(m)`` sorted,
    ``adj_(i) = min(1, max_{j <= i} (m - j + 1) * p_(j))``, returned in the input order."""
    p = np.asarray(pvalues, dtype=np.float64)
    m = p.size
    order = np.argsort(p, kind="stable")
    scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])
    adjusted = np.empty(m)
    adjusted[order] = np.maximum.accumulate(scaled)
    return adjusted


def bootstrap_interval(values, *, n_boot: int = 2000, seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``values`` (resampled with replacement ``n_boot``
    times by ``numpy.random.default_rng(seed)``): the ``(1-level)/2`` and ``(1+level)/2`` quantiles
    of the resampled means. Deterministic given ``seed``."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    means = np.empty(n_boot)
    for start in range(0, n_boot, 200):  # in blocks: bounded memory on large query sets
        k = min(200, n_boot - start)
        means[start:start + k] = x[rng.integers(0, x.size, size=(k, x.size))].mean(axis=1)
    lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def seed_interval(seed_means, level: float = 0.95) -> tuple[float, float]:
    """t-interval of the mean over seeds: ``mean ± t_{(1+level)/2, n-1} * sd(ddof=1) / sqrt(n)``; NaN for n < 2."""
    from scipy import stats

    x = np.asarray(seed_means, dtype=np.float64)
    if x.size < 2:
        return math.nan, math.nan
    half = stats.t.ppf((1 + level) / 2, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size)
    return float(x.mean() - half), float(x.mean() + half)


def paired_tests(a, b, *, n_perm: int = 10000, seed: int = 0) -> dict:
    """Paired comparison of per-query values ``a`` and ``b`` (``d = a - b``): mean difference, its
    bootstrap interval, the two-sided paired t-test p-value and the two-sided sign-flip randomization
    p-value ``(1 + #{r : |mean(s_r * d)| >= |mean(d)|}) / (1 + n_perm)`` with random signs ``s_r``."""
    from scipy import stats

    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    observed = abs(d.mean())
    rng = np.random.default_rng(seed)
    hits = 0
    for start in range(0, n_perm, 500):
        k = min(500, n_perm - start)
        signs = rng.integers(0, 2, size=(k, d.size)) * 2 - 1
        hits += int(np.sum(np.abs((signs * d).mean(axis=1)) >= observed - 1e-15))
    if np.ptp(d) > 0:
        t_p = float(stats.ttest_rel(a, b).pvalue)
    else:  # equal differences: t is infinite (or 0/0 when they are all zero)
        t_p = 0.0 if d.size > 1 and d[0] != 0 else 1.0
    return {"diff": float(d.mean()), "ci": bootstrap_interval(d, seed=seed), "t_p": t_p,
            "rand_p": (1 + hits) / (1 + n_perm)}


# ---------------------------------------------------------------- running

def score_test(folder: Path, test) -> np.ndarray:
    """Per-query test NDCG@10 of a model folder (NaN for a query without a relevant item)."""
    from ltr.models.folder import load_scorer
    from ltr.runs.scoring import evaluate_scores

    score, _ = load_scorer(folder)
    ev = evaluate_scores(score(test.features, test.query_offsets), test, ["ndcg@10"])
    if ev.names["ndcg@10"] != NDCG10:
        raise SystemExit(f"ndcg@10 is {ev.names['ndcg@10']}, not the conventions of the runs ({NDCG10})")
    return np.asarray(ev.per_query[NDCG10], dtype=np.float64)


def _run_ltr(argv: list[str], out: Path, test) -> tuple[float, dict, np.ndarray]:
    """``ltr ARGV`` writing the folder ``out`` (emptied first): its wall time, ``summary.json`` and per-query
    test NDCG@10 (:func:`score_test`)."""
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.perf_counter()
    if quiet_ltr(argv) != 0:
        raise SystemExit(f"ltr {shlex.join(argv)} failed")
    wall = time.perf_counter() - t0
    return wall, json.loads((out / "summary.json").read_text()), score_test(out, test)


def _listed(per_query: np.ndarray) -> list:
    return [None if math.isnan(v) else float(v) for v in per_query]


def _model_run(argv: list[str], out: Path, test, recorded_argv: list[str]) -> tuple[dict, dict]:
    """An ``ltr gbdt`` / ``ltr train`` run (:func:`_run_ltr`) whose per-query test values must average to
    its ``summary.json``'s test NDCG@10; its record (valid and test NDCG@10, wall time, per-query values,
    ``recorded_argv``) and its summary. Its TensorBoard folder is removed."""
    wall, summary, per_query = _run_ltr(argv, out, test)
    if abs(np.nanmean(per_query) - summary["metrics"]["test"][NDCG10]) > 1e-6:
        raise SystemExit(f"{out}: per-query mean {np.nanmean(per_query)} != summary {summary['metrics']['test'][NDCG10]}")
    shutil.rmtree(out / "tensorboard", ignore_errors=True)
    return {"valid": summary["metrics"]["valid"][NDCG10], "test": float(np.nanmean(per_query)), "wall_s": wall,
            "per_query": _listed(per_query), "argv": recorded_argv}, summary


def run_model(command: str, options: list[str], files, seed: int, out: Path, test) -> dict:
    """One ``ltr gbdt`` / ``ltr train`` run kept in ``out``; its valid and test NDCG@10, per-query test values."""
    train, valid, test_file = files
    argv = [command, "--train", str(train), "--valid", str(valid), "--test", str(test_file), "--out", str(out),
            "--quiet", *options, *(["--seed", str(seed)] if seed else [])]
    return _model_run(argv, out, test, argv[:1] + options)[0]


def run_blend(members: list[Path], files, out: Path, test, rule: str = "search") -> dict:
    """``ltr blend --weights RULE`` of ``members`` on the validation file; its weights and per-query test values."""
    argv = ["blend", "--models", *map(str, members), "--valid", str(files[1]), "--out", str(out), "--weights", rule]
    wall, summary, per_query = _run_ltr(argv, out, test)
    return {"valid": summary["metrics"]["valid"]["blend"], "test": float(np.nanmean(per_query)), "wall_s": wall,
            "weights": summary["weights"], "per_query": _listed(per_query)}


def tune_space_text(seed: int) -> str:
    """:data:`TUNE_SPACE` with ``[tune] seed`` (TPE's) and ``[train] seed`` (the trials') set to ``seed``."""
    import tomllib

    from ltr.train.config import toml_text

    tables = tomllib.loads(TUNE_SPACE.read_text())
    tables["tune"]["seed"] = seed
    tables["train"]["seed"] = seed
    return toml_text(tables, f"# {TUNE_SPACE.name} with the seed of the cell: {seed}")


def tuned_argvs(trials: int, files, seed: int, out: Path) -> tuple[list[str], list[str], Path, Path]:
    """The ``ltr tune`` and final ``ltr train`` argv of :data:`TUNED` writing ``out``, the cell's space file
    and the study folder (both beside ``out``)."""
    train, valid, test_file = map(str, files)
    space, study = out.with_name(out.name + "-space.toml"), out.with_name(out.name + "-tune")
    tune = ["tune", "--config", str(space), "--trials", str(trials), "--out", str(study), "--train", train, "--valid", valid]
    final = ["train", "--config", str(study / "best.toml"), "--train", train, "--valid", valid, "--test", test_file,
             "--out", str(out), "--quiet", "--ensemble", "3", "--seed", str(seed)]
    return tune, final, space, study


def run_tuned(trials: int, files, seed: int, out: Path, test) -> dict:
    """:data:`TUNED` in ``out``: ``ltr tune`` (a fresh study) then ``ltr train --config best.toml --ensemble 3``."""
    from ltr.base.io_utils import atomic_write_text

    tune, final, space, study = tuned_argvs(trials, files, seed, out)
    shutil.rmtree(study, ignore_errors=True)
    atomic_write_text(space, tune_space_text(seed))
    t0 = time.perf_counter()
    if quiet_ltr(tune) != 0:
        raise SystemExit(f"ltr {shlex.join(tune)} failed")
    tune_wall = time.perf_counter() - t0
    shutil.rmtree(study / "tensorboard", ignore_errors=True)
    record, summary = _model_run(final, out, test, ["tune", "--trials", str(trials)])
    trials_json = json.loads((study / "trials.json").read_text())
    return {**record, "wall_s": tune_wall + record["wall_s"], "tune_wall_s": tune_wall,
            "best_config": (study / "best.toml").read_text(), "trial_counts": trials_json["counts"],
            "final_config": summary["config"]}


def candidates(neural_options: list[str], tune_trials: int = 0) -> dict[str, tuple[str, list[str]]]:
    """Candidate name -> (ltr command, options); :data:`TUNED` (command "tune", :func:`run_tuned`) only when
    ``tune_trials`` > 0, so that the commands published before it existed run the same candidates (and the
    same Holm families) as they did."""
    out = {name: ("gbdt", opts) for name, opts in ENGINES.items()}
    out["neural"] = ("train", list(neural_options))
    out["neural_ens3"] = ("train", [*neural_options, "--ensemble", "3"])
    if tune_trials > 0:
        out[TUNED] = ("tune", ["--trials", str(tune_trials)])
    return out


class Store:
    """results.json: a list of run records keyed by (candidate, dataset, fold, seed), written atomically."""

    def __init__(self, path: Path):
        self.path = path
        self.records = json.loads(path.read_text()) if path.exists() else []

    def get(self, candidate, dataset, fold, seed):
        return next((r for r in self.records if (r["candidate"], r["dataset"], r["fold"], r["seed"])
                     == (candidate, dataset, fold, seed)), None)

    def put(self, record: dict) -> None:
        from ltr.base.io_utils import atomic_write_json

        key = (record["candidate"], record["dataset"], record["fold"], record["seed"])
        self.records = [r for r in self.records if (r["candidate"], r["dataset"], r["fold"], r["seed"]) != key]
        self.records.append(record)
        atomic_write_json(self.path, self.records)


def best_engine_of(store: Store, cands, dataset: str, folds: int, engine_seeds: int) -> str | None:
    """The engine of ``cands`` that :func:`summarise` names the best engine (highest mean test NDCG@10 over the
    seed-averaged per-query values), once every engine ran in every fold with each of ``engine_seeds``; else None."""
    engines = [n for n in ENGINES if n in cands]
    if not engines or any(store.get(n, dataset, f, s) is None for n in engines for f in range(folds)
                          for s in range(engine_seeds)):
        return None
    vectors = per_seed_vectors([r for r in store.records if r["candidate"] in engines], dataset, folds)
    return max(engines, key=lambda n: float(_scored(vectors[n]).mean(axis=0).mean()))


def run_cell(store: Store, cands, dataset: str, fold: int, files, seed: int, engine_seed: int, out: Path, test,
             best_engine: str | None = None) -> None:
    """Every candidate of one (data set, fold, seed) cell, then its blends (:data:`BLENDS`; :data:`TUNED_BLENDS`
    when :data:`TUNED` is a candidate; :data:`BEST_BLENDS` when ``best_engine`` is given)."""
    cell = out / "runs" / dataset / f"fold{fold}"
    blends = {**BLENDS, **(TUNED_BLENDS if TUNED in cands else {}), **(BEST_BLENDS if best_engine else {})}
    pending = [b for b in blends if store.get(b, dataset, fold, seed) is None]
    folders = {}
    for name, (command, options) in cands.items():
        s = engine_seed if command == "gbdt" else seed
        folder = cell / f"{name}-seed{s}"
        folders[name] = folder
        rec = store.get(name, dataset, fold, s)
        if rec is not None and rec["argv"] != [command, *options]:
            raise SystemExit(f"{store.path}: {name} was run with {rec['argv']}, not {[command, *options]}: use another --out")
        if rec is not None and (folder / "summary.json").exists():
            continue
        users = TUNED_BLENDS if name == TUNED else {**BLENDS, **BEST_BLENDS}  # the blends that take this run
        if rec is not None and command != "gbdt" and not any(b in users for b in pending):
            continue  # the blends of this cell that use it are done; its neural folder is no longer needed
        if command == "tune":
            r = run_tuned(int(options[1]), files, s, folder, test)
        else:
            r = run_model(command, options, files, s, folder, test)
        if rec is not None and not np.allclose(*(np.array(x["per_query"], dtype=float) for x in (r, rec)), atol=1e-9,
                                               equal_nan=True):
            raise SystemExit(f"{folder}: retrained for a new blend, but its test values differ from the recorded run's")
        store.put({"candidate": name, "dataset": dataset, "fold": fold, "seed": s, **r})
        print(f"{dataset} fold {fold + 1} seed {s} {name}: test {r['test']:.4f} valid {r['valid']:.4f} {r['wall_s']:.1f} s",
              file=sys.stderr, flush=True)
    recs = {n: store.get(n, dataset, fold, engine_seed if cands[n][0] == "gbdt" else seed) for n in cands}
    engines = [n for n in ENGINES if n in cands]
    gbdt = max(engines, key=lambda n: recs[n]["valid"])
    neural = max((n for n in NEURAL if n in cands), key=lambda n: recs[n]["valid"])
    for blend, (which, rule) in blends.items():
        if store.get(blend, dataset, fold, seed) is not None:
            continue
        nn = TUNED if blend in TUNED_BLENDS else neural
        members = {"pair": [gbdt, nn], "best": [best_engine, nn]}.get(which, [*engines, nn])
        r = run_blend([folders[m] for m in members], files, cell / f"{blend}-seed{seed}", test, rule)
        store.put({"candidate": blend, "dataset": dataset, "fold": fold, "seed": seed, "members": members,
                   "member_seeds": [engine_seed if m in ENGINES else seed for m in members], **r})
        print(f"{dataset} fold {fold + 1} seed {seed} {blend}({', '.join(members)}) {r['weights']}: test {r['test']:.4f} "
              f"valid {r['valid']:.4f}", file=sys.stderr, flush=True)
    for name in (n for n in (*NEURAL, TUNED) if n in cands):  # neural folders are only kept for the blends
        shutil.rmtree(folders[name], ignore_errors=True)


# ---------------------------------------------------------------- summary

def per_seed_vectors(records: list[dict], dataset: str, folds: int) -> dict[str, dict[int, np.ndarray]]:
    """candidate -> seed -> per-query test NDCG@10 over the folds in order (only seeds with every fold),
    plus ``gbdt_member`` / ``neural_member``: the blend's members of each (fold, seed) cell."""
    by = {(r["candidate"], r["fold"], r["seed"]): r for r in records if r["dataset"] == dataset}
    vec = lambda r: np.array([math.nan if v is None else v for v in r["per_query"]])  # noqa: E731
    out: dict[str, dict[int, np.ndarray]] = {}
    for name in dict.fromkeys(c for c, _, _ in by):
        for seed in sorted({s for c, _, s in by if c == name}):
            if all((name, f, seed) in by for f in range(folds)):
                out.setdefault(name, {})[seed] = np.concatenate([vec(by[(name, f, seed)]) for f in range(folds)])
    for seed in out.get("blend", {}):
        for k, role in enumerate(("gbdt_member", "neural_member")):
            parts = []
            for f in range(folds):
                blend = by[("blend", f, seed)]
                parts.append(vec(by[(blend["members"][k], f, blend["member_seeds"][k])]))
            out.setdefault(role, {})[seed] = np.concatenate(parts)
    return out


def _scored(seeds: dict[int, np.ndarray]) -> np.ndarray:
    """[seeds, queries] per-query values, without the queries that are NaN in any seed (no relevant item)."""
    matrix = np.vstack([seeds[s] for s in sorted(seeds)])
    return matrix[:, ~np.isnan(matrix).any(axis=0)]


def summarise(records: list[dict], dataset: str, folds: int) -> dict:
    """Means, intervals, the best engine and recipe, and the Holm-corrected paired comparisons of one data set."""
    vectors = per_seed_vectors(records, dataset, folds)
    rows, averaged = {}, {}
    order = [*ENGINES, *RECIPES, "gbdt_member", "neural_member"]
    for name, seeds in sorted(vectors.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order)):
        scored = _scored(seeds)
        averaged[name] = scored.mean(axis=0)
        valid = [r["valid"] for r in records if r["dataset"] == dataset and r["candidate"] == name]
        wall = [r["wall_s"] for r in records if r["dataset"] == dataset and r["candidate"] == name]
        rows[name] = {"mean": float(averaged[name].mean()), "seeds": len(seeds),
                      "seed_ci": seed_interval(scored.mean(axis=1)),
                      "query_ci": bootstrap_interval(averaged[name]), "valid": float(np.mean(valid)) if valid else math.nan,
                      "wall_s": float(np.mean(wall)) if wall else math.nan, "queries": scored.shape[1]}
    engines = [n for n in ENGINES if n in rows]
    recipes = [n for n in RECIPES if n in rows]
    if not engines or not recipes:
        return {"rows": rows, "comparisons": []}
    best_engine = max(engines, key=lambda n: rows[n]["mean"])
    best_recipe = max(recipes, key=lambda n: rows[n]["mean"])
    by_valid = max(recipes, key=lambda n: rows[n]["valid"])
    pairs = [(r, best_engine) for r in recipes]
    pairs += [(b, m) for b in ("blend", "blend_cv") for m in ("gbdt_member", "neural_member") if b in rows and m in rows]
    # the best-engine blends' GBDT member is the best engine, paired above with every recipe
    pairs += [(b, "neural_member") for b in BEST_BLENDS if b in rows and "neural_member" in rows]
    def family(of):  # the paired tests of the pairs whose both sides ran, Holm-adjusted below within the family
        return [{"a": a, "b": b, **paired_tests(averaged[a], averaged[b])} for a, b in of if a in rows and b in rows]

    comparisons, rules, tuned = family(pairs), family(RULE_PAIRS), family(TUNED_PAIRS)
    for family_tests in (comparisons, rules, tuned):
        for key in ("t_p", "rand_p"):
            for c, adj in zip(family_tests, holm([c[key] for c in family_tests])):
                c[f"holm_{key}"] = float(adj)
    return {"rows": rows, "comparisons": comparisons, "rule_comparisons": rules, "tuned_comparisons": tuned,
            "best_engine": best_engine,
            "best_recipe": best_recipe, "recipe_by_valid": by_valid}


def _ci(pair) -> str:
    return "n/a" if math.isnan(pair[0]) else f"[{pair[0]:.4f}, {pair[1]:.4f}]"


def report(records: list[dict], sets: dict, neural_options: list[str], skip=()) -> str:
    """results.md: per data set, the candidates' table and the paired comparisons; then the targets."""
    lines = [f"Neural options: `{shlex.join(neural_options) or '(none: the ltr train defaults)'}`",
             *([f"Left out: {', '.join(skip)}"] if skip else []), ""]
    top = len(lines)
    verdicts, summary = [], []
    for dataset, folds in sets.items():
        s = summarise(records, dataset, len(folds))
        if not s["rows"]:
            continue
        lines += [f"### {dataset}", "", "| candidate | test NDCG@10 | 95% over seeds | 95% over queries | valid | seeds | queries | wall s |",
                  "|---|---|---|---|---|---|---|---|"]
        for name, r in s["rows"].items():
            mark = " (best engine)" if name == s.get("best_engine") else " (best recipe)" if name == s.get("best_recipe") else ""
            mark += " (validation's pick)" if name == s.get("recipe_by_valid") else ""
            lines.append(f"| {name}{mark} | {r['mean']:.4f} | {_ci(r['seed_ci'])} | {_ci(r['query_ci'])} | {r['valid']:.4f} "
                         f"| {r['seeds']} | {r['queries']} | {r['wall_s']:.1f} |")
        if s["comparisons"]:
            lines += ["", "| comparison | mean diff | 95% over queries | paired t p | Holm | randomization p | Holm |",
                      "|---|---|---|---|---|---|---|"]
            for title, key in ((None, "comparisons"), ("weight rules", "rule_comparisons"), ("tuned − untuned", "tuned_comparisons")):
                if title is not None and s[key]:  # a family of its own: Holm within it alone
                    lines += ["", f"| {title} (Holm over these) | mean diff | 95% over queries | paired t p | Holm "
                              "| randomization p | Holm |", "|---|---|---|---|---|---|---|"]
                for c in s[key]:
                    lines.append(f"| {c['a']} − {c['b']} | {c['diff']:+.4f} | {_ci(c['ci'])} | {c['t_p']:.2g} "
                                 f"| {c['holm_t_p']:.2g} | {c['rand_p']:.2g} | {c['holm_rand_p']:.2g} |")
            rec = next(c for c in s["comparisons"] if c["a"] == s["best_recipe"])
            val = next(c for c in s["comparisons"] if c["a"] == s["recipe_by_valid"])
            verdicts.append(f"- {dataset}: best recipe {s['best_recipe']} − best engine {s['best_engine']} = {rec['diff']:+.4f} "
                            f"(Holm t p {rec['holm_t_p']:.2g}): target 1 {'met' if rec['diff'] >= 0 else 'NOT met'}; "
                            f"the recipe validation picks, {s['recipe_by_valid']}: {val['diff']:+.4f}")
            for b in ("blend", "blend_cv"):  # blend_cv has blend's members
                both = [c for c in s["comparisons"] if c["a"] == b and c["b"].endswith("_member")]
                if len(both) == 2:
                    ok = all(c["diff"] >= 0 for c in both)
                    verdicts.append(f"- {dataset}: {b} − its GBDT member {both[0]['diff']:+.4f}, − its neural member "
                                    f"{both[1]['diff']:+.4f}: {b} ≥ each {'met' if ok else 'NOT met'}")
            for b in BEST_BLENDS:  # its members: the best engine and the neural member
                both = [next((c for c in s["comparisons"] if (c["a"], c["b"]) == (b, m)), None)
                        for m in (s["best_engine"], "neural_member")]
                if all(both):
                    ok = all(c["diff"] >= 0 for c in both)
                    verdicts.append(f"- {dataset}: {b} − its GBDT member {s['best_engine']} {both[0]['diff']:+.4f}, − its "
                                    f"neural member {both[1]['diff']:+.4f}: {b} ≥ each {'met' if ok else 'NOT met'}")
        lines.append("")
        summary.append(_summary_row(dataset, s))
    head = ["### Summary", "", "| data set | queries | seeds | best engine | best recipe | recipe − engine [95% over queries] | Holm t p "
            "| blend − GBDT member | blend − neural member |", "|---|---|---|---|---|---|---|---|---|", *filter(None, summary), ""]
    return "\n".join(lines[:top] + head + lines[top:] + ["### Targets", "", *verdicts]) + "\n"


def _summary_row(dataset: str, s: dict) -> str | None:
    """One line of the summary table: the best engine and recipe with their means, the difference, the blend's gains."""
    if not s["comparisons"]:
        return None
    rows, diff = s["rows"], {(c["a"], c["b"]): c for c in s["comparisons"]}
    e, r = s["best_engine"], s["best_recipe"]
    c = diff[(r, e)]
    members = [diff.get(("blend", m)) for m in ("gbdt_member", "neural_member")]
    gains = [f"{m['diff']:+.4f} (p {m['holm_t_p']:.2g})" if m else "n/a" for m in members]
    return (f"| {dataset} | {rows[r]['queries']} | {rows['neural']['seeds'] if 'neural' in rows else rows[r]['seeds']} "
            f"| {e} {rows[e]['mean']:.4f} | {r} {rows[r]['mean']:.4f} | {c['diff']:+.4f} {_ci(c['ci'])} | {c['holm_t_p']:.2g} "
            f"| {gains[0]} | {gains[1]} |")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--engine-seeds", type=int, default=None,
                   help="run the engines with the first N seeds only (default: all); later seeds' blends use seed s mod N")
    p.add_argument("--neural-options", default="", help='options of `ltr train`, one string (default: none)')
    p.add_argument("--large", action="store_true", help="add the 10,000-query synthetic set")
    p.add_argument("--only-datasets", default=None, help="comma-separated data set names")
    p.add_argument("--folds", type=int, default=None, help="only the first N folds of a data set that has several")
    p.add_argument("--skip", default="", help="comma-separated candidates to leave out (at least one engine and "
                   "one neural candidate must stay), e.g. catboost_yetirank,catboost_qsm200 where CatBoost is too slow")
    p.add_argument("--tune-trials", type=int, default=0,
                   help="add neural_tuned and its blends, with this many `ltr tune` trials a cell (default 0: not run)")
    p.add_argument("--best-engine-blend", action="store_true",
                   help="add blend_best_cv and blend_best_equal: the data set's best engine (by test, as the study "
                        "names it) and the cell's neural run, cv or equal weights; run once every cell's engines "
                        "are recorded")
    p.add_argument("--report-only", action="store_true", help="rebuild results.md from results.json")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    sets = prepare(args.out / "data", args.large)
    if args.only_datasets:
        wanted = args.only_datasets.split(",")
        sets = {k: sets[k] for k in wanted if k in sets}
    if args.folds:
        sets = {k: v[: args.folds] for k, v in sets.items()}
    neural_options = shlex.split(args.neural_options)
    skip = [n for n in args.skip.split(",") if n]
    offered = candidates(neural_options, args.tune_trials)
    cands = {k: v for k, v in offered.items() if k not in skip}
    if not any(n in cands for n in ENGINES) or not any(n in cands for n in NEURAL) or len(skip) + len(cands) != len(offered):
        raise SystemExit(f"--skip {args.skip}: unknown candidate, or no engine or no neural candidate left")
    store = Store(args.out / "results.json")
    engine_seeds = args.engine_seeds or args.seeds
    from ltr.data import load_svmlight

    def best(dataset):  # the best-engine blends' GBDT member, once known
        return best_engine_of(store, cands, dataset, len(sets[dataset]), min(args.seeds, engine_seeds)) \
            if args.best_engine_blend else None

    # seed outermost: every data set gets seed 0 first; with --best-engine-blend a second round adds the
    # best-engine blends of the cells that ran before every engine of their data set was recorded
    for round_ in range(0 if args.report_only else 1 + args.best_engine_blend):
        for seed in range(args.seeds):
            for dataset, folds in sets.items():
                for fold, files in enumerate(folds):
                    if round_ and all(store.get(b, dataset, fold, seed) is not None for b in BEST_BLENDS):
                        continue
                    test = load_svmlight(files[2], cache=False)
                    run_cell(store, cands, dataset, fold, files, seed, seed % engine_seeds, args.out, test, best(dataset))
    md = report(store.records, sets, neural_options, skip)
    from ltr.base.io_utils import atomic_write_text

    atomic_write_text(args.out / "results.md", md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
