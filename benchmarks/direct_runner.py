"""Direct runner throughput: watermark + 60 s tumbling windows + per-key sum.

N rows over 100 keys with out-of-order timestamps (up to 5 s), a 5-second
watermark delay, one `TestStream` epoch per 100,000 rows. Compared, side by
side in one run, with the invariant checks on and off, and with a plain
Python loop computing the same sums (the floor for any Python runner).

    .venv/bin/python benchmarks/direct_runner.py --rows 1000000
"""

from __future__ import annotations

import argparse
import random
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import sparkbeam as sb

EPOCH_ROWS = 100_000
START = datetime(2026, 4, 1)


def make_rows(n: int, seed: int = 1) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    step = timedelta(milliseconds=1)
    return [
        {
            "key": f"k{i % 100}",
            "value": i % 1000,
            "event_time": START + step * i - timedelta(microseconds=rng.randrange(5_000_000)),
        }
        for i in range(n)
    ]


def sparkbeam_sums(rows: list[dict[str, Any]], check: bool) -> int:
    stream = sb.TestStream(schema={"key": str, "value": int, "event_time": datetime})
    for start in range(0, len(rows), EPOCH_ROWS):
        stream.add_epoch(rows[start : start + EPOCH_ROWS])
    p = sb.Pipeline(runner=sb.DirectRunner(check_invariants=check))
    sums = (
        (p | stream)
        .with_watermark("event_time", "5 seconds")
        .tumble("event_time", "60 seconds")
        .combine_per_key(["key", "window_start", "window_end"], total=sb.Sum("value"))
    )
    return len(p.run().collect(sums))


def plain_python(rows: list[dict[str, Any]]) -> int:
    size = timedelta(seconds=60)
    sums: dict[tuple[str, datetime], int] = defaultdict(int)
    for row in rows:
        t = row["event_time"]
        start = t - (t - datetime(1970, 1, 1)) % size
        sums[(row["key"], start)] += row["value"]
    return len(sums)


def measure(fn: Callable[[], int]) -> tuple[float, int]:
    start = time.perf_counter()
    groups = fn()
    return time.perf_counter() - start, groups


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    rows = make_rows(args.rows)
    jobs: dict[str, Callable[[], int]] = {
        "plain Python loop": lambda: plain_python(rows),
        "direct, checks on": lambda: sparkbeam_sums(rows, True),
        "direct, checks off": lambda: sparkbeam_sums(rows, False),
    }
    results = {name: measure(job) for name, job in jobs.items()}
    floor = results["plain Python loop"][0]
    print(f"Direct runner, watermark + tumble 60 s + per-key sum, {args.rows:,} rows")
    print(f"{'job':<20} {'seconds':>8} {'rows/s':>12} {'groups':>8} {'vs plain loop':>14}")
    for name, (seconds, groups) in results.items():
        print(
            f"{name:<20} {seconds:>8.2f} {args.rows / seconds:>12,.0f} {groups:>8} "
            f"{seconds / floor:>13.2f}x"
        )


if __name__ == "__main__":
    main()
