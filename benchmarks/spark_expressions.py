"""Spark runner, expressions: filter + derived column + per-key sum, against PySpark by hand.

`Filter(sb.col("amount") >= 5)`, `with_columns(net=sb.col("amount") * 0.8)` and a
per-key `Sum("net")` over N rows read from parquet (the rows of
`spark_batch.py`), each written to Spark's `noop` sink; the same with Python
functions (`Filter(lambda)`, `Map`) for comparison. Runs alternate; the table
reports the median of each and its ratio to the hand-written job. After the
timed runs, each job's per-key sums (collected once, untimed) are checked
against the direct runner's over the same files; a difference stops the
benchmark.

    .venv/bin/python benchmarks/spark_expressions.py --rows 2000000 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
from typing import Any

from checks import Sums
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from spark_batch import check_jobs, make_input, session, timed

import sparkbeam as sb


def hand_written(spark: SparkSession, path: str) -> DataFrame:
    orders = spark.read.parquet(path)
    return (
        orders.filter(F.col("amount") >= 5)
        .withColumn("net", F.col("amount") * 0.8)
        .groupBy("key")
        .agg(F.sum("net").alias("total"))
    )


def per_key_totals(p: sb.Pipeline, path: str, python: bool = False) -> sb.PCollection:
    orders = p | sb.ReadFiles(path, format="parquet")
    if python:
        schema: dict[str, Any] = {**dict(orders.schema.fields), "net": float}
        kept = orders.filter(lambda row: row["amount"] is not None and row["amount"] >= 5)
        derived = kept.map(lambda row: {**row, "net": row["amount"] * 0.8}, schema=schema)
    else:
        derived = orders.filter(sb.col("amount") >= 5).with_columns(net=sb.col("amount") * 0.8)
    return derived.combine_per_key("key", total=sb.Sum("net"))


def translated(spark: SparkSession, path: str, python: bool = False) -> DataFrame:
    p = sb.Pipeline(runner=sb.SparkRunner(spark=spark))
    totals = per_key_totals(p, path, python)
    result = p.run()
    assert isinstance(result, sb.SparkResult)
    return result.to_dataframe(totals)


def direct_sums(path: str) -> Sums:
    """The reference: the expression pipeline on the direct runner, `key -> total`."""
    p = sb.Pipeline(runner=sb.DirectRunner())
    totals = per_key_totals(p, path)
    return {row["key"]: row["total"] for row in p.run().collect(totals)}


def frame_sums(name: str, frame: DataFrame) -> Sums:
    return {row["key"]: row["total"] for row in frame.select("key", "total").collect()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "sparkbeam-bench"))
    parser.add_argument("--json", action="store_true", help="print one JSON line (for run.py)")
    args = parser.parse_args()

    spark = session()
    path = make_input(spark, args.rows, args.data)
    jobs = {
        "hand-written": lambda: hand_written(spark, path),
        "sparkbeam": lambda: translated(spark, path),
        "sparkbeam, Python functions": lambda: translated(spark, path, python=True),
    }
    for build in jobs.values():
        timed(build)  # warm-up: JIT, file listing, caches
    times: dict[str, list[float]] = {name: [] for name in jobs}
    for _ in range(args.repeat):
        for name, build in jobs.items():
            times[name].append(timed(build))
    checked = check_jobs(jobs, frame_sums, "the direct runner", direct_sums(path))
    medians = {name: statistics.median(values) for name, values in times.items()}
    if args.json:
        print(json.dumps({"rows": args.rows, "seconds": medians, "checked": checked}))
        return
    hand = medians["hand-written"]
    print(f"Spark batch, filter + derived column + per-key sum, {args.rows:,} rows, local[2]")
    print(f"{'job':<28} {'median s':>9} {'rows/s':>12} {'vs hand-written':>16}")
    for name, median in medians.items():
        print(f"{name:<28} {median:>9.2f} {args.rows / median:>12,.0f} {median / hand:>15.2f}x")
    print("checked:", *checked, sep="\n- ")


if __name__ == "__main__":
    main()
