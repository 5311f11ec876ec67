"""Spark runner, streaming: update mode against close mode and against Spark's own update mode.

The usual job (watermark 5 s + 60-second tumbling windows + per-key sum, 100
keys, out of order by up to 5 s, about 1 percent late) over N rows in E
epochs, fed one epoch at a time:

- `close`: the pipeline through the Spark runner with `emit="close"`;
- `update`: the same with `emit="update"` (every change row collected);
- `hand-written update`: `withWatermark` + `groupBy(key, window)` + sum in
  Spark's `outputMode("update")` over the same epoch files, with a sink that
  only counts rows (it has no closing rows, no pane index and Spark's own
  late-row rule: not the model, the baseline a user would write).

Each line gives the median wall time over `--repeat` rounds and its ratio to
`close` and to `hand-written update`. After the rounds the update stream's
last rows per group (`finals()`'s rows) are checked against close mode's.

    .venv/bin/python benchmarks/spark_update_streaming.py --rows 1000000 --epochs 10
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from spark_streaming import SCHEMA, make_epochs, session, test_stream, write_files

import sparkbeam as sb


def totals(source: sb.PCollection, emit: str) -> sb.PCollection:
    return (
        source.with_watermark("event_time", "5 seconds")
        .tumble("event_time", "60 seconds")
        .combine_per_key(["key", "window_start"], emit=emit, total=sb.Sum("amount"))
    )


def run_sparkbeam(spark: SparkSession, epochs: list[list[dict[str, Any]]], emit: str) -> Any:
    """Seconds to run and collect the pipeline, and its rows."""
    stream = test_stream(epochs)
    start = time.perf_counter()
    p = sb.Pipeline(runner=sb.SparkRunner(spark=spark))
    out = totals(p | stream, emit)
    rows = p.run().collect(out)
    return time.perf_counter() - start, rows


def run_hand_written(spark: SparkSession, files: list[str]) -> float:
    """Seconds for Spark's own update mode over `files`, one file processed at a time."""
    source = tempfile.mkdtemp(prefix="sparkbeam-bench-in-")
    work = tempfile.mkdtemp(prefix="sparkbeam-bench-")
    count = [0]

    def sink(batch: DataFrame, batch_id: int) -> None:
        count[0] += batch.count()

    frame = (
        spark.readStream.schema(SCHEMA)
        .option("maxFilesPerTrigger", 1)
        .parquet(source)
        .withWatermark("event_time", "5 seconds")
        .groupBy("key", F.window("event_time", "60 seconds"))
        .agg(F.sum("amount").alias("total"))
    )
    start = time.perf_counter()
    query = (
        frame.writeStream.foreachBatch(sink)
        .outputMode("update")
        .option("checkpointLocation", os.path.join(work, "checkpoint"))
        .start()
    )
    try:
        for path in files:
            shutil.copy(path, os.path.join(source, os.path.basename(path)))
            query.processAllAvailable()
    finally:
        query.stop()
    seconds = time.perf_counter() - start
    shutil.rmtree(source, ignore_errors=True)
    shutil.rmtree(work, ignore_errors=True)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    epochs = make_epochs(args.rows, args.epochs)
    spark = session()
    directory = tempfile.mkdtemp(prefix="sparkbeam-bench-files-")
    files = write_files(epochs, directory)
    times: dict[str, list[float]] = {"close": [], "update": [], "hand-written update": []}
    rows: dict[str, Any] = {}
    for _ in range(args.repeat):
        for emit in ("close", "update"):
            seconds, rows[emit] = run_sparkbeam(spark, epochs, emit)
            times[emit].append(seconds)
        times["hand-written update"].append(run_hand_written(spark, files))
    # sums to 9 decimals: Spark's native sum (close mode) adds in another order
    finals = [r for r in rows["update"] if r["pane_is_last"]]
    last = {(r["key"], r["window_start"]): round(r["total"], 9) for r in finals}
    closed = {(r["key"], r["window_start"]): round(r["total"], 9) for r in rows["close"]}
    if last != closed:
        differ = [k for k in closed.keys() | last.keys() if closed.get(k) != last.get(k)]
        shown = [(k, closed.get(k), last.get(k)) for k in differ[:3]]
        sys.exit(
            f"{len(differ)} of the update stream's last rows differ from close mode's: {shown}"
        )
    medians = {name: statistics.median(values) for name, values in times.items()}
    print(f"{args.rows} rows, {args.epochs} epochs; {len(rows['update'])} change rows")
    for name, seconds in medians.items():
        print(
            f"{name:22s} {seconds:8.2f} s  {seconds / medians['close']:5.2f}x close  "
            f"{seconds / medians['hand-written update']:5.2f}x hand-written update"
        )
    shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
