"""Which defaults should `ltr train` and `ltr gbdt` have? Candidates run as a user runs them, on every data set at hand.

Each candidate is a list of command-line options of `ltr train` (or `ltr gbdt`), run in this process
through `ltr.cli.main` exactly as a user's command (no option beyond the data files for the
candidate named `default`), with several seeds, on every data set that is present:

- synthetic: `ltr synth --queries 400 --seed 3` (the data of issue 20's table), `--queries 1000`,
  and with `--large` 10,000 queries of 40 items on average;
- `synth1000qr`: the stand-in for issue 20's held-out set with heavy-tailed counts and query-relative
  scores, `ltr synth --queries 1000 --seed S --query-relative 2` for S = 1, 2, 3 (its three "folds":
  one generated set per seed, so a candidate's mean covers the generator's seeds too); `synth1000qr0`,
  the same seeds without `--query-relative` (its control), only when --only-datasets names it;
- MQ2008, five folds (train S_f..S_f+2, valid S_f+3, test S_f+4), when ../shared/data holds it;
- the MSLR-WEB10K sample, LightGBM's lambdarank example and TREC News 2018 (the last 20 % of the
  training queries become the validation file), when present.

For each candidate: test NDCG@10 (the toolkit's conventions) per data set, mean over seeds (and folds),
wall time relative to `ltr gbdt`'s default on the same data, and its mean rank across data sets. The
pick is the best mean rank among candidates whose time ratio is at most --time-budget (3 by default)
on every data set. Results: OUT/results.json (every run) and OUT/results.md (the table).

    python experiments/defaults_study.py --out runs/defaults-study --seeds 3
    python experiments/defaults_study.py --out runs/defaults-study --only-candidates default,auto_softmax

Results are kept per (candidate, data set, fold, seed) and a rerun with the same --out resumes; give a new
--out when --train-options changes.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shlex
import shutil
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("LTR_SHARED_DIR", ROOT.parent / "shared")) / "data"

#: name -> (command, options); "default" is the command with no option at all
CANDIDATES: dict[str, tuple[str, list[str]]] = {
    "gbdt_default": ("gbdt", []),
    "gbdt_small_leaves": ("gbdt", ["--num-leaves", "15", "--learning-rate", "0.05"]),
    "gbdt_lr02": ("gbdt", ["--learning-rate", "0.02"]),
    "gbdt_lr10": ("gbdt", ["--learning-rate", "0.1"]),
    "gbdt_leaf50": ("gbdt", ["--param", "min_data_in_leaf=50"]),
    "gbdt_leaf5": ("gbdt", ["--param", "min_data_in_leaf=5"]),
    "gbdt_es200": ("gbdt", ["--early-stopping-rounds", "200"]),
    "gbdt_l7_es200": ("gbdt", ["--num-leaves", "7", "--early-stopping-rounds", "200"]),
    "gbdt_ff07": ("gbdt", ["--param", "feature_fraction=0.7"]),
    "default": ("train", []),
    "default_one_model": ("train", ["--ensemble", "1"]),
    "default_ens5": ("train", ["--ensemble", "5"]),
    "v02_default": ("train", ["--batch-size", "64", "--ensemble", "1"]),
    # the "auto" batch size's rule with other step counts: {steps:N} = min(64, max(4, n_train_queries // N))
    "default_steps10": ("train", ["--batch-size", "{steps:10}"]),
    "default_steps30": ("train", ["--batch-size", "{steps:30}"]),
    "default_steps40": ("train", ["--batch-size", "{steps:40}"]),
    "none_lambdarank": ("train", ["--normalize", "none", "--loss", "lambdarank"]),
    "log1p_standard": ("train", ["--normalize", "log1p_standard", "--loss", "lambdarank"]),
    "auto_lambdarank": ("train", ["--normalize", "auto", "--loss", "lambdarank"]),
    "auto_softmax": ("train", ["--normalize", "auto", "--loss", "softmax"]),
    "auto_softmax_noise": ("train", ["--normalize", "auto", "--loss", "softmax", "--input-noise", "0.1"]),
    "auto_softmax_lr3": ("train", ["--normalize", "auto", "--loss", "softmax", "--lr", "0.003"]),
    "auto_softmax_drop": ("train", ["--normalize", "auto", "--loss", "softmax", "--dropout", "0.1"]),
    "auto_softmax_ens3": ("train", ["--normalize", "auto", "--loss", "softmax", "--ensemble", "3"]),
    "auto_softmax_noise_ens3": ("train", ["--normalize", "auto", "--loss", "softmax", "--input-noise", "0.1", "--ensemble", "3"]),
    "auto_softmax_p10": ("train", ["--normalize", "auto", "--loss", "softmax", "--patience", "10", "--epochs", "60"]),
    "auto_softmax_qz": ("train", ["--normalize", "auto", "--loss", "softmax", "--query-norm", "zscore"]),
    "auto_softmax_noise_qz": ("train", ["--normalize", "auto", "--loss", "softmax", "--input-noise", "0.1", "--query-norm", "zscore"]),
    "auto_softmax_noise_qa": ("train", ["--normalize", "auto", "--loss", "softmax", "--input-noise", "0.1", "--query-norm", "append_zscore"]),
    "auto_softmax_qa": ("train", ["--normalize", "auto", "--loss", "softmax", "--query-norm", "append_zscore"]),
    "normalize_none": ("train", ["--normalize", "none"]),
    "query_zscore": ("train", ["--query-norm", "zscore"]),
    "query_append_zscore": ("train", ["--query-norm", "append_zscore"]),
    "query_minmax": ("train", ["--query-norm", "minmax"]),
    "none_query_zscore": ("train", ["--normalize", "none", "--query-norm", "zscore"]),
    "gbdt_catboost": ("gbdt", ["--engine", "catboost"]),
    # issue 44, part 6: what might close the gap to CatBoost's defaults
    "default_h256": ("train", ["--hidden", "256,128"]),
    "default_p10": ("train", ["--patience", "10", "--epochs", "60"]),
    "default_lambdarank": ("train", ["--loss", "lambdarank"]),
    "default_qa": ("train", ["--query-norm", "append_zscore"]),
    "default_noise02": ("train", ["--input-noise", "0.2"]),
    "default_b16": ("train", ["--batch-size", "16"]),
    "default_b8": ("train", ["--batch-size", "8"]),
    "default_b16_ens3": ("train", ["--batch-size", "16", "--ensemble", "3"]),
    "default_b8_ens3": ("train", ["--batch-size", "8", "--ensemble", "3"]),
    "default_b4_ens3": ("train", ["--batch-size", "4", "--ensemble", "3"]),
    "default_b16_p10_ens3": ("train", ["--batch-size", "16", "--patience", "10", "--ensemble", "3"]),
    "default_b16_lambdarank_ens3": ("train", ["--batch-size", "16", "--loss", "lambdarank", "--ensemble", "3"]),
    "auto_softmax_noise_qa_ens3": ("train", ["--normalize", "auto", "--loss", "softmax", "--input-noise", "0.1",
                                             "--query-norm", "append_zscore", "--ensemble", "3"]),
}
NDCG10 = "ndcg@10[gain=exp2,discount=log2,ideal=min(R,K),empty=skip,ties=stable]"
#: held-out sets (issue 44): other generator settings than the study's (other feature counts, list lengths,
#: label noise, query-relative scores), generated only when --only-datasets names them; a choice made on the
#: study's sets is checked on them, never made on them
HELD_OUT = {
    "heldout_f46": ["--queries", "1200", "--features", "46", "--mean-length", "40", "--label-noise", "1.0",
                    "--seed", "11"],
    "heldout_qr_long": ["--queries", "800", "--features", "60", "--mean-length", "90", "--query-relative", "1",
                        "--seed", "12"],
}


def quiet_ltr(argv: list[str]) -> int:
    """`ltr ARGS` in this process with its printout swallowed (errors still reach stderr)."""
    from ltr.cli import main

    with contextlib.redirect_stdout(io.StringIO()):
        return main(argv)


def split_valid(src: Path, train_out: Path, valid_out: Path, share: float = 0.2, query_file: Path | None = None) -> None:
    """The last ``share`` of the queries of an SVMlight file (qid: or a .query file) become a validation file."""
    from ltr.data import load_svmlight, save_svmlight

    ds = load_svmlight(src, query_file=query_file, cache=False)
    cut = ds.n_queries - max(1, int(round(share * ds.n_queries)))
    save_svmlight(ds.subset(np.arange(cut)), train_out)
    save_svmlight(ds.subset(np.arange(cut, ds.n_queries)), valid_out)


def prepare(data_dir: Path, large: bool, only: set[str] | None = None) -> dict[str, list[tuple[Path, Path, Path]]]:
    """Data set name -> list of (train, valid, test) files (several for folds); a synthetic set outside
    ``only`` (when given) is not generated."""
    sets: dict[str, list[tuple[Path, Path, Path]]] = {}
    data_dir.mkdir(parents=True, exist_ok=True)
    synth = [("synth400", ["--queries", "400", "--seed", "3"]), ("synth1000", ["--queries", "1000", "--seed", "1"])]
    synth += [(f"synth1000qr/seed{s}", ["--queries", "1000", "--seed", str(s), "--query-relative", "2"]) for s in (1, 2, 3)]
    if only is not None and "synth1000qr0" in only:  # the control: the same sets without query-relative scores
        synth += [(f"synth1000qr0/seed{s}", ["--queries", "1000", "--seed", str(s)]) for s in (1, 2, 3)]
    synth += [(name, options) for name, options in HELD_OUT.items() if only is not None and name in only]
    if large:
        synth.append(("synth10000", ["--queries", "10000", "--seed", "2", "--mean-length", "40", "--valid-share", "0.2",
                                     "--test-share", "0.2"]))
    for name, options in synth:
        folder, set_name = data_dir / name, name.split("/")[0]
        if only is not None and set_name not in only:
            continue
        if not (folder / "test.txt").exists():
            quiet_ltr(["synth", "--out", str(folder), *options, "--quiet"])
        sets.setdefault(set_name, []).append((folder / "train.txt", folder / "valid.txt", folder / "test.txt"))
    mq = SHARED / "letor4-mq2008"
    if (mq / "S5.txt").exists():
        folds = []
        for f in range(5):
            parts = [mq / f"S{(f + k) % 5 + 1}.txt" for k in range(5)]
            train = data_dir / f"mq2008-fold{f + 1}-train.txt"
            if not train.exists():
                from ltr.base.io_utils import atomic_write_bytes

                atomic_write_bytes(train, b"".join(p.read_bytes() for p in parts[:3]))
            folds.append((train, parts[3], parts[4]))
        sets["mq2008"] = folds
    others = [
        ("mslr5k", SHARED / "mslr-web10k-fold1-5k" / "msn1.fold1.train.5k.txt", SHARED / "mslr-web10k-fold1-5k" / "msn1.fold1.test.5k.txt", None),
        ("lgbm_example", SHARED / "lightgbm-lambdarank-example" / "rank.train", SHARED / "lightgbm-lambdarank-example" / "rank.test",
         SHARED / "lightgbm-lambdarank-example" / "rank.train.query"),
        ("trec_news", SHARED / "trec-news-2018-fastrank" / "trec_news_2018.train", SHARED / "trec-news-2018-fastrank" / "trec_news_2018.test", None),
    ]
    for name, train_src, test_src, query_file in others:
        if not train_src.exists():
            continue
        train, valid = data_dir / f"{name}-train.txt", data_dir / f"{name}-valid.txt"
        if not valid.exists():
            split_valid(train_src, train, valid, query_file=query_file)
        test = test_src
        if query_file is not None:  # the test file's groups come from its own .query file: rewrite with qid:
            test = data_dir / f"{name}-test.txt"
            if not test.exists():
                from ltr.data import load_svmlight, save_svmlight

                save_svmlight(load_svmlight(test_src, query_file=Path(str(test_src) + ".query"), cache=False), test)
        sets[name] = [(train, valid, test)]
    return sets


def _resolve(option: str, train: Path) -> str:
    """``{steps:N}`` -> the batch size that gives about N steps per epoch on ``train`` (the "auto" rule's
    bounds, 4 and 64), so that other step counts than auto's 20 can be candidates; other options as they are."""
    if not (option.startswith("{steps:") and option.endswith("}")):
        return option
    from ltr.data import load_svmlight
    from ltr.train.config import AUTO_BATCH

    n_queries = load_svmlight(train, cache=False).n_queries
    return str(min(AUTO_BATCH["max"], max(AUTO_BATCH["min"], n_queries // int(option[7:-1]))))


def run_one(command: str, options: list[str], files: tuple[Path, Path, Path], seed: int, out: Path) -> dict:
    """One run of `ltr COMMAND`; its test NDCG@10, validation NDCG@10 and wall time."""
    train, valid, test = files
    shutil.rmtree(out, ignore_errors=True)
    argv = [command, "--train", str(train), "--valid", str(valid), "--test", str(test), "--out", str(out), "--quiet"]
    argv += [_resolve(o, train) for o in options] + (["--seed", str(seed)] if seed else [])
    t0 = time.perf_counter()
    code = quiet_ltr(argv)
    wall = time.perf_counter() - t0
    if code != 0:
        raise SystemExit(f"ltr {' '.join(argv)} failed with exit code {code}")
    summary = json.loads((out / "summary.json").read_text())
    shutil.rmtree(out, ignore_errors=True)
    return {"test": summary["metrics"]["test"][NDCG10], "valid": summary["metrics"]["valid"][NDCG10], "wall_s": wall}


def table(results: list[dict], budget: float) -> str:
    """Mean test NDCG@10 per (candidate, data set), time ratio to gbdt_default, mean rank, the pick."""
    names = list(dict.fromkeys(r["candidate"] for r in results))
    sets = list(dict.fromkeys(r["dataset"] for r in results))
    mean = {(c, d): float(np.mean([r["test"] for r in results if r["candidate"] == c and r["dataset"] == d]))
            for c in names for d in sets if any(r["candidate"] == c and r["dataset"] == d for r in results)}
    wall = {(c, d): float(np.mean([r["wall_s"] for r in results if r["candidate"] == c and r["dataset"] == d]))
            for (c, d) in mean}
    complete = [c for c in names if all((c, d) in mean for d in sets)]
    ranks = {c: [] for c in complete}
    for d in sets:
        order = sorted(complete, key=lambda c: -mean[(c, d)])
        for i, c in enumerate(order):
            ranks[c].append(i + 1)
    lines = ["| candidate | " + " | ".join(sets) + " | mean rank | max time / gbdt_default |",
             "|---" * (len(sets) + 3) + "|"]
    ratio = {c: max(wall[(c, d)] / wall[("gbdt_default", d)] for d in sets)
             if all(("gbdt_default", d) in wall for d in sets) else float("nan") for c in complete}
    for c in complete:
        cells = [f"{mean[(c, d)]:.4f}" for d in sets]
        lines.append(f"| {c} | " + " | ".join(cells) + f" | {np.mean(ranks[c]):.2f} | {ratio[c]:.1f} |")
    within = [c for c in complete if CANDIDATES.get(c, ("train",))[0] == "train" and ratio[c] <= budget]
    if within:
        pick = min(within, key=lambda c: np.mean(ranks[c]))
        lines.append(f"\npick: {pick} (best mean rank of the ltr train candidates within {budget:g}x the time of gbdt_default)")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--large", action="store_true", help="add the 10,000-query synthetic set")
    p.add_argument("--only-candidates", default=None, help="comma-separated candidate names")
    p.add_argument("--only-datasets", default=None, help="comma-separated data set names")
    p.add_argument("--folds", type=int, default=None, help="only the first N folds of a data set that has several")
    p.add_argument("--time-budget", type=float, default=3.0)
    p.add_argument("--train-options", default="",
                   help='options put before every `ltr train` candidate\'s own (which win over them), one string: '
                        'e.g. "--query-norm none" reproduces the tables run before query_norm "auto" became the default')
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    only = set(args.only_datasets.split(",")) if args.only_datasets else None
    sets = prepare(args.out / "data", args.large, only)
    if only:
        sets = {k: v for k, v in sets.items() if k in only}
    if args.folds:
        sets = {k: v[: args.folds] for k, v in sets.items()}
    names = args.only_candidates.split(",") if args.only_candidates else list(CANDIDATES)
    store = args.out / "results.json"
    results = json.loads(store.read_text()) if store.exists() else []
    done = {(r["candidate"], r["dataset"], r["fold"], r["seed"]) for r in results}
    for dataset, folds in sets.items():
        for name in names:
            command, options = CANDIDATES[name]
            if command == "train":
                options = [*shlex.split(args.train_options), *options]
            for fold, files in enumerate(folds):
                for seed in range(args.seeds):
                    if (name, dataset, fold, seed) in done:
                        continue
                    r = run_one(command, options, files, seed, args.out / "run")
                    results.append({"candidate": name, "dataset": dataset, "fold": fold, "seed": seed, **r})
                    print(f"{dataset} fold {fold + 1} seed {seed} {name}: test {r['test']:.4f} valid {r['valid']:.4f} "
                          f"{r['wall_s']:.1f} s", file=sys.stderr, flush=True)
                    from ltr.base.io_utils import atomic_write_json

                    atomic_write_json(store, results)
    md = table(results, args.time_budget)
    (args.out / "results.md").write_text(md + "\n")
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
