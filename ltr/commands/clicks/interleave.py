"""``ltr clicks interleave``: team-draft or probabilistic interleaving of two rankers on simulated users."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from ltr.base.checks import COUNT, SEED, number
from ltr.commands import add_force_option, add_json_option, text_stream
from ltr.commands.clicks.reading import model_scores, read_scores
from ltr.commands.clicks.report import ndcg10
from ltr.data.files import add_data_options, add_format_options, data_options, format_options, load_data_file


def add_parser(sub, fmt) -> None:
    i = sub.add_parser("interleave", help="team-draft or probabilistic interleaving of two rankers on simulated users", formatter_class=fmt,
                       description="Interleave the rankings of --a and --b by team draft (or --method probabilistic: "
                       "softmax rankers, each click's credit marginalised over the rankers that could have placed it) on "
                       "every query of --data, simulate clicks on the interleaved lists (--model), credit each ranker with "
                       "the clicks on its picks, and report wins, ties, the preference for A with a sign test (a t-test of "
                       "the mean outcome for probabilistic), the sessions needed to detect the measured preference, and "
                       "both rankers' NDCG@10 on the labels.")
    i.add_argument("--data", required=True, metavar="FILE", help="labelled data: SVMlight/LETOR file, Parquet file or folder, or a store")
    add_format_options(i)
    i.add_argument("--a", required=True, metavar="PATH", help="ranker A: a model folder, or a scores file (one number per row of --data)")
    i.add_argument("--b", required=True, metavar="PATH", help="ranker B: a model folder, or a scores file (one number per row of --data)")
    i.add_argument("--method", default="team-draft", choices=("team-draft", "probabilistic"),
                   help="team draft, or probabilistic interleaving (softmax rankers, outcomes marginalised over the assignments)")
    i.add_argument("--tau", type=number(above=0), default=3.0, help="probabilistic: softmax ranker P(d) proportional to rank^-tau")
    i.add_argument("--model", default="pbm", choices=("pbm", "cascade", "dbn", "ubm", "trust"), help="click model of the simulated users")
    i.add_argument("--eta", type=number(min=0), default=1.0, help="position-bias strength (pbm, trust, ubm)")
    i.add_argument("--eps", type=number(min=0, max=1), default=0.1, help="click probability of an examined irrelevant item")
    i.add_argument("--top-k", type=COUNT, default=10, help="length of the interleaved list")
    i.add_argument("--sessions-per-query", type=COUNT, default=20, help="simulated sessions per query")
    i.add_argument("--seed", type=SEED, default=0, help="random seed")
    add_json_option(i, "the numbers")
    add_force_option(i, "--json FILE")
    add_data_options(i)
    i.set_defaults(func=run_interleave)


def _ranker_scores(path: str, ds, option: str, data_path: str) -> np.ndarray:
    if Path(path).is_dir():
        return model_scores(path, ds, option, data_path)
    return read_scores(path, ds.n_items, option)


def run_interleave(args) -> int:
    from ltr.base.checks import output_file
    from ltr.clicks.interleaving import interleave_sessions, probabilistic_sessions, sessions_to_detect, sessions_to_detect_mean
    from ltr.base.io_utils import write_json_report

    say = functools.partial(print, file=text_stream(args))  # JSON on standard output: text to stderr
    if args.json and args.json != "-":
        output_file(args.json, "--json", inputs=[("--data", args.data), ("--a", args.a), ("--b", args.b)], force=args.force)
    ds = load_data_file(args.data, "data", None, data_options(args), **format_options(args, "data"))
    a = _ranker_scores(args.a, ds, "--a", args.data)
    b = _ranker_scores(args.b, ds, "--b", args.data)
    common = {"sessions_per_query": args.sessions_per_query, "top_k": args.top_k, "model": args.model, "eta": args.eta,
              "eps": args.eps, "seed": args.seed}
    if args.method == "probabilistic":
        res = probabilistic_sessions(ds.labels, ds.query_offsets, a, b, tau=args.tau, **common)
        out = {"method": "probabilistic", "tau": args.tau, **res.summary()}
        if res.mean != 0:
            out["sessions_to_detect"] = sessions_to_detect_mean(res.outcome)
    else:
        res = interleave_sessions(ds.labels, ds.query_offsets, a, b, **common)
        out = {"method": "team-draft", **res.summary()}
        decided = out["wins_a"] + out["wins_b"]
        if decided and out["wins_a"] != out["wins_b"]:
            out["sessions_to_detect"] = sessions_to_detect(out["wins_a"] / decided, out["ties"] / out["sessions"])
    for name, scores in (("a", a), ("b", b)):
        out[f"ndcg@10_{name}"] = ndcg10(scores, ds)
    test = "t-test of the mean outcome" if args.method == "probabilistic" else "sign test"
    say(f"{args.method} interleaving, {out['sessions']} {args.model} sessions: A wins {out['wins_a']}, B wins "
        f"{out['wins_b']}, ties {out['ties']}; preference for A {out['preference_a']:.4f} ({test} p = {out['p_value']:.3g})")
    if "sessions_to_detect" in out:
        say(f"sessions to detect this preference (5% two-sided, 80% power): {out['sessions_to_detect']:.0f}")
    say(f"NDCG@10 on the labels: A {out['ndcg@10_a']:.4f}, B {out['ndcg@10_b']:.4f}")
    if args.json:
        write_json_report(args.json, out)
    return 0
