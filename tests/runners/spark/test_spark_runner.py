"""The Spark runner on bounded input (SPEC sections 1, 5 and 6), and the session it runs on.

What is specific to Spark: `to_dataframe` and `explain`, the Python values
`collect` gives back, the pipelines Spark refuses when they are translated
(`emit="event"`, columns of type object), the errors bad input gets (never a
raw Py4J trace as the only message), the counters of `WithWatermark`,
`runner="spark"`, and files written by one runner and read by the other.
Row-for-row agreement of whole pipelines is in `tests/agreement/`.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

import sparkbeam as sb
from tests.agreement.pipelines import row_multiset

pytestmark = pytest.mark.spark

RAW_TRACE_MARKS = ("Py4JJavaError", "py4j", "at org.apache", "Traceback", "SQLSTATE")


def at(hour: int, minute: int, second: int = 0, micro: int = 0) -> datetime:
    return datetime(2026, 4, 1, hour, minute, second, micro)


def on(name: str, spark_runner: Any) -> Any:
    """The runner called `name`: a fresh direct runner or the session's Spark runner."""
    return spark_runner if name == "spark" else sb.DirectRunner()


def run_and_collect(p: sb.Pipeline, *pcolls: sb.PCollection) -> list[list[dict[str, Any]]]:
    """Run `p` and collect each PCollection (Spark computes them only when collected)."""
    result = p.run()
    return [result.collect(pcoll) for pcoll in pcolls]


def assert_clean_message(message: str) -> None:
    """A message for a user: no Java or Python trace, no internal marker."""
    for mark in RAW_TRACE_MARKS:
        assert mark not in message, f"{mark!r} in {message!r}"
    assert not message.startswith("sparkbeam.DataError")


# --- the runner and its session ----------------------------------------------------------


def progress_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The Spark runner's progress lines `caplog` caught (`runners/spark/execute/progress.py`)."""
    return [r.getMessage() for r in caplog.records if r.name == "sparkbeam.spark"]


def test_runner_spark_as_a_string_reuses_the_running_session(
    spark: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="sparkbeam")
    p = sb.Pipeline(runner="spark")
    assert isinstance(p.runner, sb.SparkRunner)
    rows = p | sb.Create([{"n": 1}, {"n": 2}])
    doubled = rows.select(n=sb.col("n") + 1)
    result = p.run()
    assert isinstance(result, sb.SparkResult)
    assert p.runner.spark is spark  # SparkSession.builder.getOrCreate() found the test session
    assert sorted(r["n"] for r in result.collect(doubled)) == [2, 3]
    # what it did, said as it went: translating, then each PCollection it computes
    assert progress_lines(caplog) == [
        "translating 2 transforms into a Spark batch job",
        f"computing {doubled.node.label}",
    ]


def test_context_manager_and_assert_that_on_spark(spark_runner: Any) -> None:
    with sb.Pipeline(runner=spark_runner) as p:
        rows = p | sb.Create([{"k": "a", "n": 1}, {"k": "a", "n": 2}, {"k": "b", "n": 5}])
        totals = rows.combine_per_key("k", total=sb.Sum("n"))
        sb.assert_that(totals, sb.equal_to([{"k": "a", "total": 3}, {"k": "b", "total": 5}]))
    assert isinstance(p.result, sb.SparkResult)
    with pytest.raises(AssertionError, match="total"), sb.Pipeline(runner=spark_runner) as p:
        rows = p | sb.Create([{"k": "a", "n": 1}])
        sb.assert_that(rows.combine_per_key("k", total=sb.Sum("n")), sb.equal_to([]))


PROVIDER = "spark.sql.streaming.stateStore.providerClass"
HDFS_PROVIDER = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"


@pytest.fixture
def provider_named(spark: Any) -> Iterator[str]:
    """The session's state store provider set by name (Spark's default), put back after."""
    before = spark.conf.get(PROVIDER, None)
    spark.conf.set(PROVIDER, HDFS_PROVIDER)
    yield HDFS_PROVIDER
    if before is None:
        spark.conf.unset(PROVIDER)
    else:
        spark.conf.set(PROVIDER, before)


def sorted_stream(p: sb.Pipeline) -> sb.PCollection:
    """A `Sort` on unbounded input: its query needs the RocksDB state store when it starts."""
    stream = sb.TestStream().add_epoch([{"t": 3}, {"t": 1}]).add_epoch([{"t": 7}])
    return (p | stream).with_watermark("t", 0).sort("t")


def test_a_streaming_run_leaves_the_sessions_settings_as_they_were(
    spark: Any, spark_runner: Any, provider_named: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="sparkbeam")
    p = sb.Pipeline(runner=spark_runner)
    ordered = sorted_stream(p)
    result = p.run()
    assert spark.conf.get(PROVIDER) == provider_named
    # the query, started when collected, starts with the settings it needs all the same
    assert result.collect(ordered) == [{"t": 1}, {"t": 3}, {"t": 7}]
    assert spark.conf.get(PROVIDER) == provider_named
    # each phase said as it went: translating, the query started, each epoch, the end
    said = [re.sub(r"\(\d+\.\d s\)", "(s)", line) for line in progress_lines(caplog)]
    assert said == [
        "translating 3 transforms into Structured Streaming queries",
        f"started the query of {ordered.node.label}",
        "replaying 2 epochs through 1 query, a micro-batch each, then the end of input",
        "epoch 1 run (s)",
        "epoch 2 run (s)",
        "end of input run; stopping the queries",
    ]


def test_a_streaming_run_that_raises_leaves_the_sessions_settings_as_they_were(
    spark: Any, spark_runner: Any, provider_named: str
) -> None:
    def store(rows: list[dict[str, Any]], batch: int) -> None:
        raise RuntimeError("the sink's store is down")

    p = sb.Pipeline(runner=spark_runner)
    sorted_stream(p).for_each_batch(store)
    with pytest.raises(Exception, match="the sink's store is down"):
        p.run()
    assert spark.conf.get(PROVIDER) == provider_named


# --- to_dataframe and explain ------------------------------------------------------------


def test_to_dataframe_is_a_spark_dataframe_with_the_pcollections_schema(spark_runner: Any) -> None:
    from pyspark.sql import DataFrame
    from pyspark.sql import types as T

    p = sb.Pipeline(runner=spark_runner)
    rows = p | sb.Create(
        [
            {"id": "o1", "n": 3, "x": 1.5, "ok": True, "raw": b"\x01", "t": at(10, 0, 30)},
            {"id": "o2", "n": None, "x": None, "ok": None, "raw": None, "t": at(10, 1, 10)},
        ]
    )
    windowed = rows.tumble("t", "1 minute")
    ticks = (p | sb.Create([{"tick": 7}])).tumble("tick", 5)
    result = p.run()

    frame = result.to_dataframe(windowed)
    assert isinstance(frame, DataFrame)
    assert frame.columns == list(windowed.schema.names)
    assert {f.name: f.dataType for f in frame.schema.fields} == {
        "id": T.StringType(),
        "n": T.LongType(),
        "x": T.DoubleType(),
        "ok": T.BooleanType(),
        "raw": T.BinaryType(),
        "t": T.TimestampType(),
        "window_start": T.TimestampType(),
        "window_end": T.TimestampType(),
    }
    # The user can go on in Spark.
    assert frame.filter(frame.n.isNotNull()).count() == 1

    tick_frame = result.to_dataframe(ticks)
    assert tick_frame.columns == ["tick", "window_start", "window_end"]
    assert all(f.dataType == T.LongType() for f in tick_frame.schema.fields)


def test_to_dataframe_of_a_pcollection_of_another_pipeline_is_refused(spark_runner: Any) -> None:
    p, other = sb.Pipeline(runner=spark_runner), sb.Pipeline(runner=spark_runner)
    _ = p | sb.Create([{"n": 1}])
    elsewhere = other | sb.Create([{"n": 2}])
    result = p.run()
    with pytest.raises(sb.PipelineError, match="another pipeline"):
        result.to_dataframe(elsewhere)
    with pytest.raises(sb.PipelineError, match="another pipeline"):
        result.collect(elsewhere)


def test_explain_shows_an_aggregate_for_combine_per_key(spark_runner: Any) -> None:
    p = sb.Pipeline(runner=spark_runner)
    orders = p | sb.Create([{"k": "a", "amount": 2.5, "t": at(10, 0)}])
    per_minute = orders.tumble("t", "1 minute").combine_per_key(
        ["k", "window_start"], n=sb.Count(), total=sb.Sum("amount")
    )
    projected = orders.select("k", later=sb.col("t") + "1 minute")
    result = p.run()
    plan = result.explain(per_minute)
    assert isinstance(plan, str)
    assert "Physical Plan" in plan
    assert "Aggregate" in plan
    assert "Aggregate" in result.explain(per_minute, mode="simple")
    assert "Aggregate" not in result.explain(projected)


# --- the values collect gives ------------------------------------------------------------

TYPED_ROWS = [
    {
        "id": "o1",
        "n": -(2**62),
        "x": 0.1,
        "ok": True,
        "raw": b"\x00\xff",
        "t": datetime(2026, 4, 1, 10, 0, 0, 123_456),
    },
    {"id": None, "n": None, "x": None, "ok": None, "raw": None, "t": None},
    {
        "id": 'é,"q"',
        "n": 7,
        "x": -2.5e300,
        "ok": False,
        "raw": b"",
        "t": datetime(1969, 12, 31, 23, 59, 59, 999_999),
    },
]
TYPED_SCHEMA = {"id": str, "n": int, "x": float, "ok": bool, "raw": bytes, "t": datetime}


def test_collect_gives_the_same_python_values_and_types_as_the_direct_runner(
    spark_runner: Any,
) -> None:
    outputs = {}
    for name in ("direct", "spark"):
        p = sb.Pipeline(runner=on(name, spark_runner))
        rows = p | sb.Create(TYPED_ROWS, schema=TYPED_SCHEMA)
        outputs[name] = run_and_collect(p, rows)[0]
    spark_rows, direct_rows = outputs["spark"], outputs["direct"]
    assert row_multiset(spark_rows) == row_multiset(direct_rows) == row_multiset(TYPED_ROWS)
    assert sorted(spark_rows, key=repr) == sorted(TYPED_ROWS, key=repr)  # exact, not rounded
    for row in spark_rows:
        assert list(row) == list(TYPED_SCHEMA)  # columns in schema order
        for name, kind in TYPED_SCHEMA.items():
            assert row[name] is None or type(row[name]) is kind, (name, row[name])
        assert row["t"] is None or row["t"].tzinfo is None  # naive UTC


def test_aware_datetimes_come_back_as_naive_utc(spark_runner: Any) -> None:
    p = sb.Pipeline(runner=spark_runner)
    rows = p | sb.Create(
        [
            {"t": datetime(2026, 4, 1, 12, 0, tzinfo=timezone(timedelta(hours=2)))},
            {"t": datetime(2026, 4, 1, 9, 0, tzinfo=UTC)},
            {"t": datetime(2026, 4, 1, 7, 30)},
        ]
    )
    hours = rows.tumble("t", "1 hour")
    out, windowed = run_and_collect(p, rows, hours)
    assert sorted(r["t"] for r in out) == [at(7, 30), at(9, 0), at(10, 0)]
    assert all(r["t"].tzinfo is None for r in out)
    assert sorted((r["t"], r["window_start"], r["window_end"]) for r in windowed) == [
        (at(7, 30), at(7, 0), at(8, 0)),
        (at(9, 0), at(9, 0), at(10, 0)),
        (at(10, 0), at(10, 0), at(11, 0)),
    ]
    assert all(type(r["window_start"]) is datetime for r in windowed)


def test_aggregate_types_on_spark(spark_runner: Any) -> None:
    """Sum of integers is an int, of floats a float; Mean is a float; Count an int."""
    p = sb.Pipeline(runner=spark_runner)
    rows = p | sb.Create(
        [
            {"k": "a", "n": 1, "x": 0.5, "t": at(10, 0)},
            {"k": "a", "n": 2, "x": None, "t": at(10, 5)},
            {"k": "b", "n": None, "x": None, "t": None},
        ]
    )
    out = rows.combine_per_key(
        "k",
        count=sb.Count(),
        xs=sb.Count("x"),
        total=sb.Sum("n"),
        xsum=sb.Sum("x"),
        mean=sb.Mean("n"),
        xmean=sb.Mean("x"),
        first=sb.Min("t"),
        last=sb.Max("t"),
    )
    (got,) = run_and_collect(p, out)
    by_key = {row["k"]: row for row in got}
    assert by_key == {
        "a": {
            "k": "a",
            "count": 2,
            "xs": 1,
            "total": 3,
            "xsum": 0.5,
            "mean": 1.5,
            "xmean": 0.5,
            "first": at(10, 0),
            "last": at(10, 5),
        },
        "b": {
            "k": "b",
            "count": 1,
            "xs": 0,
            "total": None,
            "xsum": None,
            "mean": None,
            "xmean": None,
            "first": None,
            "last": None,
        },
    }
    a = by_key["a"]
    assert [type(a[c]) for c in ("count", "xs", "total", "xsum", "mean", "first")] == [
        int,
        int,
        int,
        float,
        float,
        datetime,
    ]


def test_the_edges_of_the_model_on_both_runners(runner: Any) -> None:
    """Half-open windows, offsets, negative and integer times, the session merge rule."""
    p = sb.Pipeline(runner=runner)
    times = p | "times" >> sb.Create(
        [
            {"t": datetime(1969, 12, 31, 23, 59, 59, 999_999)},
            {"t": datetime(1970, 1, 1)},
            {"t": datetime(1970, 1, 1, 0, 0, 59, 999_999)},
        ]
    )
    ticks = p | "ticks" >> sb.Create([{"k": "a", "n": n} for n in (-11, -10, -1, 0, 4, 9, 15)])
    minute = times.tumble("t", "1 minute", offset="-15 seconds")
    tens = ticks.tumble("n", 10)
    hops = ticks.hop("n", 10, 5, offset=-2)
    sessions = ticks.session("n", 5, keys="k")
    out = dict(
        zip(
            ["minute", "tens", "hops", "sessions"],
            run_and_collect(p, minute, tens, hops, sessions),
            strict=True,
        )
    )

    assert sorted((r["t"], r["window_start"], r["window_end"]) for r in out["minute"]) == [
        (
            datetime(1969, 12, 31, 23, 59, 59, 999_999),
            datetime(1969, 12, 31, 23, 59, 45),
            datetime(1970, 1, 1, 0, 0, 45),
        ),
        (datetime(1970, 1, 1), datetime(1969, 12, 31, 23, 59, 45), datetime(1970, 1, 1, 0, 0, 45)),
        (
            datetime(1970, 1, 1, 0, 0, 59, 999_999),
            datetime(1970, 1, 1, 0, 0, 45),
            datetime(1970, 1, 1, 0, 1, 45),
        ),
    ]
    assert sorted((r["n"], r["window_start"], r["window_end"]) for r in out["tens"]) == [
        (-11, -20, -10),
        (-10, -10, 0),
        (-1, -10, 0),
        (0, 0, 10),
        (4, 0, 10),
        (9, 0, 10),
        (15, 10, 20),
    ]
    # size 10, slide 5, offset -2 (= 3): starts ..., -12, -7, -2, 3, 8, 13, ...
    assert sorted((r["n"], r["window_start"]) for r in out["hops"]) == [
        (-11, -17),
        (-11, -12),
        (-10, -17),
        (-10, -12),
        (-1, -7),
        (-1, -2),
        (0, -7),
        (0, -2),
        (4, -2),
        (4, 3),
        (9, 3),
        (9, 8),
        (15, 8),
        (15, 13),
    ]
    # Consecutive times at most 5 apart are one session: -11, -10 | -1, 0, 4, 9 | 15.
    assert sorted((r["n"], r["window_start"], r["window_end"]) for r in out["sessions"]) == [
        (-11, -11, -5),
        (-10, -11, -5),
        (-1, -1, 14),
        (0, -1, 14),
        (4, -1, 14),
        (9, -1, 14),
        (15, 15, 20),
    ]
    assert all(type(r["window_start"]) is int for r in out["sessions"])


def test_mean_of_nothing_and_empty_input(runner: Any) -> None:
    p = sb.Pipeline(runner=runner)
    rows = p | sb.Create(
        [{"k": "a", "x": None}, {"k": "a", "x": None}], schema={"k": str, "x": float}
    )
    per_key = rows.combine_per_key("k", mean=sb.Mean("x"), total=sb.Sum("x"), n=sb.Count("x"))
    nothing = rows.filter(lambda row: False)
    overall = nothing.combine_per_key([], n=sb.Count(), mean=sb.Mean("x"))
    by_key = nothing.combine_per_key("k", n=sb.Count())
    got = run_and_collect(p, per_key, overall, by_key)
    assert got == [[{"k": "a", "mean": None, "total": None, "n": 0}], [], []]


# --- the counters of WithWatermark -------------------------------------------------------


def test_invalid_count_and_late_count(runner: Any) -> None:
    p = sb.Pipeline(runner=runner)
    orders = p | sb.Create(
        [
            {"id": "a", "t": at(10, 30), "n": 5},
            {"id": "b", "t": None, "n": None},
            {"id": "c", "t": at(9, 0), "n": 1},  # far behind, but bounded input is one epoch
            {"id": "d", "t": None, "n": 2},
            {"id": "e", "t": at(10, 31), "n": None},
        ]
    )
    by_time = orders.with_watermark("t", "5 minutes")
    by_number = by_time.with_watermark("n", 0)
    per_hour = by_time.tumble("t", "1 hour").combine_per_key("window_start", n=sb.Count())
    result = p.run()
    assert sorted(r["id"] for r in result.collect(by_time)) == ["a", "c", "e"]
    assert sorted(r["id"] for r in result.collect(by_number)) == ["a", "c"]
    assert sorted((r["window_start"], r["n"]) for r in result.collect(per_hour)) == [
        (at(9, 0), 1),
        (at(10, 0), 2),
    ]
    assert result.invalid_count(by_time) == 2
    assert result.invalid_count(by_number) == 1
    assert result.late_count(by_time) == 0
    assert result.late_count(by_number) == 0
    with pytest.raises(sb.PipelineError, match="with_watermark"):
        result.late_count(per_hour)
    with pytest.raises(sb.PipelineError, match="with_watermark"):
        result.invalid_count(orders)


def test_invalid_count_on_an_integer_time_column(runner: Any) -> None:
    p = sb.Pipeline(runner=runner)
    ticks = p | sb.Create([{"t": None}, {"t": -3}, {"t": None}, {"t": 8}], schema={"t": int})
    marked = ticks.with_watermark("t", 2)
    result = p.run()
    assert sorted(r["t"] for r in result.collect(marked)) == [-3, 8]
    assert result.invalid_count(marked) == 2
    assert result.late_count(marked) == 0


# --- refused when translated -------------------------------------------------------------


def test_emit_event_is_refused_on_spark(spark_runner: Any) -> None:
    p = sb.Pipeline(runner=spark_runner)
    _ = p | sb.Create([{"t": 1}]) | "every row" >> sb.WithWatermark("t", 0, emit="event")
    with pytest.raises(sb.PipelineError) as info:
        p.run()
    message = str(info.value)
    assert "every row" in message
    assert "emit='event'" in message
    assert "periodic" in message  # what to use instead


class Collect(sb.CombineFn):
    """A CombineFn that declares no output type: its column is of type object."""

    def create_accumulator(self) -> list[Any]:
        return []

    def add_input(self, accumulator: list[Any], element: dict[str, Any]) -> list[Any]:
        return [*accumulator, element["n"]]

    def merge_accumulators(self, accumulators: Sequence[list[Any]]) -> list[Any]:
        return [x for accumulator in accumulators for x in accumulator]

    def extract_output(self, accumulator: list[Any]) -> list[Any]:
        return sorted(accumulator)


@pytest.mark.parametrize(
    ("where", "fix"),
    [
        ("create", "schema={..., 'payload': str}"),
        ("stream", "schema={..., 'payload': str}"),
        ("map", "in the schema= of the Map"),
        ("flat_map", "in the schema= of the FlatMap"),
        ("combine_fn", "set output_type on the CombineFn Collect"),
    ],
)
def test_columns_of_type_object_are_refused(spark_runner: Any, where: str, fix: str) -> None:
    """Refused before anything runs (also on unbounded input, where a `TestStream` of them
    failed deep in the feed), saying where the column's type is declared."""
    p = sb.Pipeline(runner=spark_runner)
    payload = {"k": str, "payload": object}
    if where == "create":
        _ = p | "source" >> sb.Create([{"k": "a", "payload": {"x": 1}}], schema=payload)
    elif where == "stream":
        stream = sb.TestStream(payload).add_epoch([{"k": "a", "payload": {"x": 1}}])
        _ = p | "source" >> stream | sb.Map(lambda row: row, schema={"k": str})
    elif where == "map":
        rows = p | sb.Create([{"k": "a", "n": 1}])
        _ = rows | "source" >> sb.Map(
            lambda row: {"k": row["k"], "payload": [row["n"]]}, schema=payload
        )
    elif where == "flat_map":
        rows = p | sb.Create([{"k": "a", "n": 1}])
        _ = rows | "source" >> sb.FlatMap(
            lambda row: [{"k": row["k"], "payload": [row["n"]]}], schema=payload
        )
    else:
        rows = p | sb.Create([{"k": "a", "n": 1}])
        _ = rows | "source" >> sb.CombinePerKey("k", payload=Collect())
    with pytest.raises(sb.PipelineError) as info:
        p.run()
    message = str(info.value)
    assert "source" in message
    assert "'payload'" in message
    assert "object" in message
    assert "'k'" not in message
    assert fix in message, message


@pytest.mark.parametrize("live", [False, True], ids=["batch", "live"])
def test_unsigned_64_bit_parquet_integers_are_refused_naming_the_column(
    spark_runner: Any, tmp_path: Path, live: bool
) -> None:
    """Spark's reader fails on them deep in a task, naming no column
    (`PlainValuesDictionary$PlainLongDictionary`); the runner refuses them first."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    source = tmp_path / "in"
    source.mkdir()
    table = pa.table({"k": ["a"], "odd": pa.array([1], pa.uint64())})
    pq.write_table(table, source / "part-0.parquet")
    p = sb.Pipeline(runner=spark_runner)
    rows = p | sb.ReadFiles(str(source), streaming=live)
    _ = rows | sb.WriteFiles(str(tmp_path / "out")) if live else rows
    with pytest.raises(sb.PipelineError) as info:
        p.run()
    message = str(info.value)
    assert message.startswith("ReadFiles(in): column 'odd' of "), message
    assert "part-0.parquet" in message and "uint64" in message
    assert "signed 64-bit integers" in message


PANDAS_MODES = ["batch", "replayed"]
"""Where the runner reads parquet's nanosecond timestamps (a live source refuses them)."""


def read_on_spark(spark_runner: Any, source: Path, out: Path, mode: str) -> list[dict[str, Any]]:
    """The rows of `ReadFiles(source)` on Spark: bounded, replayed (unbounded, collected: the
    runner reads the files through Arrow) or live (Spark's file source into a file sink)."""
    p = sb.Pipeline(runner=spark_runner)
    rows = p | "Orders" >> sb.ReadFiles(str(source), streaming=mode != "batch")
    if mode != "live":
        return p.run().collect(rows)
    rows.write_files(str(out))
    result = p.run()
    try:
        result.process_all_available()
    finally:
        result.stop()
    return read_on_direct(out)


def read_on_direct(source: Path) -> list[dict[str, Any]]:
    p = sb.Pipeline()
    rows = p | "Orders" >> sb.ReadFiles(str(source))
    return p.run().collect(rows)


@pytest.mark.parametrize("mode", PANDAS_MODES)
def test_parquet_written_by_pandas_reads_as_on_the_direct_runner(
    spark_runner: Any, tmp_path: Path, mode: str
) -> None:
    """`DataFrame.to_parquet` with pandas' defaults writes nanosecond timestamps, naive or
    with a time zone as the DataFrame's; Spark's reader fails on them by default."""
    import pandas as pd

    source = tmp_path / "in"
    source.mkdir()
    times = pd.to_datetime(["2026-04-01 10:00:00.000005", "2026-04-01 10:00:01.250000"])
    frame = pd.DataFrame({"k": ["a", "b"], "v": [1, 2], "t": times})
    frame.to_parquet(source / "naive.parquet")
    frame.assign(k=["c", "d"], t=times.tz_localize("Europe/Paris")).to_parquet(
        source / "zoned.parquet"
    )
    expected = read_on_direct(source)
    assert {row["t"] for row in expected} == {
        datetime(2026, 4, 1, 10, 0, 0, 5),
        datetime(2026, 4, 1, 10, 0, 1, 250000),
        datetime(2026, 4, 1, 8, 0, 0, 5),
        datetime(2026, 4, 1, 8, 0, 1, 250000),
    }
    rows = read_on_spark(spark_runner, source, tmp_path / "out", mode)
    assert row_multiset(rows) == row_multiset(expected)


def test_parquet_files_of_two_time_units_in_one_directory(
    spark_runner: Any, tmp_path: Path
) -> None:
    """Spark reads a column in one unit per read: a batch read reads the nanosecond files and
    the others apart (the direct runner's rows); a live source, one directory read as files
    come, refuses them, naming both files."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    source = tmp_path / "in"
    source.mkdir()
    nanos = pd.to_datetime(["2026-04-01 10:00:00.000005"])
    pd.DataFrame({"k": ["a"], "t": nanos}).to_parquet(source / "a.parquet")
    micros = pa.array([datetime(2026, 4, 1, 11, 0, 0, 7)], pa.timestamp("us", tz="UTC"))
    pq.write_table(pa.table({"k": ["b"], "t": micros}), source / "b.parquet")
    expected = read_on_direct(source)
    assert len(expected) == 2
    assert row_multiset(read_on_spark(spark_runner, source, tmp_path / "out", "batch")) == (
        row_multiset(expected)
    )
    with pytest.raises(sb.PipelineError) as info:
        read_on_spark(spark_runner, source, tmp_path / "out", "live")
    message = str(info.value)
    assert message.startswith("Orders: "), message
    assert "column 't'" in message and "a.parquet" in message, message
    assert "coerce_timestamps='us'" in message, message
    assert not (tmp_path / "out").exists()  # refused before anything ran


def test_a_live_source_refuses_pandas_nanosecond_files_naming_column_file_and_fix(
    spark_runner: Any, tmp_path: Path
) -> None:
    """Spark's file source fixes a column's unit when it starts: a later file in microseconds
    would be read as nanoseconds with no error, so nanosecond files are refused there."""
    import pandas as pd

    source = tmp_path / "in"
    source.mkdir()
    times = pd.to_datetime(["2026-04-01 10:00:00.000005"])
    pd.DataFrame({"k": ["a"], "t": times}).to_parquet(source / "orders.parquet")
    with pytest.raises(sb.PipelineError) as info:
        read_on_spark(spark_runner, source, tmp_path / "out", "live")
    message = str(info.value)
    assert "column 't'" in message and "orders.parquet" in message, message
    assert "nanosecond" in message and "coerce_timestamps='us'" in message, message


@pytest.mark.parametrize("mode", PANDAS_MODES)
def test_a_nanosecond_time_finer_than_a_microsecond_is_the_direct_runners_data_error(
    spark_runner: Any, tmp_path: Path, mode: str
) -> None:
    """Times are kept in microseconds on both runners: Spark fails as the direct runner does,
    naming the column, the file and the time to the nanosecond."""
    import pandas as pd

    source = tmp_path / "in"
    source.mkdir()
    times = pd.to_datetime(
        ["2026-04-01 10:00:00", "2026-04-01 10:00:00.000000001"], format="ISO8601"
    )
    pd.DataFrame({"k": ["a", "b"], "t": times}).to_parquet(source / "a.parquet")
    with pytest.raises(sb.DataError) as direct:
        read_on_direct(source)
    with pytest.raises(sb.DataError) as spark:
        read_on_spark(spark_runner, source, tmp_path / "out", mode)
    assert str(direct.value).startswith(f"Orders: column 't' of '{source / 'a.parquet'}' ")
    assert "2026-04-01 10:00:00.000000001" in str(direct.value)
    assert str(spark.value) == str(direct.value)


def test_a_refused_pipeline_runs_nothing(spark_runner: Any, tmp_path: Path) -> None:
    """Refused when translated, before any job: files written upstream are not written."""
    target = tmp_path / "out"
    p = sb.Pipeline(runner=spark_runner)
    written = (p | sb.Create([{"t": 1}, {"t": 2}])).write_files(str(target))
    _ = written.with_watermark("t", 0, emit="event")
    with pytest.raises(sb.PipelineError, match="emit"):
        p.run()
    assert not target.exists()


# --- bad input: data errors --------------------------------------------------------------


@pytest.mark.parametrize(
    "kind, value",
    [
        (int, "7"),
        (int, 1.5),
        (float, "1.5"),
        (datetime, "2026-04-01 10:02"),
        (datetime, 5),
        (str, 5),
    ],
)
def test_a_value_of_the_wrong_type_names_the_column_and_row(
    spark_runner: Any, kind: type, value: Any
) -> None:
    p = sb.Pipeline(runner=spark_runner)
    bad = {"k": "b", "v": value}
    _ = p | "orders" >> sb.Create([{"k": "a", "v": None}, bad], schema={"k": str, "v": kind})
    with pytest.raises(sb.DataError) as info:
        p.run()
    assert info.value.row == bad
    message = str(info.value)
    assert "orders" in message
    assert "'v'" in message
    assert repr(value) in message
    assert_clean_message(message)


def test_a_row_missing_a_column_names_the_column(spark_runner: Any) -> None:
    p = sb.Pipeline(runner=spark_runner)
    bad = {"id": "o2", "t": at(10, 1)}
    _ = p | "orders" >> sb.Create([{"id": "o1", "amount": 1.0, "t": at(10, 0)}, bad])
    with pytest.raises(sb.DataError) as info:
        p.run()
    assert info.value.row == bad
    message = str(info.value)
    assert "orders" in message
    assert "'amount'" in message
    assert_clean_message(message)


def test_an_integer_too_large_for_spark_is_a_data_error(spark_runner: Any) -> None:
    p = sb.Pipeline(runner=spark_runner)
    _ = p | "big" >> sb.Create([{"n": 2**63}])
    with pytest.raises(sb.DataError) as info:
        p.run()
    message = str(info.value)
    assert "big" in message
    assert "'n'" in message
    assert "64-bit" in message


# Spark's workers unpickle a module-level function by importing its module, and pytest
# imports this module under a name they cannot import: functions and CombineFns that run
# on Spark are made inside functions, so that they are pickled by value.


def make_divide() -> Any:
    def divide(row: dict[str, Any]) -> dict[str, Any]:
        return {**row, "n": 10 // row["n"]}

    return divide


def test_a_map_function_raising_in_a_python_worker_is_a_data_error(spark_runner: Any) -> None:
    p = sb.Pipeline(runner=spark_runner)
    out = (
        p | sb.Create([{"k": "a", "n": 5}, {"k": "b", "n": 0}]) | "divide" >> sb.Map(make_divide())
    )
    with pytest.raises(sb.DataError) as info:
        run_and_collect(p, out)
    message = str(info.value)
    assert "divide" in message
    assert "ZeroDivisionError" in message
    assert "{'k': 'b', 'n': 0}" in message  # the row
    assert_clean_message(message)


@pytest.mark.parametrize(
    "fn, schema, named",
    [
        (lambda row: {"k": row["k"]}, None, ["'n'", "missing"]),
        (lambda row: {**row, "n": str(row["n"])}, None, ["'n'", "'1'", "int"]),
        (
            lambda row: {"k": row["k"], "t": row["n"]},
            {"k": str, "t": datetime},
            ["'t'", "datetime"],
        ),
    ],
    ids=["missing column", "wrong type", "int for a datetime"],
)
def test_a_map_returning_a_bad_row_is_a_data_error(
    spark_runner: Any, fn: Any, schema: Any, named: list[str]
) -> None:
    p = sb.Pipeline(runner=spark_runner)
    out = p | sb.Create([{"k": "a", "n": 1}]) | "reshape" >> sb.Map(fn, schema=schema)
    with pytest.raises(sb.DataError) as info:
        run_and_collect(p, out)
    message = str(info.value)
    assert "reshape" in message
    for part in named:
        assert part in message
    assert_clean_message(message)


def test_a_filter_predicate_raising_is_a_data_error(spark_runner: Any) -> None:
    p = sb.Pipeline(runner=spark_runner)
    out = (
        p
        | sb.Create([{"k": "a"}, {"k": None}], schema={"k": str})
        | "long names" >> sb.Filter(lambda row: len(row["k"]) > 0)
    )
    with pytest.raises(sb.DataError) as info:
        run_and_collect(p, out)
    message = str(info.value)
    assert "long names" in message
    assert "TypeError" in message
    assert "{'k': None}" in message
    assert_clean_message(message)


def make_failing() -> sb.CombineFn:
    class Failing(sb.CombineFn):
        output_type = int

        def create_accumulator(self) -> int:
            return 0

        def add_input(self, accumulator: int, element: dict[str, Any]) -> int:
            return accumulator + 100 // element["n"]

        def merge_accumulators(self, accumulators: Sequence[int]) -> int:
            return sum(accumulators)

        def extract_output(self, accumulator: int) -> int:
            return accumulator

    return Failing()


def test_a_combine_fn_raising_is_a_data_error(spark_runner: Any) -> None:
    p = sb.Pipeline(runner=spark_runner)
    out = (
        p
        | sb.Create([{"k": "a", "n": 0}])
        | "shares" >> sb.CombinePerKey("k", share=make_failing())
    )
    with pytest.raises(sb.DataError) as info:
        run_and_collect(p, out)
    message = str(info.value)
    assert "shares" in message
    assert "share" in message
    assert "ZeroDivisionError" in message
    assert_clean_message(message)


def test_a_pipeline_runs_again_after_a_data_error(spark_runner: Any) -> None:
    """A failed job leaves the session usable."""
    p = sb.Pipeline(runner=spark_runner)
    out = p | sb.Create([{"k": "a", "n": 0}]) | sb.Map(make_divide())
    with pytest.raises(sb.DataError):
        run_and_collect(p, out)
    q = sb.Pipeline(runner=spark_runner)
    fine = q | sb.Create([{"k": "a", "n": 5}]) | sb.Map(make_divide())
    assert run_and_collect(q, fine) == [[{"k": "a", "n": 2}]]


@pytest.mark.parametrize(
    "transform",
    [sb.Tumble("t", 10), sb.Hop("t", 10, 5), sb.Session("t", 3), sb.Sort("t")],
    ids=["tumble", "hop", "session", "sort"],
)
def test_a_none_event_time_reaching_a_time_transform_is_a_data_error(
    runner: Any, transform: sb.PTransform
) -> None:
    """SPEC 6: None event times are dropped and counted by WithWatermark; any other
    transform that needs the time must refuse the row (neither a crash nor silently
    kept with no window)."""
    p = sb.Pipeline(runner=runner)
    out = p | sb.Create([{"t": 1, "k": "a"}, {"t": None, "k": "b"}]) | "timed" >> transform
    with pytest.raises(sb.DataError) as info:
        run_and_collect(p, out)
    message = str(info.value)
    assert "timed" in message
    assert "'t'" in message
    assert_clean_message(message)


# --- bad input: files --------------------------------------------------------------------


def test_a_path_that_does_not_exist_is_refused_when_applied(tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-dir")
    p = sb.Pipeline(runner="spark")
    with pytest.raises(sb.PipelineError) as info:
        p | sb.ReadFiles(missing, format="parquet")
    assert repr(missing) in str(info.value)


def test_a_path_removed_before_the_run_names_the_path(runner: Any, tmp_path: Path) -> None:
    data = tmp_path / "orders"
    writer = sb.Pipeline()
    (writer | sb.Create([{"n": 1}])).write_files(str(data))
    writer.run()
    p = sb.Pipeline(runner=runner)
    out = p | sb.ReadFiles(str(data))
    shutil.rmtree(data)
    with pytest.raises((sb.PipelineError, sb.DataError)) as info:
        run_and_collect(p, out)
    message = str(info.value)
    assert str(data) in message
    assert_clean_message(message)


@pytest.fixture
def parquet_dir(tmp_path: Path) -> Path:
    data = tmp_path / "parquet"
    p = sb.Pipeline()
    (p | sb.Create([{"id": "a", "n": 1, "t": at(10, 0)}])).write_files(str(data))
    p.run()
    return data


@pytest.mark.parametrize(
    "schema, named",
    [
        ({"n": str}, ["column 'n' of", "int64 (int) in the file but str in schema=", "cast(str)"]),
        ({"missing": int}, ["has no column 'missing' (int in schema=)", "['id', 'n', 't']"]),
    ],
)
def test_a_parquet_schema_that_does_not_match_the_files(
    spark_runner: Any, parquet_dir: Path, schema: dict[str, type], named: list[str]
) -> None:
    p = sb.Pipeline(runner=spark_runner)
    with pytest.raises(sb.PipelineError) as info:
        p | "orders" >> sb.ReadFiles(str(parquet_dir), schema=schema)
    message = str(info.value)
    assert "orders" in message
    assert str(parquet_dir) in message
    for part in named:
        assert part in message


def test_a_parquet_file_that_no_longer_matches_when_the_pipeline_runs(
    runner: Any, parquet_dir: Path
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    p = sb.Pipeline(runner=runner)
    out = p | "orders" >> sb.ReadFiles(str(parquet_dir))
    late = pa.table(
        {
            "id": ["b"],
            "n": ["not a number"],
            "t": pa.array([0], type=pa.timestamp("us", tz="UTC")),
        }
    )
    pq.write_table(late, parquet_dir / "part-zz-late.parquet")
    with pytest.raises((sb.DataError, sb.PipelineError)) as info:
        run_and_collect(p, out)
    message = str(info.value)
    assert "column 'n' of " in message and "part-zz-late.parquet" in message
    assert "is string (str) in the file but int in the schema read from the files" in message
    assert "rewrite the file with 'n' as int64" in message
    assert_clean_message(message)


@pytest.mark.parametrize(
    "format, text",
    [("json", '{"n": 1}\n{"n": "seven"}\n'), ("csv", "n\n1\nseven\n")],
    ids=["json", "csv"],
)
def test_a_text_file_with_a_value_of_the_wrong_type(
    runner: Any, tmp_path: Path, format: str, text: str
) -> None:
    data = tmp_path / "bad"
    data.mkdir()
    (data / f"part-0.{format}").write_text(text)
    p = sb.Pipeline(runner=runner)
    out = p | "counts" >> sb.ReadFiles(str(data), format=format, schema={"n": int})
    with pytest.raises(sb.DataError) as info:
        run_and_collect(p, out)
    message = str(info.value)
    assert "counts" in message
    assert str(data) in message
    assert_clean_message(message)


def test_a_csv_file_without_a_column_of_the_schema(runner: Any, tmp_path: Path) -> None:
    data = tmp_path / "header"
    data.mkdir()
    (data / "part-0.csv").write_text("n,m\n1,2\n")
    p = sb.Pipeline(runner=runner)
    out = p | "counts" >> sb.ReadFiles(str(data), format="csv", schema={"n": int, "q": int})
    with pytest.raises(sb.DataError) as info:
        run_and_collect(p, out)
    message = str(info.value)
    assert "'q'" in message
    assert str(data) in message
    assert_clean_message(message)


@pytest.mark.parametrize(
    "schema, expected",
    [
        ({"n": int, "m": int}, {"n": 2, "m": 1}),
        ({"n": int}, {"n": 2}),
    ],
    ids=["other order", "fewer columns"],
)
def test_csv_columns_are_read_by_header_name(
    runner: Any, tmp_path: Path, schema: dict[str, type], expected: dict[str, int]
) -> None:
    """The header row names the columns (`transforms.files`): not their position."""
    data = tmp_path / "named"
    data.mkdir()
    (data / "part-0.csv").write_text("m,n\n1,2\n")
    p = sb.Pipeline(runner=runner)
    out = p | sb.ReadFiles(str(data), format="csv", schema=schema)
    assert run_and_collect(p, out) == [[expected]]


# --- files written by one runner, read by the other --------------------------------------

FILE_ROWS = [
    {
        "id": "o1",
        "n": 2**40,
        "x": 29.99,
        "ok": True,
        "t": datetime(2026, 4, 1, 10, 0, 0, 123_456),
    },
    {"id": None, "n": None, "x": None, "ok": None, "t": None},
    {
        "id": 'comma, "quote" é',
        "n": -3,
        "x": -0.25,
        "ok": False,
        "t": datetime(1969, 12, 31, 23, 59, 59, 999_999),
    },
]
FILE_SCHEMA = {"id": str, "n": int, "x": float, "ok": bool, "t": datetime}


@pytest.mark.parametrize("format", ["parquet", "json", "csv"])
@pytest.mark.parametrize("writer, reader", [("direct", "spark"), ("spark", "direct")])
def test_files_written_by_one_runner_are_read_by_the_other(
    spark_runner: Any, tmp_path: Path, format: str, writer: str, reader: str
) -> None:
    rows = FILE_ROWS
    schema = dict(FILE_SCHEMA)
    if format == "parquet":  # bytes only in parquet
        rows = [{**row, "raw": None if row["id"] is None else row["id"].encode()} for row in rows]
        schema["raw"] = bytes
    target = str(tmp_path / f"out.{format}")

    w = sb.Pipeline(runner=on(writer, spark_runner))
    passed = (w | sb.Create(rows, schema=schema)).write_files(target, format=format)
    written = w.run()
    assert row_multiset(written.collect(passed)) == row_multiset(rows)  # rows pass on
    assert any(not name.startswith(("_", ".")) for name in os.listdir(target))

    r = sb.Pipeline(runner=on(reader, spark_runner))
    read = r | sb.ReadFiles(target, format=format, schema=None if format == "parquet" else schema)
    assert read.schema == sb.Schema.of(schema)
    (got,) = run_and_collect(r, read)
    assert sorted(got, key=repr) == sorted(rows, key=repr)  # exact values and types


SINK_ROWS = [
    {
        "k": "a",
        "t": datetime(2026, 4, 1, 10, 0, 5, 123_456),
        "n": 2**40,
        "x": 29.99,
        "ok": True,
        "note": 'comma, "quote" é\ttab',
        "raw": b"\x00\xff",
    },
    {
        "k": "a",
        "t": datetime(2026, 4, 1, 10, 0, 40),
        "n": -3,
        "x": 1e-4,
        "ok": False,
        "note": " two\nlines ",
        "raw": b"",
    },
    {
        "k": "b",
        "t": datetime(1969, 12, 31, 23, 59, 59, 999_999),
        "n": 0,
        "x": 12345678.5,
        "ok": None,
        "note": "",
        "raw": None,
    },
    {
        "k": "b",
        "t": datetime(2026, 4, 1, 10, 1),
        "n": None,
        "x": float("nan"),
        "ok": True,
        "note": None,
        "raw": b"x",
    },
    {"k": "c", "t": datetime(1, 1, 1), "n": 7, "x": None, "ok": False, "note": "\x01", "raw": None},
    {
        "k": "c",
        "t": datetime(2026, 4, 1, 10, 2),
        "n": 8,
        "x": -0.0,
        "ok": True,
        "note": " x ",
        "raw": b"y",
    },
]


def sink_outputs(runner: Any, directory: Path) -> None:
    """One pipeline over every column type, written in every format it can be: the rows
    (parquet with bytes; json and csv without) and per-minute windows (a list column;
    parquet and json)."""
    p = sb.Pipeline(runner=runner)
    rows = p | sb.Create(SINK_ROWS)
    rows.write_files(str(directory / "rows.parquet"))
    text = rows.select("k", "t", "n", "x", "ok", "note")
    text.write_files(str(directory / "rows.json"), format="json")
    text.write_files(str(directory / "rows.csv"), format="csv")
    windows = rows.tumble("t", "1 minute").combine_per_key(
        ["k", "window_start"],
        rows=sb.Count(),
        last=sb.Max("t"),
        ns=sb.CollectSet("n"),
        oks=sb.CollectSet("ok"),
        notes=sb.CollectSet("note"),
        ts=sb.CollectSet("t"),
    )
    windows.write_files(str(directory / "windows.parquet"))
    windows.write_files(str(directory / "windows.json"), format="json")
    p.run()


def file_lines(directory: Path) -> list[list[str]]:
    """The lines of each data file in `directory` (line ends kept)."""
    return [
        (directory / name).read_text(encoding="utf-8").splitlines(True)
        for name in sorted(os.listdir(directory))
        if not name.startswith(("_", "."))
    ]


def test_both_runners_sinks_write_the_same_types_and_text(
    spark_runner: Any, tmp_path: Path
) -> None:
    """The two runners' outputs of one pipeline concatenate and merge in pandas as they are:
    equal parquet schemas (times `timestamp[us, tz=UTC]`, Spark's INT96 before), and JSON and
    CSV lines alike (times, floats, booleans, None, quoting)."""
    import collections

    import pandas as pd
    import pyarrow.parquet as pq

    direct, spark = tmp_path / "direct", tmp_path / "spark"
    sink_outputs(sb.DirectRunner(), direct)
    sink_outputs(spark_runner, spark)
    for output, keys in [("rows.parquet", ["k", "t"]), ("windows.parquet", ["k", "window_start"])]:
        schemas = [pq.read_schema(next((d / output).glob("part-*"))) for d in (direct, spark)]
        assert schemas[0].equals(schemas[1]), (output, schemas)
        assert str(schemas[0].field(keys[1]).type) == "timestamp[us, tz=UTC]"
        frames = [
            pd.read_parquet(d / output).sort_values(keys).reset_index(drop=True)
            for d in (direct, spark)
        ]
        pd.testing.assert_frame_equal(frames[0], frames[1])
        both = pd.concat(frames)
        assert both.dtypes.equals(frames[0].dtypes), both.dtypes
        merged = pd.merge(frames[0], frames[1], on=keys, suffixes=("", "_spark"))
        assert len(merged) == len(frames[0]) == len(frames[1])
    for output in ("rows.json", "rows.csv", "windows.json"):
        direct_files, spark_files = (file_lines(d / output) for d in (direct, spark))
        if output.endswith(".csv"):  # a header row in each file
            headers = {lines[0] for lines in direct_files + spark_files}
            assert headers == {"k,t,n,x,ok,note\n"}, headers
            direct_files, spark_files = (
                [lines[1:] for lines in f] for f in (direct_files, spark_files)
            )
        direct_lines = collections.Counter(line for lines in direct_files for line in lines)
        spark_lines = collections.Counter(line for lines in spark_files for line in lines)
        assert direct_lines == spark_lines, output
        assert sum(direct_lines.values()) >= (6 if output.startswith("rows") else 4)


@pytest.mark.parametrize("format", ["parquet", "json", "csv"])
def test_spark_overwrites_and_reads_back_what_it_wrote(
    spark_runner: Any, tmp_path: Path, format: str
) -> None:
    target = str(tmp_path / "twice")
    for n in (1, 2):
        w = sb.Pipeline(runner=spark_runner)
        (w | sb.Create([{"n": n, "t": at(10, n)}] * n)).write_files(target, format=format)
        w.run()
    r = sb.Pipeline(runner=spark_runner)
    schema = None if format == "parquet" else {"n": int, "t": datetime}
    read = r | sb.ReadFiles(target, format=format, schema=schema)
    totals = read.combine_per_key("n", rows=sb.Count(), last=sb.Max("t"))
    assert run_and_collect(r, totals) == [[{"n": 2, "rows": 2, "last": at(10, 2)}]]


def test_write_mode_error_refuses_an_existing_path(spark_runner: Any, tmp_path: Path) -> None:
    p = sb.Pipeline(runner=spark_runner)
    rows = p | sb.Create([{"n": 1}])
    with pytest.raises(sb.PipelineError) as info:
        rows | "save" >> sb.WriteFiles(str(tmp_path), mode="error")
    message = str(info.value)
    assert "save" in message
    assert "overwrite" in message


@pytest.mark.parametrize("writer", ["direct", "spark"])
def test_csv_strings_with_line_breaks_round_trip(
    spark_runner: Any, tmp_path: Path, writer: str
) -> None:
    rows = [{"note": "two\nlines", "n": 1}, {"note": "one line", "n": 2}]
    target = str(tmp_path / "notes")
    w = sb.Pipeline(runner=on(writer, spark_runner))
    (w | sb.Create(rows)).write_files(target, format="csv")
    w.run()
    for reader in ("direct", "spark"):
        r = sb.Pipeline(runner=on(reader, spark_runner))
        read = r | sb.ReadFiles(target, format="csv", schema={"note": str, "n": int})
        (got,) = run_and_collect(r, read)
        assert sorted(got, key=repr) == sorted(rows, key=repr), reader
