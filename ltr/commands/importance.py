"""``ltr importance``: permutation importance of every feature for any trained model.

Each feature's column of ``--data`` is shuffled across rows (``--repeats`` times), the model scores
the data again, and the drop of ``--metric`` (NDCG@10 by default, the toolkit's conventions) is
averaged over queries, with a bootstrap interval over queries (:mod:`ltr.models.importance`). Works
for folders of ``ltr train`` and ``ltr gbdt`` alike; LightGBM run folders also hold LightGBM's own
gain and split importances (``importance.json``).
"""

from __future__ import annotations

import functools
from pathlib import Path

from ltr.base.checks import COUNT, SEED, integer, number
from ltr.commands import add_force_option, add_json_option, text_stream
from ltr.data.files import add_data_options, add_format_options
from ltr.base.errors import LtrError


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "importance",
        help="permutation importance of each feature: drop of NDCG@10 with a bootstrap interval over queries",
        description="Shuffle one feature at a time across the rows of --data, score with the model of --model "
        "(from ltr train or ltr gbdt) and report the drop of --metric, mean over queries with a bootstrap "
        "interval over queries. Prints the features by importance; --out also writes "
        "permutation_importance.json and permutation_importance.png.",
    )
    p.add_argument("--model", required=True, metavar="DIR", help="run folder holding model.json (from ltr train or ltr gbdt)")
    p.add_argument("--data", required=True, metavar="FILE", help="labelled data to measure on (e.g. the validation file)")
    p.add_argument("--metric", default="ndcg@10", help="ranking metric whose drop is measured")
    p.add_argument("--preset", default=None, help="metric conventions preset: trec_eval, sklearn, lightgbm, ranx (default: the toolkit's own)")
    p.add_argument("--repeats", type=COUNT, default=5, help="shuffles per feature (their mean drop is used)")
    p.add_argument("--seed", type=SEED, default=0, help="seed of the shuffles and of the bootstrap")
    p.add_argument("--confidence", type=number(above=0, below=1), default=0.95, help="level of the bootstrap interval")
    p.add_argument("--top", type=integer(min=0), default=20, help="features printed and drawn (0: all)")
    p.add_argument("--out", default=None, metavar="DIR", help="also write permutation_importance.json and .png into this folder")
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto (neural models only)")
    add_json_option(p, "the importances of every feature")
    add_force_option(p, "--json FILE and the files of --out")
    add_format_options(p)
    add_data_options(p)
    p.set_defaults(func=run)


def run(args) -> int:
    import dataclasses

    from ltr.data.files import data_options, format_options, is_labelled, load_data_file
    from ltr.base.io_utils import write_json_report
    from ltr.study.report_table import format_interval, markdown_table
    from ltr.models.importance import permutation_importance, write_importance
    from ltr.models.folder import check_width, load_scorer, model_feature_names
    from ltr.runs.scoring import check_metric_names

    from ltr.base.checks import output_folder
    from ltr.commands import check_output_files

    inputs = [("--model", args.model), ("--data", args.data)]
    targets = [("--json", args.json)]
    if args.out:
        output_folder(args.out, "--out", inputs=inputs)
        targets += [("--out", Path(args.out) / f"permutation_importance.{ext}") for ext in ("json", "png")]
    check_output_files(args, targets, inputs)
    if args.repeats < 1:
        raise LtrError(f"--repeats must be >= 1, got {args.repeats}")
    if not 0.0 < args.confidence < 1.0:
        raise LtrError(f"--confidence must be in (0, 1), got {args.confidence}")
    if args.metric.split("@")[0] in ("logloss", "brier", "auc"):
        raise LtrError(f"--metric {args.metric}: permutation importance here uses ranking metrics (e.g. ndcg@10, map, mrr)")
    check_metric_names([args.metric], args.preset)
    score, n_features = load_scorer(args.model, args.device)
    # no width given: a narrower file must be refused, not zero-padded to the model's width; a Parquet
    # file's columns are matched by the model's feature names, as ltr predict does (never by position)
    options = dataclasses.replace(data_options(args), labels="optional")  # a missing label column: said below, in words
    ds = load_data_file(args.data, "data", None, options, feature_names=model_feature_names(args.model), **format_options(args, "data"))
    check_width(ds, n_features, "--data", args.data)
    if not is_labelled(ds):
        raise LtrError(f"--data {args.data}: no label column {args.label_column!r}; permutation importance measures the drop of "
                       f"{args.metric}, which needs labels (set --label-column; a GBDT run folder's importance.json holds the "
                       "engine's own importances, which need no data)")
    offsets = ds.query_offsets  # a listwise model (the context-aware scorer) scores whole queries
    imp = permutation_importance(lambda x: score(x, offsets), ds, metric=args.metric, n_repeats=args.repeats, seed=args.seed,
                                 confidence=args.confidence, preset=args.preset)
    imp["model"], imp["data"] = str(args.model), str(args.data)
    say = functools.partial(print, file=text_stream(args))  # JSON on standard output: the text to stderr
    order = sorted(range(len(imp["feature"])), key=lambda i: -imp["importance"][i])
    top = order if args.top <= 0 else order[: args.top]
    say(f"permutation importance on {args.data}: drop of {imp['metric']} (base {imp['base']:.4f}, "
          f"{imp['n_queries']} queries, {imp['n_repeats']} shuffles per feature; "
          f"[{imp['confidence']:.0%} bootstrap interval over queries])")
    say()
    rows = [[rank, imp["feature"][i], format_interval(imp["importance"][i], imp["low"][i], imp["high"][i])]
            for rank, i in enumerate(top, 1)]
    say(markdown_table(["rank", "feature", "drop"], rows, align="llr"))
    if args.out:
        json_path, png_path = write_importance(Path(args.out), imp, stem="permutation_importance", top=len(top))
        say(f"\nwrote {json_path} and {png_path}")
    if args.json:
        write_json_report(args.json, imp)
    return 0
