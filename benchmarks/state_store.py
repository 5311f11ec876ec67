"""Spark's two state store providers on a plain windowed aggregation, side by side.

The runner sets RocksDB only for queries with a `transformWithState` (which
needs it); the others keep the session's provider. Which is faster where
both are exact? The pipeline of `spark_streaming.py` (watermark 5 s,
60-second tumbling windows, per-key sum, N rows in E epochs fed one at a
time), two ways, each under both providers, alternating, median of R:

- `hand-written`: `withWatermark` + `groupBy(key, window)` + sum.
- `sparkbeam`: the same through the Spark runner (its late-row filter is a
  second stateful operator), the provider set on the session.

Both providers must give the same rows (checked); `sparkbeam`'s sums are
also checked against the direct runner's over the same epochs, after the
rounds (the hand-written query follows Spark's own rule for late rows: not
checked against it). The ratio is RocksDB's time over HDFS's (Spark's
default).

    .venv/bin/python benchmarks/state_store.py --rows 200000 --epochs 5 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from checks import Sums
from pyspark.sql import DataFrame, SparkSession
from spark_streaming import (
    check_variants,
    direct_sums,
    hand_written,
    make_epochs,
    session,
    sums,
    write_files,
)

import sparkbeam as sb
from sparkbeam.runners.spark.plan.settings import STATE_STORE

PROVIDERS = {
    "HDFS": "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
    "RocksDB": STATE_STORE[1],
}

Rows = list[tuple[Any, ...]]


def rounded(values: Any) -> tuple[Any, ...]:
    """A row's values, sums rounded (doubles added in another order differ in the last bits)."""
    return tuple(round(v, 6) if isinstance(v, float) else v for v in values)


def run_hand_written(spark: SparkSession, files: list[str]) -> tuple[float, Rows]:
    work = tempfile.mkdtemp(prefix="sparkbeam-bench-")
    source = os.path.join(work, "in")
    os.makedirs(source)
    found: Rows = []

    def sink(batch: DataFrame, batch_id: int) -> None:
        found.extend(rounded(row) for row in batch.collect())

    start = time.perf_counter()
    query = (
        hand_written(spark, source, None)
        .writeStream.foreachBatch(sink)
        .outputMode("append")
        .option("checkpointLocation", os.path.join(work, "checkpoint"))
        .start()
    )
    for path in files:
        shutil.copy(path, os.path.join(source, os.path.basename(path)))
        query.processAllAvailable()
    query.stop()
    seconds = time.perf_counter() - start
    with open(os.path.join(work, "checkpoint", "offsets", "0")) as log:
        conf = json.loads(log.read().splitlines()[1])["conf"]
    assert conf[STATE_STORE[0]] == spark.conf.get(STATE_STORE[0]), conf  # kept in the checkpoint
    shutil.rmtree(work, ignore_errors=True)
    return seconds, sorted(found, key=repr)


def run_sparkbeam(
    spark: SparkSession, epochs: list[list[dict[str, Any]]], latest_sums: dict[str, Sums]
) -> tuple[float, Rows]:
    stream = sb.TestStream(schema={"key": str, "amount": float, "event_time": datetime})
    for rows in epochs:
        stream.add_epoch(rows)
    start = time.perf_counter()
    p = sb.Pipeline(runner=sb.SparkRunner(spark=spark))
    totals = (
        (p | stream)
        .with_watermark("event_time", "5 seconds")
        .tumble("event_time", "60 seconds")
        .combine_per_key(["key", "window_start", "window_end"], total=sb.Sum("amount"))
    )
    rows = p.run().collect(totals)
    seconds = time.perf_counter() - start
    latest_sums["sparkbeam"] = sums(rows)
    return seconds, sorted((rounded(v for _, v in sorted(row.items())) for row in rows), key=repr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    args = parser.parse_args()
    spark = session()
    spark.conf.unset(STATE_STORE[0])
    epochs = make_epochs(args.rows, args.epochs)
    data = tempfile.mkdtemp(prefix="sparkbeam-bench-data-")
    files = write_files(epochs, data)
    queries: dict[str, Callable[[], tuple[float, Rows]]] = {
        "hand-written": lambda: run_hand_written(spark, files),
        "sparkbeam": lambda: run_sparkbeam(spark, epochs, latest_sums),
    }
    latest_sums: dict[str, Sums] = {}
    seconds: dict[str, dict[str, list[float]]] = {q: {p: [] for p in PROVIDERS} for q in queries}
    answers: dict[str, set[str]] = {q: set() for q in queries}
    for query in queries.values():  # warm-up
        spark.conf.set(STATE_STORE[0], PROVIDERS["HDFS"])
        query()
    for _ in range(args.repeat):
        for name, query in queries.items():
            for provider, provider_class in PROVIDERS.items():
                spark.conf.set(STATE_STORE[0], provider_class)
                took, rows = query()
                seconds[name][provider].append(took)
                answers[name].add(repr(rows))
    shutil.rmtree(data, ignore_errors=True)
    checked = check_variants(
        list(queries), latest_sums, "the direct runner", lambda: direct_sums(epochs)
    )
    exact = {name: len(found) == 1 for name, found in answers.items()}
    medians = {
        name: {p: statistics.median(times) for p, times in by.items()}
        for name, by in seconds.items()
    }
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    if args.json:
        result = {"rows": args.rows, "seconds": medians, "exact": exact, "load": load}
        print(json.dumps({**result, "checked": checked}))
        return
    print(
        f"State store providers, watermark + tumble 60 s + per-key sum, {args.rows:,} rows, "
        f"{args.epochs} epochs, local[2], 2 shuffle partitions, median of {args.repeat} "
        f"(load average {load})"
    )
    print(f"{'query':<14} {'HDFS s':>8} {'RocksDB s':>10} {'RocksDB/HDFS':>13}  same rows")
    for name, by in medians.items():
        ratio = by["RocksDB"] / by["HDFS"]
        times = f"{by['HDFS']:>8.2f} {by['RocksDB']:>10.2f} {ratio:>12.2f}x"
        print(f"{name:<14} {times}  {exact[name]}")
    print("checked:", *checked, sep="\n- ")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
