"""Which weight rule makes `ltr blend`'s default never lose to its members? Issue 44, part 3.

Per data set and fold (the data of ``experiments/defaults_study.py``: its :func:`prepare`, with its
held-out sets ``HELD_OUT``, other generator settings that no choice is made on), the members are trained
as a user trains them, with their defaults (``ltr.cli.main`` in this process):

- the GBDT engines ``ltr gbdt --engine lightgbm|xgboost|catboost`` (``--engines``);
- the neural run ``ltr train`` with no option.

The blend is that of the GBDT engine with the best validation NDCG@10 (the pick a user can make) and the
neural run. Every member's scores of the validation and test files are kept (``scores.npz`` in its run
folder); each weight rule of :data:`ltr.models.blend.WEIGHT_RULES` then fits its weights on the
validation scores (:func:`ltr.models.blend.fit_weights`, what ``ltr blend --weights RULE`` runs) and the
blend is judged on the test file: NDCG@10 per query with the toolkit's conventions, folds concatenated.
Per data set: the mean test NDCG@10 of each member, of the better member (in hindsight, on test) and of
each rule, and the rule's difference to the better member with a 95 % bootstrap interval over queries.

Resumable: a member whose run folder holds ``scores.npz`` is not trained again.

    LTR_THREADS=1 OMP_NUM_THREADS=1 python experiments/blend_rule_study.py --out runs/blend-rule
    python experiments/blend_rule_study.py --out runs/blend-rule --only-datasets mq2008 --engines lightgbm,catboost
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from defaults_study import HELD_OUT, NDCG10, prepare, quiet_ltr  # noqa: E402

ENGINES = ("lightgbm", "xgboost", "catboost")
def member_runs(name: str, files, folder: Path, engines) -> dict[str, Path]:
    """Train (or reuse) every member of one fold; returns member name -> run folder."""
    train, valid, test = files
    runs = {}
    for member in [*engines, "neural"]:
        run = folder / member
        if not (run / "scores.npz").exists():
            t0 = time.perf_counter()
            if run.exists():
                import shutil

                shutil.rmtree(run)
            command = ["train"] if member == "neural" else ["gbdt", "--engine", member]
            code = quiet_ltr([*command, "--train", str(train), "--valid", str(valid), "--quiet", "--out", str(run)])
            if code != 0:
                raise SystemExit(f"{name}: {member} failed (exit {code})")
            save_scores(run, valid, test, time.perf_counter() - t0)
            print(f"{name} {folder.name} {member}: {time.perf_counter() - t0:.0f} s", flush=True)
        runs[member] = run
    return runs


def save_scores(run: Path, valid: Path, test: Path, seconds: float) -> None:
    from ltr.data import load_svmlight
    from ltr.models.folder import load_scorer

    score, _ = load_scorer(run)
    out = {"seconds": np.array(seconds)}
    for split, path in (("valid", valid), ("test", test)):
        ds = load_svmlight(path, cache=False)
        out[split] = score(ds.features, ds.query_offsets)
    np.savez(run / "scores.npz", **out)


def judge_fold(files, runs: dict[str, Path], engines, rules) -> dict:
    """Per-query test NDCG@10 of the members and of each rule's blend of the best engine (by validation)
    and the neural run."""
    from ltr.data import load_svmlight
    from ltr.models.blend import blend_scorer, fit_weights, standardise
    from ltr.runs.scoring import evaluate_scores

    valid, test = (load_svmlight(p, cache=False) for p in files[1:])
    scores = {m: np.load(runs[m] / "scores.npz") for m in runs}

    def per_query(s, ds):
        ev = evaluate_scores(s, ds, ["ndcg@10"], None)
        return np.asarray(ev.per_query[NDCG10], dtype=np.float64)

    valid_of = {m: float(np.nanmean(per_query(scores[m]["valid"], valid))) for m in runs}
    gbdt = max(engines, key=lambda e: (valid_of[e], -engines.index(e)))
    members = [gbdt, "neural"]
    out = {"gbdt_member": gbdt, "valid": valid_of, "test": {m: per_query(scores[m]["test"], test) for m in runs}, "weights": {}}
    for rule in rules:
        fit = fit_weights([scores[m]["valid"] for m in members], valid, "ndcg@10", None, rule=rule)
        zs = [standardise(scores[m]["test"], test.query_offsets) for m in members]
        blended = sum(w * z for w, z in zip(fit.weights, zs))
        out["test"][f"blend_{rule}"] = per_query(blended, test)
        out["weights"][rule] = fit.weights
    out["test"]["gbdt_member"] = out["test"][gbdt]
    return out


def bootstrap(d: np.ndarray, rng: np.random.Generator, n: int = 2000) -> tuple[float, float]:
    means = rng.choice(d, size=(n, len(d)), replace=True).mean(axis=1)
    return float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))


def summarise(results: dict, rules) -> str:
    rng = np.random.default_rng(0)
    head = ["data set", "queries", "GBDT member (picks)", "neural", "better member"] + [f"`{r}` − better" for r in rules]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, folds in results.items():
        cat = {k: np.concatenate([f["test"][k] for f in folds]) for k in folds[0]["test"] if not k.startswith("blend_")
               and k in ("gbdt_member", "neural")}
        blends = {r: np.concatenate([f["test"][f"blend_{r}"] for f in folds]) for r in rules}
        keep = ~np.isnan(cat["neural"])
        means = {k: float(v[keep].mean()) for k, v in cat.items()}
        better = max(means, key=means.get)
        picks = ", ".join(sorted({f["gbdt_member"] for f in folds}))
        row = [name, str(int(keep.sum())), f"{means['gbdt_member']:.4f} ({picks})", f"{means['neural']:.4f}",
               f"{better.replace('_member', '')} {means[better]:.4f}"]
        for r in rules:
            d = blends[r][keep] - cat[better][keep]
            lo, hi = bootstrap(d, rng)
            mark = "**" if d.mean() >= 0 else ""
            row.append(f"{mark}{d.mean():+.4f}{mark} [{lo:+.4f}, {hi:+.4f}]")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def main() -> None:
    from ltr.models.blend import WEIGHT_RULES

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--only-datasets", default=None, help="comma-separated data set names (held-out ones included)")
    p.add_argument("--engines", default=",".join(ENGINES), help="GBDT engines the GBDT member is picked from")
    p.add_argument("--rules", default=",".join(WEIGHT_RULES), help="weight rules to compare")
    p.add_argument("--no-train", action="store_true", help="only judge folds whose members are all trained")
    args = p.parse_args()
    only = None if args.only_datasets is None else set(args.only_datasets.split(","))
    engines, rules = args.engines.split(","), args.rules.split(",")
    sets = prepare(args.out / "data", large=False, only=only or set(HELD_OUT) | {"synth400", "synth1000", "synth1000qr",
                                                                                 "mq2008", "mslr5k", "lgbm_example", "trec_news"})
    results: dict[str, list] = {}
    for name, folds in sets.items():
        if only is not None and name not in only:
            continue
        for f, files in enumerate(folds):
            folder = args.out / "runs" / name / f"fold{f + 1}"
            if args.no_train and not all((folder / m / "scores.npz").exists() for m in [*engines, "neural"]):
                continue
            runs = member_runs(name, files, folder, engines)
            results.setdefault(name, []).append(judge_fold(files, runs, engines, rules))
    table = summarise(results, rules)
    (args.out / "results.md").write_text(table + "\n")
    serial = {n: [{**f, "test": {k: v.tolist() for k, v in f["test"].items()}} for f in folds] for n, folds in results.items()}
    (args.out / "results.json").write_text(json.dumps(serial))
    print(table)


if __name__ == "__main__":
    main()
