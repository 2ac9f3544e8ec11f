"""Scoring speed of every model kind: ``ltr predict``'s scoring path, the ONNX graph of ``ltr export``
in onnxruntime, and each library's own predict, side by side in one process.

    python benchmarks/bench_serving.py                  # lists of 100 and 1,000 items
    python benchmarks/bench_serving.py --rounds 50 --batch-rows 5000

Models, made once and not timed: LightGBM ``lambdarank``, XGBoost ``rank:ndcg`` and CatBoost
``YetiRank`` with ``--rounds`` trees each (``ltr gbdt``'s defaults otherwise) trained on synthetic
MSLR-like data (136 features), the MLP of ``ltr train``'s default shape (hidden 128, 64; its weights do
not change its speed, so it is not trained), and the equal-weight blend of the four (``ltr blend
--weights equal``). Each is exported with ``ltr export --format onnx``.

For each list length L (100 and 1,000), on lists sampled from the test rows:

- **rows/s per core**: a batch of ``--batch-rows`` rows (``batch-rows / L`` full lists), scored
  ``--repeats`` times; rows divided by the process's CPU seconds (all its threads), the best run. So
  a library that used two cores is not credited for it; every library is also asked for one thread.
- **latency**: one query of L items per call, median wall time over ``--calls`` calls.

Paths: ``ltr predict`` is :func:`ltr.models.folder.load_scorer`'s function on rows ``[N, F]`` and the
query offsets (what ``ltr predict`` calls after reading the file; the reading is not timed); ``onnx``
is ``InferenceSession.run`` on ``[B, L, F]`` with a full mask (one intra-op thread); ``own`` is the
library's predict on rows ``[N, F]``: LightGBM ``Booster.predict``, XGBoost ``inplace_predict``
(margin), CatBoost ``predict(RawFormulaVal)``, the torch module under ``no_grad``. Printed beside
them: onnx / own per row (the issue's target: a GBDT's graph within 2x of its library) and, for the
blend, its graph's time against the sum of its members' graphs.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before any library starts its thread pool: one core each
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("LTR_THREADS", "1")

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ENGINES = {"lightgbm": "lambdarank", "xgboost": "rank:ndcg", "catboost": "YetiRank"}


def make_models(root: Path, rounds: int, say) -> tuple[list[str], object]:
    """Train the GBDTs, save the MLP and the blend, export each; returns the kinds made and the test rows."""
    import torch

    from ltr.cli import main
    from ltr.data import save_svmlight
    from ltr.data.synthetic import make_synthetic_splits
    from ltr.gbdt.engines import save_gbdt, train_gbdt
    from ltr.train.models import build_model, save_model

    train, valid, test = make_synthetic_splits(300, 136, seed=0, mean_list_length=40)
    save_svmlight(valid, root / "valid.txt")
    kinds = []
    for engine, objective in ENGINES.items():
        try:
            model, info = train_gbdt(engine, train, None, {}, objective=objective, num_boost_round=rounds,
                                     early_stopping_rounds=None, threads=1)
        except Exception as exc:  # noqa: BLE001 - an engine that is not installed is left out, and said so
            say(f"# {engine}: left out ({type(exc).__name__}: {exc})")
            continue
        save_gbdt(engine, model, root / engine, info, n_features=136)
        kinds.append(engine)
    torch.manual_seed(0)
    save_model(build_model({"type": "mlp", "n_features": 136, "hidden": [128, 64]}), root / "mlp")
    kinds.append("mlp")
    quiet = open(os.devnull, "w")
    stdout, sys.stdout = sys.stdout, quiet
    try:
        assert main(["blend", "--models", *(str(root / k) for k in kinds), "--valid", str(root / "valid.txt"),
                     "--weights", "equal", "--out", str(root / "blend")]) == 0
        for kind in [*kinds, "blend"]:
            assert main(["export", "--model", str(root / kind), "--format", "onnx", "--out", str(root / f"{kind}.onnx")]) == 0
    finally:
        sys.stdout = stdout
    return [*kinds, "blend"], test.features


def own_predict(kind: str, folder: Path):
    """The library's own predict on rows [N, F] (None for the blend, which has no library)."""
    if kind == "blend":
        return None
    if kind == "mlp":
        import torch

        from ltr.train.models import load_model

        model = load_model(folder).eval()

        def net(rows):
            with torch.no_grad():
                return model(torch.from_numpy(rows)[None], mask=torch.ones(1, len(rows), dtype=torch.bool))[0].numpy()

        return net
    from ltr.gbdt.engines import load_gbdt

    model, _ = load_gbdt(folder, kind)
    if kind == "lightgbm":
        return lambda rows: model.predict(rows, num_threads=1)
    if kind == "xgboost":
        model.set_param({"nthread": 1})
        return lambda rows: model.inplace_predict(rows, predict_type="margin")
    return lambda rows: model.predict(rows, prediction_type="RawFormulaVal", thread_count=1)


def paths(kind: str, root: Path) -> dict:
    """``{name: score(lists [B, L, F]) -> anything}`` for the three paths of one model."""
    import onnxruntime as ort

    from ltr.models.folder import load_scorer

    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = 1, 1
    session = ort.InferenceSession(str(root / f"{kind}.onnx"), options, providers=["CPUExecutionProvider"])
    score, _ = load_scorer(root / kind)
    own = own_predict(kind, root / kind)

    def flat(lists):
        b, length, f = lists.shape
        return lists.reshape(b * length, f), np.arange(0, b * length + 1, length)

    out = {"ltr predict": lambda lists: score(*flat(lists)),
           "onnx": lambda lists: session.run(["scores"], {"features": lists, "mask": np.ones(lists.shape[:2], bool)})}
    if own is not None:
        out["own"] = lambda lists: own(flat(lists)[0])
    return out


def rows_per_cpu_second(fn, lists, repeats: int) -> float:
    fn(lists)  # warm: first-call set-up is not scoring
    best = 0.0
    for _ in range(repeats):
        t0 = time.process_time()
        fn(lists)
        best = max(best, lists.shape[0] * lists.shape[1] / max(time.process_time() - t0, 1e-9))
    return best


def latency_ms(fn, one_lists, calls: int) -> float:
    fn(one_lists[0])
    times = []
    for k in range(calls):
        t0 = time.perf_counter()
        fn(one_lists[k % len(one_lists)])
        times.append(time.perf_counter() - t0)
    return 1000 * statistics.median(times)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=100, help="trees of each GBDT")
    parser.add_argument("--lengths", default="100,1000", help="list lengths")
    parser.add_argument("--batch-rows", type=int, default=20000, help="rows of the batch of the throughput runs")
    parser.add_argument("--repeats", type=int, default=3, help="throughput runs (the best is kept)")
    parser.add_argument("--calls", type=int, default=30, help="single-query calls of the latency runs")
    args = parser.parse_args(argv)
    say = print
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        kinds, rows = make_models(root, args.rounds, say)
        rng = np.random.default_rng(0)
        say(f"# load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; {args.rounds} trees per GBDT; "
            f"batch of {args.batch_rows} rows; latency: median of {args.calls} single-query calls")
        say("| model | L | ltr predict rows/s/core | onnx rows/s/core | own rows/s/core | onnx / own per row "
            "| ltr predict ms/query | onnx ms/query | own ms/query |")
        say("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        per_row: dict[tuple[str, int], float] = {}
        for length in (int(x) for x in args.lengths.split(",")):
            batch = rows[rng.integers(0, len(rows), (max(1, args.batch_rows // length), length))]
            singles = [batch[k : k + 1] for k in range(min(len(batch), 8))]
            for kind in kinds:
                fns = paths(kind, root)
                speed = {name: rows_per_cpu_second(fn, batch, args.repeats) for name, fn in fns.items()}
                wait = {name: latency_ms(fn, singles, args.calls) for name, fn in fns.items()}
                per_row[(kind, length)] = 1 / speed["onnx"]
                ratio = f"{speed['own'] / speed['onnx']:.2f}" if "own" in speed else "-"
                cells = [f"{speed.get(n, 0):,.0f}" if n in speed else "-" for n in ("ltr predict", "onnx", "own")]
                times = [f"{wait[n]:.3f}" if n in wait else "-" for n in ("ltr predict", "onnx", "own")]
                say(f"| {kind} | {length:,} | {' | '.join(cells)} | {ratio} | {' | '.join(times)} |")
        say("")
        for length in sorted({k[1] for k in per_row}):
            members = sum(v for (k, n), v in per_row.items() if n == length and k != "blend")
            say(f"# L={length}: the blend's graph takes {per_row[('blend', length)] / members:.2f}x the sum of its "
                f"members' graphs per row")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
