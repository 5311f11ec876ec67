"""Spark runner, streaming: the cost of the late-row filter, and sparkbeam against hand-written.

Watermark (5 s) + 60-second tumbling windows + per-key sum over N rows (100
keys, out of order by up to 5 s, about 1 percent late) in E epochs. Every
variant reads the same epoch files, fed one epoch at a time with
`processAllAvailable()`, as the Spark runner does:

- `hand-written`: `withWatermark` + `groupBy(key, window)` + sum, Spark's own
  late-row rule (a row is judged by its window's end), on Spark's default
  state store (RocksDB only for the `transformWithState` variant).
- `hand-written + end of input`: the same, then one more file holding one row
  far in the future, which closes every window: what a hand-written query
  needs to emit the last windows' sums too, as sparkbeam's does at the end of
  a replayed input (its end-of-input epoch: a data and a no-data micro-batch).
- `hand-written observed as sparkbeam`: the same, counting rows in and out
  of every step as the runner does for `metrics()`.
- `+ dedup filter`: the same, after the runner's exact late-row filter (a
  deduplication keyed on a row id and the judge column, `t + 1 us`).
- `+ within-watermark filter`: the filter as `dropDuplicatesWithinWatermark`.
- `+ transformWithState filter`: the filter as a pass-through stateful
  processor (Spark drops late rows before it).
- `sparkbeam`: the pipeline through the Spark runner, rows from a TestStream
  (this includes turning Python rows into the epoch files); its late-row
  filter is the stateless one on each epoch's watermark.

Every variant runs `--repeat` rounds in turn; each line gives the median wall
time, the median of its per-round ratios to hand-written, and the same ratio
of CPU seconds (the driver, Spark's JVM and its Python workers).

After the rounds, `sparkbeam`'s sums (its last round's rows, turned into sums
after its clock stopped) are checked against the direct runner's over the
same epochs; a difference stops the benchmark. The hand-written variants are
not checked: they follow Spark's own rule for late rows (a row is kept while
its window is open), so their sums differ from the model's by design; their
sink only counts rows.

    .venv/bin/python benchmarks/spark_streaming.py --rows 2000000 --epochs 10
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from checks import Sums, check_sums
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle

import sparkbeam as sb
from sparkbeam.runners.spark.plan.settings import CHANGELOG, STATE_STORE

START = datetime(2026, 4, 1)
SCHEMA = T.StructType(
    [
        T.StructField("key", T.StringType()),
        T.StructField("amount", T.DoubleType()),
        T.StructField("event_time", T.TimestampType()),
    ]
)


def session() -> SparkSession:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("sparkbeam-bench-streaming")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "4g")
        # Python workers get two minutes to connect back: Spark's 15 s fail under heavy load.
        .config("spark.python.authenticate.socketTimeout", "120s")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def make_epochs(rows: int, epochs: int) -> list[list[dict[str, Any]]]:
    per_epoch = rows // epochs
    out = []
    for epoch in range(epochs):
        batch = []
        for i in range(epoch * per_epoch, (epoch + 1) * per_epoch):
            jitter = (i * 7919) % 5_000_000
            late = 20_000_000 if i % 97 == 0 else 0
            batch.append(
                {
                    "key": f"k{i % 100}",
                    "amount": (i % 1000) / 10,
                    "event_time": START + timedelta(microseconds=i * 1000 - jitter - late),
                }
            )
        out.append(batch)
    return out


def write_files(epochs: list[list[dict[str, Any]]], directory: str) -> list[str]:
    """One parquet file per epoch, modification times in name order (Spark's file source reads
    files by modification time, the direct runner by name)."""
    os.makedirs(directory, exist_ok=True)
    files = []
    for index, rows in enumerate(epochs):
        path = os.path.join(directory, f"epoch-{index:04d}.parquet")
        pq.write_table(pa.Table.from_pylist(rows), path)
        os.utime(path, (1_700_000_000 + index, 1_700_000_000 + index))
        files.append(path)
    return files


def end_of_input(directory: str) -> str:
    """A file of one row far in the future, after which every window of the data is closed."""
    path = os.path.join(directory, "zz-end.parquet")
    end = {"key": "end", "amount": 0.0, "event_time": datetime(9000, 1, 1)}
    pq.write_table(pa.Table.from_pylist([end]), path)
    return path


class PassThrough(StatefulProcessor):
    def init(self, handle: StatefulProcessorHandle) -> None:
        pass

    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: Any) -> Iterator[Row]:
        for row in rows:
            yield Row(key=row["key"], amount=row["amount"], event_time=row["micros"])

    def close(self) -> None:
        pass


def judge_filter(kind: str) -> Callable[[DataFrame], DataFrame]:
    def apply(frame: DataFrame) -> DataFrame:
        judge = F.timestamp_micros(F.unix_micros("event_time") + 1)
        marked = frame.select(
            "key",
            "amount",
            F.col("event_time").alias("event_time", metadata={}),
            judge.alias("judge", metadata={"spark.watermarkDelayMs": 5000}),
        )
        if kind == "dedup":
            kept = marked.withColumn("row", F.expr("uuid()")).dropDuplicates(["row", "judge"])
            return kept.drop("row", "judge")
        if kind == "within":
            kept = marked.withColumn("row", F.expr("uuid()"))
            return kept.dropDuplicatesWithinWatermark(["row"]).drop("row", "judge")
        passed = marked.withColumn("micros", F.unix_micros("event_time")).groupBy("key")
        out = passed.transformWithState(
            PassThrough(), "key STRING, amount DOUBLE, event_time LONG", "Append", "EventTime"
        )
        return out.withColumn("event_time", F.timestamp_micros("event_time"))

    return apply


def hand_written(
    spark: SparkSession, directory: str, row_filter: Callable[[DataFrame], DataFrame] | None
) -> DataFrame:
    stream = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(directory)
    frame = stream.withWatermark("event_time", "5 seconds")
    if row_filter is None:
        return frame.groupBy("key", F.window("event_time", "60 seconds")).agg(F.sum("amount"))
    # After the filter the watermark metadata sits on no column: key the aggregation on the
    # window end carrying it (a window closes when its end <= W), as the runner does.
    windowed = row_filter(frame).withColumn("w", F.window("event_time", "60 seconds"))
    end = F.col("w.end").alias("end", metadata={"spark.watermarkDelayMs": 5000})
    return (
        windowed.select("key", "amount", "w", end).groupBy("key", "w", "end").agg(F.sum("amount"))
    )


def counted(frame: DataFrame, name: str, *columns: str) -> DataFrame:
    """`frame` counting its rows and the largest of `columns`, as the runner counts each
    transform's output (`observed`)."""
    latest = [F.max(F.unix_micros(c)).alias(f"latest_{i}") for i, c in enumerate(columns)]
    return frame.observe(name, F.count(F.lit(1)).alias("rows"), *latest)


def observed_hand_written(spark: SparkSession, directory: str) -> DataFrame:
    """`hand_written` counting rows in and out of every step as the runner does: what the
    observed metrics cost."""
    stream = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(directory)
    source = counted(stream, "source")
    frame = counted(source.withWatermark("event_time", "5 seconds"), "in", "event_time")
    frame = counted(counted(frame, "out"), "watermark", "event_time")
    windowed = frame.withColumn("w", F.window("event_time", "60 seconds"))
    windowed = counted(windowed.select("key", "amount", "w"), "tumble", "w.end")
    sums = windowed.groupBy("key", "w").agg(F.sum("amount"))
    return counted(sums, "sums", "w.end")


@contextlib.contextmanager
def starting(spark: SparkSession, settings: dict[str, str]) -> Iterator[None]:
    """`settings` on the session while a query starts (it keeps them), as the runner does."""
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key in settings:
            spark.conf.unset(key)


TWS = dict([STATE_STORE, CHANGELOG])
"""A `transformWithState` needs the RocksDB state store; every other query keeps the session's
provider, Spark's default (HDFS-backed), as a user's hand-written query would."""


@contextlib.contextmanager
def counting_query(
    spark: SparkSession, frame: Callable[[], DataFrame], settings: dict[str, str] | None
) -> Iterator[Any]:
    """A started query of `frame()` whose sink only counts each micro-batch's rows (as a
    user's cheapest `foreachBatch`), with `settings` while it starts; stopped, and its
    checkpoint deleted, on leaving."""
    work = tempfile.mkdtemp(prefix="sparkbeam-bench-")
    count = [0]

    def sink(batch: DataFrame, batch_id: int) -> None:
        count[0] += batch.count()

    with starting(spark, settings or {}):
        query = (
            frame()
            .writeStream.foreachBatch(sink)
            .outputMode("append")
            .option("checkpointLocation", os.path.join(work, "checkpoint"))
            .start()
        )
    try:
        yield query
    finally:
        query.stop()
        shutil.rmtree(work, ignore_errors=True)


def run_query(
    spark: SparkSession,
    frame_for: Callable[[str], DataFrame],
    files: list[str],
    settings: dict[str, str] | None = None,
) -> float:
    """Seconds to run the query of `frame_for(directory)` over `files`, copied into the
    directory one at a time, each processed before the next (as the runner feeds epochs)."""
    source = tempfile.mkdtemp(prefix="sparkbeam-bench-in-")
    start = time.perf_counter()
    with counting_query(spark, lambda: frame_for(source), settings) as query:
        for path in files:
            shutil.copy(path, os.path.join(source, os.path.basename(path)))
            query.processAllAvailable()
    shutil.rmtree(source, ignore_errors=True)
    return time.perf_counter() - start


def windowed_totals(source: sb.PCollection) -> sb.PCollection:
    return (
        source.with_watermark("event_time", "5 seconds")
        .tumble("event_time", "60 seconds")
        .combine_per_key(["key", "window_start", "window_end"], total=sb.Sum("amount"))
    )


def test_stream(epochs: list[list[dict[str, Any]]]) -> sb.TestStream:
    stream = sb.TestStream(schema={"key": str, "amount": float, "event_time": datetime})
    for rows in epochs:
        stream.add_epoch(rows)
    return stream


def sums(rows: list[dict[str, Any]]) -> Sums:
    """`(key, window start) -> total` of the windowed totals' rows."""
    return {(row["key"], row["window_start"]): row["total"] for row in rows}


def direct_sums(epochs: list[list[dict[str, Any]]]) -> Sums:
    """The reference: the same pipeline over the same epochs on the direct runner."""
    p = sb.Pipeline(runner=sb.DirectRunner())
    totals = windowed_totals(p | test_stream(epochs))
    return sums(p.run().collect(totals))


def run_sparkbeam(
    spark: SparkSession, epochs: list[list[dict[str, Any]]], answer: dict[str, Sums]
) -> float:
    """Seconds to run and collect the pipeline; its sums (made after the clock) into
    `answer["sparkbeam"]`."""
    stream = test_stream(epochs)
    start = time.perf_counter()
    p = sb.Pipeline(runner=sb.SparkRunner(spark=spark))
    totals = windowed_totals(p | stream)
    rows = p.run().collect(totals)
    seconds = time.perf_counter() - start
    answer["sparkbeam"] = sums(rows)
    return seconds


def check_variants(
    names: list[str], answer: dict[str, Sums], reference: str, want: Callable[[], Sums]
) -> list[str]:
    """What is checked of the variants run (`names`): `sparkbeam`'s sums against `want()`
    (a difference stops the benchmark); the hand-written ones are said not to be."""
    checked = [
        check_sums(name, answer[name], reference, want()) for name in names if name in answer
    ]
    others = [name for name in names if name not in answer]
    if others:
        checked.append(
            f"not checked: {', '.join(others)} (Spark's own rule for late rows, a row kept "
            "while its window is open: other sums by design)"
        )
    return checked


def arguments(doc: str | None, rows: int) -> argparse.Namespace:
    """The options both streaming benchmarks take."""
    parser = argparse.ArgumentParser(description=doc)
    parser.add_argument("--rows", type=int, default=rows)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument(
        "--variants",
        default="",
        help="names to run, separated by ';' (names hold commas; default: all)",
    )
    parser.add_argument(
        "--repeat", type=int, default=1, help="rounds of every variant, interleaved (median)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON line (for run.py)")
    return parser.parse_args()


def main() -> None:
    args = arguments(__doc__, rows=2_000_000)
    spark = session()
    epochs = make_epochs(args.rows, args.epochs)
    data = tempfile.mkdtemp(prefix="sparkbeam-bench-data-")
    files = write_files(epochs, data)
    variants: dict[str, Callable[[], float]] = {
        "hand-written": lambda: run_query(spark, lambda d: hand_written(spark, d, None), files),
        "hand-written + end of input": lambda: run_query(
            spark, lambda d: hand_written(spark, d, None), [*files, end_of_input(data)]
        ),
        "hand-written observed as sparkbeam": lambda: run_query(
            spark, lambda d: observed_hand_written(spark, d), files
        ),
        "+ dedup filter": lambda: run_query(
            spark, lambda d: hand_written(spark, d, judge_filter("dedup")), files
        ),
        "+ within-watermark filter": lambda: run_query(
            spark, lambda d: hand_written(spark, d, judge_filter("within")), files
        ),
        "+ transformWithState filter": lambda: run_query(
            spark, lambda d: hand_written(spark, d, judge_filter("tws")), files, TWS
        ),
        "sparkbeam": lambda: run_sparkbeam(spark, epochs, answer),
    }
    answer: dict[str, Sums] = {}
    title = (
        f"Spark streaming, watermark + tumble 60 s + per-key sum, {args.rows:,} rows, "
        f"{args.epochs} epochs, local[2]"
    )
    measure(
        variants,
        args,
        title,
        lambda names: check_variants(
            names, answer, "the direct runner", lambda: direct_sums(epochs)
        ),
    )
    shutil.rmtree(data, ignore_errors=True)


def _stat(pid: int) -> tuple[int, float] | None:
    """A process's parent and its CPU seconds with its reaped children's (`/proc/<pid>/stat`)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    ticks = sum(int(value) for value in fields[11:15])  # utime, stime, cutime, cstime
    return int(fields[1]), ticks / os.sysconf("SC_CLK_TCK")


def cpu_seconds(spark: SparkSession) -> float:
    """CPU seconds so far of this process, Spark's JVM and every process under it (its Python
    workers): on a machine other work shares, a steadier measure than wall time."""
    jvm = spark.sparkContext._gateway.proc.pid  # type: ignore[union-attr]
    stats = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := _stat(int(entry))) is not None:
            stats[int(entry)] = stat
    total = sum(os.times()[:2])
    for pid, (parent, seconds) in stats.items():
        while parent not in (0, 1, jvm) and parent in stats:
            parent = stats[parent][0]
        if pid == jvm or parent == jvm:
            total += seconds
    return total


def measure(
    variants: dict[str, Callable[[], float]],
    args: argparse.Namespace,
    title: str,
    check: Callable[[list[str]], list[str]],
    more: Callable[[list[str]], dict[str, Any]] | None = None,
) -> None:
    """Run the chosen variants after a warm-up, `--repeat` rounds of all of them in turn (so
    that a change in the machine's load falls on every variant alike); then `check` the
    results of the variants run (untimed; it stops the benchmark on a wrong result and says
    what it checked); print the median of each and the checks as a table, or one JSON line
    for run.py (with what `more` gives for the variants run)."""
    if args.variants:
        wanted = {"hand-written", *args.variants.split(";")}
        variants = {name: run for name, run in variants.items() if name in wanted}
    variants["hand-written"]()  # warm-up
    spark = SparkSession.getActiveSession()
    assert spark is not None
    rounds: dict[str, list[float]] = {name: [] for name in variants}
    cpu: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(args.repeat):
        for name, variant in variants.items():
            before = cpu_seconds(spark)
            rounds[name].append(variant())
            cpu[name].append(cpu_seconds(spark) - before)

    def median_ratios(runs: dict[str, list[float]]) -> dict[str, float]:
        """The median of each round's ratio to the hand-written figure of the same round."""
        base = runs["hand-written"]
        return {
            name: statistics.median(t / h for t, h in zip(times, base, strict=True))
            for name, times in runs.items()
        }

    checked = check(list(variants))
    results = {name: statistics.median(times) for name, times in rounds.items()}
    ratios = median_ratios(rounds)
    cpu_ratios = median_ratios(cpu)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    if args.json:
        print(
            json.dumps(
                {
                    "rows": args.rows,
                    "epochs": args.epochs,
                    "seconds": results,
                    "ratios": ratios,
                    "rounds": rounds,
                    "cpu": {name: statistics.median(times) for name, times in cpu.items()},
                    "cpu_ratios": cpu_ratios,
                    "load": load,
                    "checked": checked,
                    **(more(list(variants)) if more else {}),
                }
            )
        )
        return
    print(title)
    print(f"{'query':<50} {'seconds':>8} {'rows/s':>10} {'vs hand-written':>16} {'cpu ratio':>10}")
    for name, seconds in results.items():
        print(
            f"{name:<50} {seconds:>8.2f} {args.rows / seconds:>10,.0f} {ratios[name]:>15.2f}x"
            f" {cpu_ratios[name]:>9.2f}x"
        )
    print(f"({args.repeat} round(s), medians; load average at the end: {load})")
    print("checked:", *checked, sep="\n- ")


if __name__ == "__main__":
    main()
