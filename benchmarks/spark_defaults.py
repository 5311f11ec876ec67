"""`runner="spark"` with no options against the same pipeline hand-written on Spark's defaults.

Issue 22's pipeline: two `TestStream`s (3 epochs, 13 rows in all), each
`with_watermark("t", "1 minute")`, a `Union`, `Tumble` + `CombinePerKey`, a
window `Join` of two such counts and a `Session` (counted per session):

- `sparkbeam`: `sb.Pipeline(runner="spark")`, nothing else; the time of
  `collect` of the join plus `metrics()` (which runs the session branch).
- `hand-written`: the same in Structured Streaming on a session with Spark's
  defaults for the same master (`local[*]`): one query for the join, one for
  the sessions, both fed the same epoch files (one per source and epoch,
  then a row far in the future that closes every window, as the runner's
  end of input does), with `processAllAvailable()` after each; the time
  until both have run every epoch and their progress is read.

Each variant runs in a fresh process (`--variant`), its session started
before the clock; without `--variant` both run, one after the other, and
the ratio is printed. After its clock stops, each variant checks the rows of
the join (each window's count, sum and views) against the direct runner's
run of the same pipeline (`checks.py`; a difference stops the benchmark).
The sessions are not checked: the runner's session branch runs only for
`metrics()`, which counts rows, and the hand-written one is timed, not read.

    .venv/bin/python benchmarks/spark_defaults.py
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from typing import Any

from checks import Sums, check_sums

MASTER = "local[*]"
"""The master of both sessions (`SparkRunner`'s default)."""

T0 = datetime(2026, 4, 1, 10, 0)
END = datetime(9000, 1, 1)
"""The hand-written queries' end of input: a row this late closes every window."""


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


CLICKS = [
    [
        {"k": "a", "v": 1, "t": at(0)},
        {"k": "b", "v": 2, "t": at(0.5)},
        {"k": "a", "v": 3, "t": at(1.2)},
    ],
    [{"k": "a", "v": 4, "t": at(2.5)}, {"k": "b", "v": 5, "t": at(1.1)}],
    [{"k": "a", "v": 6, "t": at(6)}, {"k": "b", "v": 7, "t": at(4.5)}],
]
VIEWS = [
    [{"k": "a", "v": 10, "t": at(0.2)}, {"k": "b", "v": 20, "t": at(1.5)}],
    [{"k": "a", "v": 30, "t": at(2.1)}, {"k": "b", "v": 40, "t": at(2.9)}],
    [{"k": "a", "v": 50, "t": at(5.5)}, {"k": "a", "v": 60, "t": at(7)}],
]
assert sum(map(len, CLICKS + VIEWS)) == 13


def joined_counts(p: Any) -> Any:
    """The pipeline on `p`: the join's PCollection (the sessions are counted, not kept)."""
    import sparkbeam as sb

    clicks, views = sb.TestStream(), sb.TestStream()
    for rows in CLICKS:
        clicks.add_epoch(rows)
    for rows in VIEWS:
        views.add_epoch(rows)
    a = (p | "clicks" >> clicks).with_watermark("t", "1 minute")
    b = (p | "views" >> views).with_watermark("t", "1 minute")
    both = a.union(b)
    per_minute = both.tumble("t", "1 minute").combine_per_key(
        ["k", "window_start"], n=sb.Count(), total=sb.Sum("v")
    )
    viewed = b.tumble("t", "1 minute").combine_per_key(["k", "window_start"], views=sb.Count())
    joined = per_minute.join(viewed, on=["k", "window_start"])
    both.session("t", "2 minutes", keys="k").combine_per_key(
        ["k", "window_start", "window_end"], n=sb.Count()
    )
    return joined


def join_sums(rows: list[dict[str, Any]]) -> Sums:
    """Each joined window's count, sum and views: `(k, window start, column) -> value`."""
    return {
        (row["k"], row["window_start"], column): row[column]
        for row in rows
        for column in ("n", "total", "views")
    }


def direct_join_sums() -> Sums:
    """The reference: the same pipeline on the direct runner."""
    import sparkbeam as sb

    p = sb.Pipeline(runner=sb.DirectRunner())
    joined = joined_counts(p)
    return join_sums(p.run().collect(joined))


def run_sparkbeam() -> dict[str, Any]:
    import sparkbeam as sb

    p = sb.Pipeline(runner="spark")
    assert isinstance(p.runner, sb.SparkRunner)
    spark = p.runner.spark  # the runner's own session, started before the clock
    started = time.perf_counter()
    joined = joined_counts(p)
    result = p.run()
    rows = result.collect(joined)
    metrics = result.metrics()
    seconds = time.perf_counter() - started
    checked = check_sums("sparkbeam", join_sums(rows), "the direct runner", direct_join_sums())
    return {
        "seconds": seconds,
        "joined": len(rows),
        "transforms": len(metrics),
        "partitions": spark.conf.get("spark.sql.shuffle.partitions"),
        "checked": checked,
    }


def run_hand_written() -> dict[str, Any]:
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    spark = SparkSession.builder.master(MASTER).appName("hand-written").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    schema = T.StructType(
        [
            T.StructField("k", T.StringType()),
            T.StructField("v", T.LongType()),
            T.StructField("t", T.TimestampType()),
        ]
    )
    work = tempfile.mkdtemp(prefix="sparkbeam-bench-defaults-")
    started = time.perf_counter()
    directories = {name: os.path.join(work, name) for name in ("clicks", "views")}
    for directory in directories.values():
        os.makedirs(directory)

    def read(name: str) -> DataFrame:
        frame = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1)
        marked = frame.parquet(directories[name]).withWatermark("t", "1 minute")
        # after the watermark, and naming the time, so that it stays above it
        return marked.filter((F.col("k") != "__end__") | F.col("t").isNull())

    a, b = read("clicks"), read("views")
    both = a.union(b)
    minute = F.window("t", "1 minute")
    per_minute = both.groupBy("k", minute.alias("w")).agg(F.count("*").alias("n"), F.sum("v"))
    viewed = b.groupBy("k", minute.alias("w")).agg(F.count("*").alias("views"))
    joined = per_minute.join(viewed, ["k", "w"])
    sessions = both.groupBy("k", F.session_window("t", "2 minutes")).count()
    found: dict[str, list[Any]] = {"joined": [], "sessions": []}
    queries = []
    for name, frame in (("joined", joined), ("sessions", sessions)):

        def keep(batch: DataFrame, batch_id: int, rows: list[Any] = found[name]) -> None:
            rows.extend(batch.collect())

        query = (
            frame.writeStream.foreachBatch(keep)
            .outputMode("append")
            .option("checkpointLocation", os.path.join(work, f"checkpoint-{name}"))
            .start()
        )
        queries.append(query)
    epochs = [{"clicks": c, "views": v} for c, v in zip(CLICKS, VIEWS, strict=True)]
    end = [{"k": "__end__", "v": 0, "t": END}]
    for index, epoch in enumerate([*epochs, {"clicks": end, "views": end}]):
        for name, rows in epoch.items():
            path = os.path.join(directories[name], f"epoch-{index:03d}.parquet")
            pq.write_table(pa.Table.from_pylist(rows, schema=pa_schema(pa)), path)
        for query in queries:
            query.processAllAvailable()
    progress = [len(query.recentProgress) for query in queries]
    for query in queries:
        query.stop()
    seconds = time.perf_counter() - started
    shutil.rmtree(work, ignore_errors=True)
    got = join_sums(
        [
            {
                "k": row["k"],
                "window_start": row["w"]["start"],
                "n": row["n"],
                "total": row["sum(v)"],
                "views": row["views"],
            }
            for row in found["joined"]
        ]
    )
    checked = check_sums("hand-written", got, "the direct runner", direct_join_sums())
    return {
        "seconds": seconds,
        "joined": len(found["joined"]),
        "batches": sum(progress),
        "partitions": spark.conf.get("spark.sql.shuffle.partitions"),
        "checked": checked,
    }


def pa_schema(pa: Any) -> Any:
    return pa.schema([("k", pa.string()), ("v", pa.int64()), ("t", pa.timestamp("us"))])


VARIANTS = {"sparkbeam": run_sparkbeam, "hand-written": run_hand_written}


def fresh(variant: str) -> dict[str, Any]:
    """One variant in a process of its own."""
    env = {**os.environ, "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable)}
    command = [sys.executable, os.path.abspath(__file__), "--variant", variant]
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--variant", choices=sorted(VARIANTS), help="run one, in this process")
    parser.add_argument("--json", action="store_true", help="print one JSON line (for run.py)")
    args = parser.parse_args()
    if args.variant:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        print(json.dumps(VARIANTS[args.variant]()))
        return
    runs = {name: fresh(name) for name in ("hand-written", "sparkbeam")}
    seconds = {name: run["seconds"] for name, run in runs.items()}
    checked = [run["checked"] for run in runs.values()]
    if args.json:
        print(json.dumps({"rows": 13, "seconds": seconds, "runs": runs, "checked": checked}))
        return
    hand = seconds["hand-written"]
    print(f"Issue 22's pipeline, 13 rows in 3 epochs, {MASTER}, each in a fresh process")
    for name, run in runs.items():
        print(f"{name:<14} {run['seconds']:>7.2f} s  {run['seconds'] / hand:>5.2f}x  {run}")
    print("checked:", *checked, "not checked: the sessions (counted, not read)", sep="\n- ")


if __name__ == "__main__":
    main()
