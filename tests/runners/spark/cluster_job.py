"""Pipelines run on a real multi-process Spark cluster whose workers lack sparkbeam.

Run as a script (the driver, in its own process) it takes a master URL,
runs every pipeline on the Spark runner and prints the results as JSON; the
test imports it to run the same pipelines on the direct runner. Its
functions are defined here, in the script Spark runs as `__main__`, so
Spark's workers get them by value (cloudpickle), as a user's job script's.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import sparkbeam as sb
from tests.class_archive import java_options

T0 = datetime(2026, 4, 1, 10, 0)

SHORT_LIVED_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:ReservedCodeCacheSize=128m"
"""Java options for every JVM of the cluster test (master, worker, spark-class's launcher,
drivers, executors), the Spark Connect server's and test_defaults.py's `own_sessions`
process's: each lives a minute or two, on two cores, where the optimizing compiler's and the
parallel collector's threads cost more than they give back. The quick compiler alone sizes the
compiled-code cache at 48 MB, which the suite's own JVM filled (`tests/conftest.py`'s SPARK_CONF):
these get room too."""

SPARK_JVM = f"{SHORT_LIVED_JVM} {java_options()}".strip()
"""`SHORT_LIVED_JVM` with Spark's classes mapped from the suite's archive (`class_archive`): for
every JVM that runs Spark itself, not spark-class's launcher, whose output is its command."""


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def doubled(row: dict[str, Any]) -> dict[str, Any]:
    return {**row, "v": row["v"] * 2}


def not_c(row: dict[str, Any]) -> bool:
    return bool(row["k"] != "c")


def repeated(row: dict[str, Any]) -> list[dict[str, Any]]:
    """The row once per unit of `v`, as `i`: a FlatMap with its own schema."""
    return [{"k": row["k"], "i": i, "t": row["t"]} for i in range(row["v"])]


REPEATED = {"k": str, "i": int, "t": datetime}


class Keys(sb.CombineFn):
    """A user CombineFn: the group's distinct keys, sorted and joined."""

    output_type = str

    def create_accumulator(self) -> set[str]:
        return set()

    def add_input(self, accumulator: set[str], element: dict[str, Any]) -> set[str]:
        return accumulator | {element["k"]}

    def merge_accumulators(self, accumulators: Any) -> set[str]:
        return set().union(*accumulators)

    def extract_output(self, accumulator: set[str]) -> str:
        return ",".join(sorted(accumulator))


ROWS = [
    {"k": "a", "v": 1, "t": at(0)},
    {"k": "b", "v": 2, "t": at(30)},
    {"k": "a", "v": 3, "t": at(70)},
    {"k": "c", "v": 4, "t": at(75)},
]


def stream() -> sb.TestStream:
    return (
        sb.TestStream()
        .add_epoch([{"k": "a", "v": 1, "t": at(120)}, {"k": "b", "v": 2, "t": at(100)}])
        .add_epoch([{"k": "a", "v": 3, "t": at(10)}, {"k": "b", "v": 4, "t": at(125)}])
        .add_epoch([{"k": "c", "v": 5, "t": at(300)}])
    )


def batch_map_and_sum(p: sb.Pipeline) -> sb.PCollection:
    return (
        (p | sb.Create(ROWS))
        .map(doubled)
        .tumble("t", "1 minute")
        .combine_per_key(["window_start"], total=sb.Sum("v"))
    )


def batch_combine_fn(p: sb.Pipeline) -> sb.PCollection:
    windows = (p | sb.Create(ROWS)).tumble("t", "1 minute")
    return windows.combine_per_key(["window_start"], seen=Keys(), n=sb.Count())


def elementwise(source: sb.PCollection) -> sb.PCollection:
    """Filter with a function and with an expression, FlatMap, then CountDistinct and a
    user CombineFn per window."""
    kept = source.filter(not_c).filter(sb.col("v") < 5)
    flat = kept.flat_map(repeated, schema=REPEATED, keeps=["t"])
    return flat.tumble("t", "1 minute").combine_per_key(
        ["window_start"], values=sb.CountDistinct("i"), seen=Keys()
    )


def window_join(left: sb.PCollection, right: sb.PCollection) -> sb.PCollection:
    """Both sides windowed by the minute, joined on the key and the window."""
    windowed = [
        side.tumble("t", "1 minute").select("k", "window_start", **{name: "v"})
        for side, name in ((left, "left_v"), (right, "right_v"))
    ]
    return windowed[0].join(windowed[1], on=["k", "window_start"])


def batch_elementwise(p: sb.Pipeline) -> sb.PCollection:
    return elementwise(p | sb.Create(ROWS))


def batch_sort(p: sb.Pipeline) -> sb.PCollection:
    return (p | sb.Create(ROWS)).sort("t")


def batch_session(p: sb.Pipeline) -> sb.PCollection:
    return (p | sb.Create(ROWS)).session("t", "30 seconds", keys="k")


def batch_window_join(p: sb.Pipeline) -> sb.PCollection:
    shifted = [{**row, "v": row["v"] * 10, "t": row["t"] + timedelta(seconds=5)} for row in ROWS]
    return window_join(p | "left" >> sb.Create(ROWS), p | "right" >> sb.Create(shifted))


def streaming_elementwise(p: sb.Pipeline) -> sb.PCollection:
    return elementwise((p | stream()).with_watermark("t", "30 seconds"))


def streaming_window_join(p: sb.Pipeline) -> sb.PCollection:
    right = (
        sb.TestStream()
        .add_epoch([{"k": "a", "v": 10, "t": at(125)}])
        .add_epoch([{"k": "b", "v": 20, "t": at(110)}, {"k": "a", "v": 30, "t": at(15)}])
        .add_epoch([{"k": "c", "v": 50, "t": at(290)}])
    )
    left = (p | "left" >> stream()).with_watermark("t", "30 seconds")
    return window_join(left, (p | "right" >> right).with_watermark("t", "30 seconds"))


def streaming_sort(p: sb.Pipeline) -> sb.PCollection:
    return (p | stream()).with_watermark("t", "30 seconds").sort("t")


def streaming_map_session(p: sb.Pipeline) -> sb.PCollection:
    marked = (p | stream()).with_watermark("t", "30 seconds").map(doubled, keeps=["t"])
    return marked.session("t", "30 seconds", keys="k")


def streaming_late_rows(p: sb.Pipeline) -> sb.PCollection:
    return (p | stream()).with_watermark("t", "30 seconds").late_rows()


PIPELINES: dict[str, Callable[[sb.Pipeline], sb.PCollection]] = {
    "batch_map_and_sum": batch_map_and_sum,
    "batch_combine_fn": batch_combine_fn,
    "batch_elementwise": batch_elementwise,
    "batch_sort": batch_sort,
    "batch_session": batch_session,
    "batch_window_join": batch_window_join,
    "streaming_elementwise": streaming_elementwise,
    "streaming_window_join": streaming_window_join,
    "streaming_sort": streaming_sort,
    "streaming_map_session": streaming_map_session,
    "streaming_late_rows": streaming_late_rows,
}


def run_all(runner: Any) -> dict[str, list[dict[str, Any]]]:
    """Every pipeline's collected rows on `runner`, datetimes as ISO text: the batch ones in
    one pipeline, the streaming ones in another, their queries run side by side."""
    out = {}
    for names in (
        [name for name in PIPELINES if name.startswith("batch")],
        [name for name in PIPELINES if name.startswith("streaming")],
    ):
        p = sb.Pipeline(runner=runner)
        outputs = {name: PIPELINES[name](p) for name in names}
        result = p.run()
        if hasattr(result, "prepare"):
            result.prepare(*outputs.values())
        for name, pcoll in outputs.items():
            out[name] = [
                {c: v.isoformat() if isinstance(v, datetime) else v for c, v in row.items()}
                for row in result.collect(pcoll)
            ]
    return out


def run_application(master: str, mode: str) -> None:
    """Every pipeline as one application on `master`, sparkbeam shipped to the workers or not
    (`mode`): a RESULT or ERROR line naming the mode."""
    conf = {
        "spark.executor.memory": "768m",
        "spark.sql.shuffle.partitions": "2",
        "spark.ui.enabled": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.streaming.pollingDelay": "100ms",  # why: tests/conftest.py's SPARK_CONF
        "spark.driver.extraJavaOptions": SPARK_JVM,
        "spark.executor.extraJavaOptions": SPARK_JVM,
    }
    # Replayed sources (TestStream) stage their epoch files where every executor reads
    # them: on this one-machine cluster the driver's disk is that place, named as a URI.
    staging = Path(tempfile.mkdtemp(prefix="sparkbeam-staging-"))
    runner = sb.SparkRunner(
        master=master, conf=conf, ship_package=mode == "ship", staging_location=staging.as_uri()
    )
    try:
        print(f"RESULT {mode} " + json.dumps(run_all(runner)), flush=True)
    except Exception as exc:
        print(f"ERROR {mode} {type(exc).__name__}: {exc}", flush=True)
    finally:
        runner.spark.stop()
        shutil.rmtree(staging, ignore_errors=True)


if __name__ == "__main__":
    # The applications one after the other in this driver: a session stopped, the next one
    # starts on the same JVM as a new application, with executors of its own.
    for mode in sys.argv[2:]:
        run_application(sys.argv[1], mode)
