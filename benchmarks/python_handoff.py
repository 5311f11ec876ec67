"""What it costs Spark to hand a micro-batch's rows to Python, against aggregating them itself.

Update mode on Spark folds each partition's rows per group before its keyed operator, and a
stream has no aggregation without state within a micro-batch (any `groupBy` on a stream keeps
state), so the fold runs in a Python (Arrow) function, which every row crosses into. This
measures that crossing apart, in a batch job over one parquet file of N rows (100 keys):

- `Spark's partial aggregation`: `groupBy(key, window)` + sum, all in the JVM (the baseline);
- `to Python, nothing done`: `mapInArrow` with a function that reads every batch and returns
  nothing: the hand-off alone;
- `to Python, folded in Arrow`: `mapInArrow` grouping each batch by key in Arrow (sums),
  then Spark sums the partial rows.

Variants run interleaved, `--repeat` rounds after one untimed round each (medians); each line
gives the ratio to the baseline, and the folded variant's total is checked against it.

    .venv/bin/python benchmarks/python_handoff.py --rows 1000000 --repeat 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from spark_streaming import session

PARTIAL = "value_sum long, key string"


def write_rows(rows: int, directory: str) -> None:
    table = pa.table(
        {
            "key": pa.array([f"k{i % 100}" for i in range(rows)]),
            "value": pa.array(range(rows), pa.int64()),
            "event_time": pa.array(
                [1_700_000_000_000_000 + i * 1_000 for i in range(rows)],
                pa.timestamp("us", tz="UTC"),
            ),
        }
    )
    pq.write_table(table, os.path.join(directory, "rows.parquet"))


def nothing(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for _ in batches:
        pass
    return iter([])


def fold(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        sums = pa.Table.from_batches([batch]).group_by(["key"]).aggregate([("value", "sum")])
        yield from sums.select(["value_sum", "key"]).to_batches()


def variants(rows: DataFrame) -> dict[str, Callable[[], int | None]]:
    window = F.window("event_time", "60 seconds")
    return {
        "Spark's partial aggregation": lambda: (
            rows.groupBy("key", window).agg(F.sum("value").alias("s")).agg(F.sum("s")).first()[0]
        ),
        "to Python, nothing done": lambda: rows.mapInArrow(nothing, "value long").count(),
        "to Python, folded in Arrow": lambda: (
            rows.mapInArrow(fold, PARTIAL).agg(F.sum("value_sum")).first()[0]
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    spark = session()
    directory = tempfile.mkdtemp(prefix="sparkbeam-bench-handoff-")
    write_rows(args.rows, directory)
    chosen = variants(spark.read.parquet(directory))
    times: dict[str, list[float]] = {name: [] for name in chosen}
    totals = {name: run() for name, run in chosen.items()}  # untimed: the JVM's warm-up
    want = args.rows * (args.rows - 1) // 2
    for name in ("Spark's partial aggregation", "to Python, folded in Arrow"):
        if totals[name] != want:
            sys.exit(f"{name}: total {totals[name]}, want {want}")
    for _ in range(args.repeat):
        for name, run in chosen.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    medians = {name: statistics.median(values) for name, values in times.items()}
    base = medians["Spark's partial aggregation"]
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"{args.rows:,} rows, {args.repeat} rounds (medians), load average {load}")
    print(f"{'variant':30s} {'seconds':>8s}  vs Spark's partial aggregation")
    for name, seconds in medians.items():
        print(f"{name:30s} {seconds:8.3f}  {seconds / base:5.2f}x")
    print("checked: the folded total equals Spark's")


if __name__ == "__main__":
    main()
