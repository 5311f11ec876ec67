"""Spark runner, batch: a translated pipeline against the same job written by hand.

Watermark + 60-second tumbling windows + per-key sum over N rows (100 keys,
out-of-order event times) read from parquet, each written to Spark's `noop`
sink so the whole plan runs. Runs alternate, translated and hand-written,
and the table reports the median of each and their ratio. After the timed
runs, each job's sums (collected once, untimed) are checked against the
direct runner's over the same files (`checks.py`); a difference stops the
benchmark.

    .venv/bin/python benchmarks/spark_batch.py --rows 10000000 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime

from checks import Sums, check_sums
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import sparkbeam as sb

BASE_MICROS = 1_775_000_000_000_000  # 2026-03-31


def session() -> SparkSession:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("sparkbeam-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "4g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def make_input(spark: SparkSession, rows: int, directory: str) -> str:
    path = os.path.join(directory, f"orders-{rows}.parquet")
    if not os.path.exists(path):
        ids = F.col("id")
        jitter = (F.hash(ids) % 5_000_000).cast("long")  # up to 5 s out of order
        spark.range(rows).select(
            (ids % 100).alias("key"),
            (F.hash(ids, F.lit(7)) % 1000 / 10.0).alias("amount"),
            F.timestamp_micros(F.lit(BASE_MICROS) + ids * 1000 + jitter).alias("event_time"),
        ).write.parquet(path)
    return path


def hand_written(spark: SparkSession, path: str) -> DataFrame:
    orders = spark.read.parquet(path).withWatermark("event_time", "5 seconds")
    return (
        orders.filter(F.col("event_time").isNotNull())
        .groupBy("key", F.window("event_time", "60 seconds"))
        .agg(F.sum("amount").alias("total"))
        .select("key", "window.start", "window.end", "total")
    )


def windowed_totals(p: sb.Pipeline, path: str) -> sb.PCollection:
    return (
        (p | sb.ReadFiles(path, format="parquet"))
        .with_watermark("event_time", "5 seconds")
        .tumble("event_time", "60 seconds")
        .combine_per_key(["key", "window_start", "window_end"], total=sb.Sum("amount"))
    )


def translated(spark: SparkSession, path: str) -> DataFrame:
    p = sb.Pipeline(runner=sb.SparkRunner(spark=spark))
    totals = windowed_totals(p, path)
    result = p.run()
    assert isinstance(result, sb.SparkResult)
    return result.to_dataframe(totals)


def micros(value: datetime) -> int:
    """A datetime (naive: UTC) as microseconds since the epoch."""
    aware = value if value.tzinfo else value.replace(tzinfo=UTC)
    return (aware - datetime(1970, 1, 1, tzinfo=UTC)) // datetime.resolution


def direct_sums(path: str) -> Sums:
    """The reference: the same pipeline on the direct runner, `(key, window start) -> total`."""
    p = sb.Pipeline(runner=sb.DirectRunner())
    totals = windowed_totals(p, path)
    rows = p.run().collect(totals)
    return {(row["key"], micros(row["window_start"])): row["total"] for row in rows}


def frame_sums(frame: DataFrame, key: str, start: str, total: str) -> Sums:
    """A job's result collected: `(key, window start in microseconds) -> total`."""
    rows = frame.select(key, F.unix_micros(start).alias("start"), total).collect()
    return {(row[0], row[1]): row[2] for row in rows}


def check_jobs(
    jobs: dict[str, Callable[[], DataFrame]],
    sums_of: Callable[[str, DataFrame], Sums],
    reference: str,
    want: Sums,
) -> list[str]:
    """Each job's sums (one more, untimed run) against `want`; stops the benchmark on a
    difference (`checks.check_sums`)."""
    return [
        check_sums(name, sums_of(name, build()), reference, want) for name, build in jobs.items()
    ]


def batch_sums(name: str, frame: DataFrame) -> Sums:
    if name == "hand-written":
        return frame_sums(frame, "key", "start", "total")
    return frame_sums(frame, "key", "window_start", "total")


def timed(build: Callable[[], DataFrame]) -> float:
    start = time.perf_counter()
    build().write.format("noop").mode("overwrite").save()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "sparkbeam-bench"))
    parser.add_argument("--json", action="store_true", help="print one JSON line (for run.py)")
    args = parser.parse_args()

    spark = session()
    path = make_input(spark, args.rows, args.data)
    jobs = {
        "hand-written": lambda: hand_written(spark, path),
        "sparkbeam": lambda: translated(spark, path),
    }
    for build in jobs.values():
        timed(build)  # warm-up: JIT, file listing, caches
    times: dict[str, list[float]] = {name: [] for name in jobs}
    for _ in range(args.repeat):
        for name, build in jobs.items():
            times[name].append(timed(build))
    checked = check_jobs(jobs, batch_sums, "the direct runner", direct_sums(path))
    hand = statistics.median(times["hand-written"])
    if args.json:
        medians = {name: statistics.median(values) for name, values in times.items()}
        print(json.dumps({"rows": args.rows, "seconds": medians, "checked": checked}))
        return
    print(f"Spark batch, watermark + tumble 60 s + per-key sum, {args.rows:,} rows, local[2]")
    print(f"{'job':<14} {'median s':>9} {'rows/s':>12} {'vs hand-written':>16}")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:<14} {median:>9.2f} {args.rows / median:>12,.0f} {median / hand:>15.2f}x")
    print("checked:", *checked, sep="\n- ")


if __name__ == "__main__":
    main()
