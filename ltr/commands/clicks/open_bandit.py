"""``ltr clicks open-bandit``: the Open Bandit sample, CTR by position with intervals and an off-policy IPS
estimate of the uniform-random policy's CTR from the Thompson-sampling log."""

from __future__ import annotations

import functools

from ltr.base.checks import COUNT, SEED, number
from ltr.commands import add_force_option, add_json_option, text_stream
from ltr.commands.clicks.report import format_table


def add_parser(sub, fmt) -> None:
    o = sub.add_parser("open-bandit", help="CTR by position with intervals on the Open Bandit sample", formatter_class=fmt,
                       description="Load the Open Bandit Dataset sample (ZOZOTOWN; random and Bernoulli-Thompson-"
                       "sampling logs), print CTR by position with intervals and the position ratio CTR_r / CTR_1, "
                       "and an off-policy IPS / SNIPS estimate of the uniform-random policy's CTR from the bts log "
                       "next to its on-policy CTR.")
    o.add_argument("--data", required=True, metavar="DIR", help="folder with <policy>/<campaign>/<campaign>.csv (e.g. open-bandit-dataset-small)")
    o.add_argument("--policy", default="both", choices=("random", "bts", "both"), help="which logging policy to summarise")
    o.add_argument("--campaign", default="all", help="campaign folder name")
    o.add_argument("--interval", default="wilson", choices=("wilson", "bootstrap"), help="interval for each CTR")
    o.add_argument("--confidence", type=number(above=0, below=1), default=0.95, help="confidence level")
    o.add_argument("--resamples", type=COUNT, default=2000, help="bootstrap resamples (with --interval bootstrap)")
    o.add_argument("--seed", type=SEED, default=0, help="bootstrap seed")
    add_json_option(o, "the numbers")
    add_force_option(o, "--json FILE")
    o.set_defaults(func=run_open_bandit)


def run_open_bandit(args) -> int:
    from ltr.base.checks import input_folder, output_file
    from ltr.clicks.open_bandit import ctr_by_position, ips_value, load_open_bandit
    from ltr.base.io_utils import write_json_report

    say = functools.partial(print, file=text_stream(args))  # JSON on standard output: text to stderr

    input_folder(args.data, "--data")
    if args.json and args.json != "-":
        output_file(args.json, "--json", inputs=[("--data", args.data)], force=args.force)
    policies = ("random", "bts") if args.policy == "both" else (args.policy,)
    out: dict = {}
    logs = {}
    for policy in policies:
        log = load_open_bandit(args.data, policy, args.campaign)
        logs[policy] = log
        rows = ctr_by_position(log, confidence=args.confidence, interval=args.interval,
                               n_resamples=args.resamples, seed=args.seed)
        out[policy] = {"n_rounds": log.n_rounds, "clicks": int(log.click.sum()), "ctr_by_position": rows}
        say(f"{policy}: {log.n_rounds} rounds, {int(log.click.sum())} clicks, {log.n_items} items "
              f"({args.interval} {args.confidence:.0%} intervals)")
        say(format_table(rows, ["position", "impressions", "clicks", "ctr", "low", "high", "relative"], digits=5))
        say()
    if "bts" in logs:
        n_items = logs["bts"].n_items
        est = ips_value(logs["bts"], 1.0 / n_items, confidence=args.confidence)
        out["random_policy_from_bts"] = est
        line = (f"off-policy CTR of the uniform-random policy from the bts log: IPS {est['ips']:.5f} "
                f"[{est['ips_low']:.5f}, {est['ips_high']:.5f}], SNIPS {est['snips']:.5f} "
                f"(max weight {est['max_weight']:.1f}, effective n {est['ess']:.0f})")
        if "random" in logs:
            on = ips_value(logs["random"], 1.0 / n_items, confidence=args.confidence)
            out["random_policy_on_policy"] = on
            line += f"; on-policy CTR of the random log: {on['ips']:.5f} [{on['ips_low']:.5f}, {on['ips_high']:.5f}]"
        say(line)
    if args.json:
        write_json_report(args.json, out)
    return 0
