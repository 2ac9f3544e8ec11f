"""Data layer benchmark: cold vs cached load of a large SVMlight file, and padding of bucketed batches.

1. Writes a synthetic SVMlight file of ``--rows`` rows (default 1,000,000; 136 features, MSLR-like,
   values with at most 4 decimals as in LETOR files) into a temporary folder with
   ``ltr.data.save_svmlight``, then times
   - a cold ``ltr.data.load_svmlight`` (parse with scikit-learn + checks + writing the cache),
   - a cached load (the ``.ltrcache.npz`` beside the file),
   - the content hash of the whole file that keys the cache (its share of both loads),
   - the peer: scikit-learn's ``load_svmlight_file(query_id=False)`` on the same file (raw parse, no
     query structure; ``query_id=True`` grows its qid array one element at a time, which is quadratic,
     so it is timed on a ``--peer-rows`` prefix only, against ``load_svmlight`` on the same prefix, and
     on 100,000 short rows, where that growth dominates).
2. Prints the padding ratio (padded slots / all slots) of the batches of ``BucketBatchSampler`` on
   the default synthetic data: bucketed (the default), random batches (bucket of one batch) and
   fully sorted, for batch sizes 16 and 64.

Run: ``.venv/bin/python benchmarks/bench_data_load.py [--rows N] [--no-peer]``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np


def timed(fn):
    t0 = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - t0


def make_rows(n_rows: int, seed: int = 0):
    from ltr.data import RankingDataset, make_mslr_like

    n_queries = int(n_rows / 120 * 1.1) + 10
    ds = make_mslr_like(n_queries, 136, seed=seed)
    while ds.n_items < n_rows:  # pragma: no cover - the 10% margin is nearly always enough
        n_queries = int(n_queries * 1.2)
        ds = make_mslr_like(n_queries, 136, seed=seed)
    # keep exactly n_rows rows: whole queries, then the first rows of the next one
    keep = int(np.searchsorted(ds.query_offsets, n_rows, side="left"))
    offsets = np.minimum(ds.query_offsets[: keep + 1], n_rows)
    offsets[-1] = n_rows
    return RankingDataset(
        features=ds.features[:n_rows],
        labels=ds.labels[:n_rows],
        query_offsets=offsets,
        query_ids=ds.query_ids[:keep],
        user_ids=ds.user_ids[:keep],
    )


def bench_load(n_rows: int, peer: bool, peer_rows: int) -> None:
    import sklearn.datasets  # noqa: F401  (imported before any timing: ltr.data imports it lazily)

    from ltr.data import load_svmlight, save_svmlight

    ds, t_gen = timed(lambda: make_rows(n_rows))
    print(f"generated {ds.n_items:,} rows x {ds.n_features} features, {ds.n_queries:,} queries in {t_gen:.1f} s")
    with tempfile.TemporaryDirectory(prefix="ltr-bench-") as tmp:
        path = Path(tmp) / "big.txt"
        _, t_save = timed(lambda: save_svmlight(ds, path, progress=False))
        size_mb = path.stat().st_size / 2**20
        print(f"save_svmlight: {t_save:.1f} s ({size_mb:,.0f} MiB, {ds.n_items / t_save:,.0f} rows/s)")

        cold, t_cold = timed(lambda: load_svmlight(path, progress=False))
        assert cold.equals(ds), "round trip failed"
        cache_mb = (Path(str(path) + ".ltrcache.npz")).stat().st_size / 2**20
        cached, t_cached = timed(lambda: load_svmlight(path))
        assert "cache" in cached.meta and cached.equals(ds)
        print(f"cold load (parse + checks + cache write): {t_cold:.2f} s ({ds.n_items / t_cold:,.0f} rows/s)")
        print(f"cached load ({cache_mb:,.0f} MiB .ltrcache.npz): {t_cached:.3f} s")
        print(f"cached / cold speed-up: {t_cold / t_cached:.1f}x")
        # the cache key is a hash of the whole file: its share of both loads
        from ltr.data.cache import content_digest

        _, t_hash = timed(lambda: content_digest(path))
        print(f"content hash of the whole file (the cache key, SHA-1): {t_hash:.3f} s ({size_mb / t_hash:,.0f} MiB/s) "
              f"= {100 * t_hash / t_cold:.1f}% of the cold load, {100 * t_hash / t_cached:.0f}% of the cached load")

        if peer:
            from sklearn.datasets import load_svmlight_file

            _, t_peer = timed(lambda: load_svmlight_file(str(path), dtype=np.float32))
            print(f"peer sklearn load_svmlight_file(query_id=False), whole file: {t_peer:.2f} s "
                  f"(ltr cold / sklearn raw parse = {t_cold / t_peer:.2f}x; ltr cached is {t_peer / t_cached:.1f}x faster)")
            small = ds.subset(np.arange(int(np.searchsorted(ds.query_offsets, peer_rows))))
            prefix = Path(tmp) / "prefix.txt"
            save_svmlight(small, prefix, progress=False)
            _, t_ours = timed(lambda: load_svmlight(prefix, cache=False, progress=False))
            _, t_sk = timed(lambda: load_svmlight_file(str(prefix), dtype=np.float32, query_id=True))
            print(f"prefix of {small.n_items:,} rows with qid: ltr {t_ours:.2f} s, "
                  f"sklearn load_svmlight_file(query_id=True) {t_sk:.2f} s (ratio sklearn/ltr {t_sk / t_ours:.2f}x)")
            # short lines make scikit-learn's per-line growth of its qid array (np.append) dominate
            short = Path(tmp) / "short.txt"
            short.write_text("".join(f"{i % 3} qid:{i // 10} 1:{i % 7} 2:0.5\n" for i in range(100_000)))
            _, t_raw = timed(lambda: load_svmlight_file(str(short)))
            _, t_sk = timed(lambda: load_svmlight_file(str(short), query_id=True))
            _, t_ours = timed(lambda: load_svmlight(short, cache=False, progress=False))
            print(f"100,000 short rows (2 features): sklearn without qid {t_raw:.2f} s, sklearn query_id=True "
                  f"{t_sk:.2f} s, ltr {t_ours:.2f} s (sklearn query_id=True / ltr = {t_sk / t_ours:.1f}x)")


def bench_padding() -> None:
    from ltr.data import BucketBatchSampler, padding_ratio
    from ltr.data.synthetic import DEFAULT, make_mslr_like

    for label, kwargs in (("ltr.data.synthetic.DEFAULT", dict(DEFAULT)), ("make_mslr_like() defaults", {})):
        lengths = make_mslr_like(**kwargs).query_lengths
        print(f"padding ratio on {label} ({len(lengths)} queries, mean length {lengths.mean():.1f}):")
        for batch_size in (16, 64):
            bucketed = padding_ratio(lengths, BucketBatchSampler(lengths, batch_size, seed=0))
            random_ = padding_ratio(lengths, BucketBatchSampler(lengths, batch_size, seed=0, bucket_size=batch_size))
            sorted_ = padding_ratio(lengths, BucketBatchSampler(lengths, batch_size, shuffle=False))
            print(f"  batch {batch_size:3d}: bucketed {bucketed:.3f}   random {random_:.3f}   "
                  f"sorted {sorted_:.3f}   (random / bucketed = {random_ / max(bucketed, 1e-12):.1f}x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of the synthetic file (default 1,000,000)")
    parser.add_argument("--no-peer", action="store_true", help="skip the scikit-learn peer timings")
    parser.add_argument("--peer-rows", type=int, default=50_000, help="rows of the prefix for the query_id=True peer")
    args = parser.parse_args()
    print(f"cpus: {os.cpu_count()}, load average: {os.getloadavg()[0]:.1f}")
    bench_padding()
    bench_load(args.rows, not args.no_peer, args.peer_rows)


if __name__ == "__main__":
    main()
