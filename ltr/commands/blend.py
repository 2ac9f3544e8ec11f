"""``ltr blend``: combine trained models (GBDT and neural, any mix) with weights fitted on validation.

Each member's scores of ``--valid`` are standardised within each query (z-score; a query whose
scores are all equal gets zeros) and the non-negative weights summing to 1 that maximise
``--metric`` on ``--valid`` are found by a deterministic search (:mod:`ltr.models.blend`; ``--weights
equal`` takes 1/M each, ``--weights cv`` shrinks the searched weights toward equal weights by an
amount chosen by cross-validation over the validation queries, the default; ``--weights held-out``
keeps that blend only when it beats the best member alone on held-out validation queries, else the
best member alone). The
output is a model folder holding ``blend.json`` (members, weights, standardisation, metric and its
validation value, the validation data's fingerprint) and ``summary.json``; ``ltr predict``,
``ltr importance`` and ``ltr clicks`` take it as ``--model`` like any run folder, and ``ltr eval``
scores the run file ``ltr predict`` writes.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from ltr.data.files import add_data_options, add_format_options
from ltr.base.errors import LtrError
from ltr.models.blend import DEFAULT_WEIGHT_RULE, WEIGHT_RULES  # numpy only: the parser stays light

SPLITS = ("valid", "test")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "blend",
        help="combine trained models with weights fitted on a validation set",
        description="Blend model folders written by `ltr train` and `ltr gbdt`: each member's scores are "
        "standardised within each query and weighted (non-negative weights summing to 1) to maximise "
        "--metric on --valid. Writes a model folder (blend.json, summary.json) that `ltr predict` and "
        "`ltr importance` accept as --model.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--models", required=True, nargs="+", metavar="RUN", help="run folders holding model.json (ltr train, ltr gbdt)")
    p.add_argument("--valid", required=True, metavar="FILE", help="validation data the weights are fitted on (SVMlight, Parquet or a store)")
    p.add_argument("--test", default=None, metavar="FILE", help="also report the blend's and each member's metrics on this data")
    p.add_argument("--out", required=True, metavar="DIR", help="blend folder to write")
    p.add_argument("--weights", default=DEFAULT_WEIGHT_RULE, choices=WEIGHT_RULES,
                   help="search: the weights that maximise --metric on --valid; equal: 1/M each (nothing fitted, "
                   "--valid only measured; steadier when the validation set is small); cv: the searched weights "
                   "shrunk toward equal weights by lambda in {0, .25, .5, .75, 1}, chosen by 5-fold cross-validation "
                   "over the --valid queries; held-out: the cv blend if it beats the best member alone on the --valid "
                   "queries its weights were not fitted on (one-sided paired t-test, p < 0.05), else that member alone "
                   "(weight 1)")
    p.add_argument("--metric", default="ndcg@10", help="ranking metric the weights maximise, with the toolkit's conventions unless --preset")
    p.add_argument("--preset", default=None, help="metric conventions preset: trec_eval, sklearn, lightgbm, ranx (default: the toolkit's own)")
    p.add_argument("--copy-members", action="store_true",
                   help="copy the members' model files into DIR/members/ (default: refer to the member folders by a path relative to DIR)")
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto (neural members only)")
    p.add_argument("--force", action="store_true", help="replace DIR if it is a run folder made by ltr")
    add_format_options(p, SPLITS)
    add_data_options(p)
    p.set_defaults(func=run)


def _load_members(paths, device: str):
    """Each member's scorer, feature count, kind and feature names; one feature count for all."""
    from ltr.base.checks import input_folder, read_json_object
    from ltr.models.blend import is_blend
    from ltr.models.folder import load_scorer, model_feature_names

    members = []
    for path in paths:
        folder = input_folder(path, "--models")
        if is_blend(folder):
            raise LtrError(f"--models {path}: is a blend folder; give the models it blends instead")
        if not (folder / "model.json").exists():
            raise LtrError(f"--models {path}: no model.json (not a model folder written by ltr train or ltr gbdt)")
        score, n_features = load_scorer(folder, device, "--models")
        kind = read_json_object(folder / "model.json").get("type", "neural")
        members.append({"folder": folder, "score": score, "n_features": n_features, "kind": kind,
                        "feature_names": model_feature_names(folder)})
    first = members[0]
    for m in members[1:]:
        if m["n_features"] != first["n_features"]:
            raise LtrError(f"--models: {first['folder']} was trained on {first['n_features']} features, {m['folder']} on "
                           f"{m['n_features']}; blend members must be trained on the same features")
        if None not in (m["feature_names"], first["feature_names"]) and m["feature_names"] != first["feature_names"]:
            raise LtrError(f"--models: {first['folder']} and {m['folder']} were trained on different feature names")
    return members


def _evaluate(scores, ds, metric: str, preset) -> tuple[str, float]:
    from ltr.runs.scoring import evaluate_scores

    ev = evaluate_scores(scores, ds, [metric], preset)
    return ev.names[metric], float(ev.mean[ev.names[metric]])


def _test_report(members, fit, test, args) -> dict:
    """The metric on the test data: the blend, equal weights (as the search's start point), each member."""
    from ltr.models.blend import blend_scorer, equal_weights

    report = {}
    for name, weights in (("blend", fit.weights), ("equal_weights", equal_weights(len(members)))):
        scores = blend_scorer([m["score"] for m in members], weights)(test.features, test.query_offsets)
        report[name] = _evaluate(scores, test, args.metric, args.preset)[1]
    report["members"] = {str(m["folder"]): _evaluate(m["score"](test.features, test.query_offsets), test, args.metric,
                                                     args.preset)[1] for m in members}
    return report


def run(args) -> int:
    from ltr.data.files import data_facts, data_options, format_options, load_data_file
    from ltr.base.io_utils import atomic_write_json
    from ltr.models.blend import fit_weights, write_blend
    from ltr.models.folder import check_width
    from ltr.runs.folder import check_destination, run_folder, versions
    from ltr.runs.scoring import check_metric_names
    from ltr.train.trainer import data_fingerprint

    t0 = time.time()
    if len(set(Path(p).resolve() for p in args.models)) != len(args.models):
        raise LtrError("--models names the same folder twice")
    check_metric_names([args.metric], args.preset)
    inputs = [("--models", p) for p in args.models] + [("--valid", args.valid), ("--test", args.test)]
    check_destination(args.out, overwrite=args.force, inputs=inputs)
    members = _load_members(args.models, args.device)
    width, names = members[0]["n_features"], next((m["feature_names"] for m in members if m["feature_names"]), None)
    splits = {}
    for split in SPLITS:
        path = getattr(args, split)
        ds = load_data_file(path, split, None, data_options(args), feature_names=names, **format_options(args, split, SPLITS))
        if ds is not None:
            check_width(ds, width, f"--{split}", path)
        splits[split] = ds
    valid = splits["valid"]
    valid_scores = [m["score"](valid.features, valid.query_offsets) for m in members]
    fit = fit_weights(valid_scores, valid, args.metric, args.preset, rule=args.weights)
    for m, value in zip(members, fit.member_values):
        m["valid_value"] = value
    report = {"valid": {"blend": fit.value, "equal_weights": fit.equal_value,
                        "members": dict(zip((str(m["folder"]) for m in members), fit.member_values))}}
    if splits["test"] is not None:
        report["test"] = _test_report(members, fit, splits["test"], args)
    valid_facts = {**data_facts(args.valid, valid), "fingerprint": data_fingerprint(valid)}
    with run_folder(args.out, overwrite=args.force, kind="blend", inputs=inputs) as tmp:
        write_blend(tmp, Path(args.out), members, fit, valid=valid_facts, n_features=width, feature_names=names,
                    preset=args.preset, copy=args.copy_members)
        atomic_write_json(tmp / "summary.json", {
            "kind": "blend", "arguments": {k: v for k, v in vars(args).items() if k != "func"},
            "metric": fit.metric, "weights": fit.weights, "metrics": report, "versions": versions(),
            "wall_time_s": time.time() - t0})
    _print_report(args.out, members, fit, report)
    return 0


def _print_report(out, members, fit, report) -> None:
    print(f"blend folder: {out}")
    if fit.search.get("rule") == "equal":
        print(f"metric: {fit.metric} (equal weights, measured on the validation set)")
    elif fit.search.get("rule") == "cv":
        cv = fit.search["cv"]
        print(f"metric: {fit.metric} (searched weights shrunk toward equal by lambda {fit.shrinkage:g}, chosen by "
              f"{cv['folds']}-fold cross-validation over the validation queries)")
        print("cross-validated\t" + "  ".join(f"lambda {lam:g}: {v:.6f}" for lam, v in zip(cv["lambdas"], cv["values"])))
    elif fit.search.get("rule") == "held-out":
        _print_held_out(fit, members)
    else:
        print(f"metric: {fit.metric} ({fit.evaluations} weight vectors evaluated on the validation set)")
    for m, w in zip(members, fit.weights):
        test = report.get("test", {}).get("members", {}).get(str(m["folder"]))
        print(f"  weight {w:.3f}  {m['folder']} ({m['kind']}): valid {m['valid_value']:.6f}"
              + ("" if test is None else f", test {test:.6f}"))
    print(f"valid\tblend\t{fit.value:.6f}")
    print(f"valid\tequal weights\t{fit.equal_value:.6f}")
    if "test" in report:
        print(f"test\tblend\t{report['test']['blend']:.6f}")
        print(f"test\tequal weights\t{report['test']['equal_weights']:.6f}")


def _print_held_out(fit, members) -> None:
    """Rule held-out: what was chosen, and the held-out comparison that chose it."""
    held, cv = fit.search["held_out"], fit.search["cv"]
    best = members[held["best_member"]]["folder"]
    verdict = ("the cross-validated blend" if held["chosen"] == "blend" else f"the best member alone, {best}")
    print(f"metric: {fit.metric} ({verdict}: the cv blend (lambda {cv['lambda']:g}) gains {held['mean_gain']:+.6f} over {best} "
          f"on {held['queries']} validation queries its weights were not fitted on, one-sided paired t p = {held['p']:.3g}; "
          f"a blend is kept when p < {held['alpha']:g})")
