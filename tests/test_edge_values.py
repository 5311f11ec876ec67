"""Edge values, the same on both runners (SPEC section 3: Spark's rules).

NaN equals NaN for grouping and joining and is larger than every other value
in `Min` and `Max`; integers are 64-bit signed (a value outside is a
`DataError`, a `Sum` that overflows is a `DataError` naming the transform).
Each rule by example, on the direct runner and on Spark (batch, and
streaming where the rule has a streaming path of its own).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest

import sparkbeam as sb
from tests.agreement.streams import outcome, side_by_side

T0 = datetime(2026, 4, 1, 10, 0)
NAN = float("nan")
INT64_MAX = 2**63 - 1


def same(a: Any, b: Any) -> bool:
    """Equal, NaN equal to NaN."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return bool(a == b)


def run_combine(runner: Any, rows: list[dict[str, Any]], keys: Any, **aggregates: Any) -> list:
    p = sb.Pipeline(runner=runner)
    out = p | sb.Create(rows, schema={"k": str, "x": float}) | sb.CombinePerKey(keys, **aggregates)
    return p.run().collect(out)


@pytest.mark.parametrize("values", [[NAN, 5.0], [5.0, NAN], [NAN, NAN, -1.0], [1.0, NAN, 7.0]])
def test_nan_is_larger_than_every_other_value_in_min_and_max(runner: Any, values: list) -> None:
    rows = [{"k": "a", "x": x} for x in values]
    [out] = run_combine(runner, rows, "k", lo=sb.Min("x"), hi=sb.Max("x"))
    assert same(out["lo"], min(v for v in values if not math.isnan(v)))
    assert math.isnan(out["hi"])


def test_min_and_max_of_only_nans_are_nan(runner: Any) -> None:
    [out] = run_combine(
        runner, [{"k": "a", "x": NAN}, {"k": "a", "x": NAN}], "k", lo=sb.Min("x"), hi=sb.Max("x")
    )
    assert math.isnan(out["lo"]) and math.isnan(out["hi"])


def test_nan_keys_form_one_group(runner: Any) -> None:
    rows = [{"k": "a", "x": NAN}, {"k": "a", "x": float("nan")}, {"k": "a", "x": 1.0}]
    out = run_combine(runner, rows, "x", n=sb.Count())
    assert sorted(row["n"] for row in out) == [1, 2]
    [nan_group] = [row for row in out if math.isnan(row["x"])]
    assert nan_group["n"] == 2


def test_nan_keys_form_one_group_with_other_keys(runner: Any) -> None:
    rows = [{"k": "a", "x": NAN}, {"k": "a", "x": -NAN}, {"k": "b", "x": NAN}]
    out = run_combine(runner, rows, ["k", "x"], n=sb.Count())
    assert sorted((row["k"], row["n"]) for row in out) == [("a", 2), ("b", 1)]


def test_nan_keys_join(runner: Any) -> None:
    p = sb.Pipeline(runner=runner)
    left = p | "L" >> sb.Create([{"x": NAN, "a": 1}, {"x": 2.0, "a": 2}])
    right = p | "R" >> sb.Create([{"x": float("nan"), "b": 10}, {"x": 3.0, "b": 30}])
    joined = left | sb.Join(right, on="x")
    out = p.run().collect(joined)
    assert [(row["a"], row["b"]) for row in out] == [(1, 10)]


def nan_keys_rows(runner: Any) -> list[tuple[bool, int]]:
    """NaN keys through a streaming `CombinePerKey`: (whether the key is NaN, count) rows."""
    stream = sb.TestStream({"k": float, "t": datetime})
    stream.add_epoch([{"k": NAN, "t": T0}, {"k": float("nan"), "t": T0 + timedelta(seconds=1)}])
    stream.add_epoch([{"k": 1.0, "t": T0 + timedelta(hours=1)}])
    p = sb.Pipeline(runner=runner)
    out = (
        p
        | stream
        | sb.WithWatermark("t", delay=timedelta(0))
        | sb.Tumble("t", size=timedelta(minutes=1))
        | sb.CombinePerKey(["k", "window_start"], n=sb.Count())
    )
    return sorted((math.isnan(row["k"]), row["n"]) for row in p.run().collect(out))


def test_nan_keys_form_one_group_on_spark_streaming(spark_streams: dict[str, Any]) -> None:
    """The streaming path groups in Spark's own aggregation: NaN keys meet there too."""
    spark = outcome(spark_streams, "nan_keys")
    assert nan_keys_rows(sb.DirectRunner()) == spark == [(False, 1), (True, 2)]


@pytest.mark.parametrize("value", [2**63, -(2**63) - 1, 10**30])
def test_an_integer_outside_64_bits_is_a_data_error(runner: Any, value: int) -> None:
    p = sb.Pipeline(runner=runner)
    p | "Orders" >> sb.Create([{"n": 1}, {"n": value}], schema={"n": int})
    with pytest.raises(sb.DataError, match=r"Orders.*64-bit") as caught:
        p.run()
    assert str(value) in str(caught.value)


def test_the_64_bit_bounds_themselves_are_fine(runner: Any) -> None:
    p = sb.Pipeline(runner=runner)
    rows = [{"n": INT64_MAX}, {"n": -(2**63)}]
    out = p | sb.Create(rows, schema={"n": int})
    assert sorted(row["n"] for row in p.run().collect(out)) == [-(2**63), INT64_MAX]


def test_a_map_returning_an_integer_outside_64_bits_is_a_data_error(runner: Any) -> None:
    p = sb.Pipeline(runner=runner)
    out = (
        p
        | sb.Create([{"n": INT64_MAX}])
        | "Double" >> sb.Map(lambda row: {"n": row["n"] * 2}, schema={"n": int})
    )
    with pytest.raises(sb.DataError, match=r"Double.*64-bit"):
        p.run().collect(out)


def test_a_sum_that_overflows_is_a_data_error_naming_the_transform(runner: Any) -> None:
    p = sb.Pipeline(runner=runner)
    out = (
        p
        | sb.Create([{"k": "a", "n": INT64_MAX}, {"k": "a", "n": 1}])
        | "Revenue" >> sb.CombinePerKey("k", total=sb.Sum("n"))
    )
    with pytest.raises(sb.DataError, match=r"Revenue.*total.*64") as caught:
        p.run().collect(out)
    message = str(caught.value)
    assert "py4j" not in message and "java." not in message and "ANSI" not in message


def overflowing_sum(runner: Any) -> list[dict[str, Any]]:
    """A streaming `Sum` ("Revenue") past 64 bits: collects its rows (or raises)."""
    stream = sb.TestStream({"k": str, "n": int, "t": datetime})
    stream.add_epoch([{"k": "a", "n": INT64_MAX, "t": T0}, {"k": "a", "n": 5, "t": T0}])
    stream.add_epoch([{"k": "a", "n": 1, "t": T0 + timedelta(hours=1)}])
    p = sb.Pipeline(runner=runner)
    out = (
        p
        | stream
        | sb.WithWatermark("t", delay=timedelta(0))
        | sb.Tumble("t", size=timedelta(minutes=1))
        | "Revenue" >> sb.CombinePerKey(["k", "window_start"], total=sb.Sum("n"))
    )
    return p.run().collect(out)


def test_a_sum_that_overflows_on_spark_streaming_is_a_data_error(
    spark_streams: dict[str, Any],
) -> None:
    with pytest.raises(sb.DataError, match=r"Revenue.*total.*64") as caught:
        overflowing_sum(sb.DirectRunner())
    assert "java." not in str(caught.value), "DirectRunner"
    error = spark_data_error(spark_streams, "overflowing_sum")
    assert re.search(r"Revenue.*total.*64", str(error)), str(error)
    assert "java." not in str(error), "SparkRunner"


def test_a_sum_within_64_bits_is_exact(runner: Any) -> None:
    p = sb.Pipeline(runner=runner)
    out = (
        p
        | sb.Create([{"k": "a", "n": INT64_MAX}, {"k": "a", "n": -5}])
        | sb.CombinePerKey("k", total=sb.Sum("n"))
    )
    assert p.run().collect(out) == [{"k": "a", "total": INT64_MAX - 5}]


def last_years(runner: Any) -> tuple[list[tuple[datetime, int]], int, dict[str, datetime]]:
    """Windows up to the last day of the calendar: their rows, the late rows and the
    watermarks of "Times"."""
    last = datetime(9999, 12, 31, 23, 0)
    stream = sb.TestStream({"k": str, "n": int, "t": datetime})
    stream.add_epoch(
        [
            {"k": "a", "n": 1, "t": datetime(8030, 6, 1)},
            {"k": "a", "n": 2, "t": last - timedelta(hours=1)},
        ]
    )
    stream.add_epoch([{"k": "a", "n": 4, "t": datetime(8030, 6, 1)}, {"k": "a", "n": 8, "t": last}])
    p = sb.Pipeline(runner=runner)
    w = p | stream | "Times" >> sb.WithWatermark("t", delay=timedelta(minutes=1))
    out = (
        w
        | sb.Tumble("t", size=timedelta(minutes=10))
        | sb.CombinePerKey(["k", "window_start"], total=sb.Sum("n"))
    )
    result = p.run()
    rows = sorted((row["window_start"], row["total"]) for row in result.collect(out))
    times = result.metrics()["Times"]
    return rows, times.late_rows, times.watermarks


@pytest.mark.spark
def test_the_last_years_of_the_calendar_run_on_spark_streaming(
    spark_streams: dict[str, Any],
) -> None:
    """Issue 19 item 6: Spark streaming failed for years from about 8030 (`Invalid isoformat
    string: '+10968-...'`: the runner moves times 1969 years forward inside Spark), and its
    end of input (year 8000) left later windows open, their rows lost. Both runners give the
    same rows, late rows and watermarks, up to the last day of the calendar."""
    last = datetime(9999, 12, 31, 23, 0)
    direct = last_years(sb.DirectRunner())
    assert outcome(spark_streams, "last_years") == direct
    assert direct == (
        [(datetime(8030, 6, 1), 1), (last - timedelta(hours=1), 2), (last, 8)],
        1,  # the second row of 8030, after the watermark passed 9999-12-31 21:59
        {"t": last - timedelta(minutes=1)},
    )


def integer_times_beyond(runner: Any) -> list[dict[str, Any]]:
    """A time past `INT_TIME_RANGE` on an integer time column ("Ticks"): collects the rows (or
    raises)."""
    from sparkbeam.runners.spark.exact.judges import INT_TIME_RANGE

    now_us = 1_775_037_600_000_000  # 2026-04-01 10:00 in microseconds since 1970
    stream = sb.TestStream({"n": int, "t": int})
    stream.add_epoch([{"n": 1, "t": now_us}, {"n": 2, "t": INT_TIME_RANGE[1] + 1}])
    p = sb.Pipeline(runner=runner)
    ticks = p | stream | "Ticks" >> sb.WithWatermark("t", delay=0)
    return p.run().collect(ticks)


@pytest.mark.spark
def test_integer_times_beyond_what_spark_holds_are_a_data_error_on_spark_streaming(
    spark_streams: dict[str, Any],
) -> None:
    """Integer event times are milliseconds moved forward inside Spark, in 64-bit
    microseconds: a time beyond `INT_TIME_RANGE` would overflow there or lie past the end of
    input (its window never closed, its rows lost). The Spark runner names the
    `WithWatermark` and the row; times up to the range's end run (microseconds of today)."""
    text = str(spark_data_error(spark_streams, "integer_times_beyond"))
    assert text.startswith("Ticks: the Spark runner holds integer event times"), text
    assert '"n":2' in text and "java." not in text


def integer_times_beyond_where_watermarks_meet(runner: Any) -> list[dict[str, Any]]:
    """`integer_times_beyond` on one side of a union of two `WithWatermark`s, the time below
    the range (and below the watermark)."""
    from sparkbeam.runners.spark.exact.judges import INT_TIME_RANGE

    now_us = 1_775_037_600_000_000
    ticks = sb.TestStream({"n": int, "t": int})
    ticks.add_epoch([{"n": 1, "t": now_us}])
    ticks.add_epoch([{"n": 2, "t": INT_TIME_RANGE[0] - 1}])  # below the watermark too
    other = sb.TestStream({"n": int, "t": int})
    other.add_epoch([{"n": 3, "t": now_us}])
    p = sb.Pipeline(runner=runner)
    left = p | "left" >> ticks | "Ticks" >> sb.WithWatermark("t", delay=0)
    right = p | "right" >> other | "Other" >> sb.WithWatermark("t", delay=0)
    merged = left.union(right)
    return p.run().collect(merged)


@pytest.mark.spark
def test_integer_times_beyond_what_spark_holds_where_watermarks_meet(
    spark_streams: dict[str, Any],
) -> None:
    """Where two `WithWatermark`s meet, the runner judges each one's epochs itself (no stage
    query: `exact.fed`): a time beyond `INT_TIME_RANGE` is the same `DataError`, even on a row
    that would be late there (it is never dropped as late instead)."""
    text = str(spark_data_error(spark_streams, "integer_times_beyond_where_watermarks_meet"))
    assert text.startswith("Ticks: the Spark runner holds integer event times"), text
    assert '"n":2' in text and "java." not in text


INT64_MIN = -(2**63)


@pytest.mark.parametrize(
    ("label", "window", "t"),
    [
        ("Minutes", sb.Tumble("t", 10), INT64_MAX - 3),  # its end above
        ("Minutes", sb.Tumble("t", 10, offset=5), INT64_MIN + 1),  # its start below
        ("Slides", sb.Hop("t", 10, 5), INT64_MIN + 3),
        ("Visits", sb.Session("t", 10), INT64_MAX - 3),
    ],
)
def test_a_window_bound_outside_64_bits_is_a_data_error(
    runner: Any, label: str, window: Any, t: int
) -> None:
    """On an integer time column a window bound beyond 64 bits is a `DataError` naming the
    window transform and the row, as one beyond year 9999 on a datetime column."""
    p = sb.Pipeline(runner=runner)
    rows = [{"n": 1, "t": 0}, {"n": 2, "t": t}]
    out = p | sb.Create(rows, schema={"n": int, "t": int}) | label >> window
    with pytest.raises(sb.DataError) as caught:
        p.run().collect(out)
    text = str(caught.value)
    assert text.startswith(f"{label}: the row's window has a bound outside the 64-bit"), text
    assert str(t) in text and "java." not in text


def test_windows_at_the_64_bit_bounds_are_exact(runner: Any) -> None:
    """Windows whose bounds reach the ends of the 64-bit integers, whose computation on the
    way would leave them (`t - size` of a `Hop` as large as the integers, the gap between
    two `Session` rows at either end), are the direct runner's on both runners."""
    p = sb.Pipeline(runner=runner)
    schema = {"n": int, "t": int}
    tumbled = (
        p | "A" >> sb.Create([{"n": 1, "t": INT64_MAX - 9}], schema=schema) | sb.Tumble("t", 10)
    )
    hopped = (
        p | "B" >> sb.Create([{"n": 2, "t": -5}], schema=schema) | sb.Hop("t", INT64_MAX, 2**62)
    )
    sessions = (
        p
        | "C" >> sb.Create([{"n": 3, "t": INT64_MIN}, {"n": 4, "t": INT64_MAX - 10}], schema=schema)
        | sb.Session("t", 10)
    )
    out = tumbled.union(hopped, sessions)
    got = sorted((row["n"], row["window_start"], row["window_end"]) for row in p.run().collect(out))
    assert got == [
        (1, INT64_MAX - 17, INT64_MAX - 7),
        (2, INT64_MIN, -1),
        (2, -(2**62), 2**62 - 1),
        (3, INT64_MIN, INT64_MIN + 10),
        (4, INT64_MAX - 10, INT64_MAX),
    ]


WINDOW_AT = 4_400_000_000_000_000
WINDOW_SIZE = 4_600_000_000_000_000
"""A window [WINDOW_AT, WINDOW_AT + WINDOW_SIZE) that ends after `INT_TIME_RANGE`."""


def window_ending_late(runner: Any) -> list[dict[str, Any]]:
    """Two rows in the window ("Spans") of `WINDOW_AT`, counted: collects the counts (or
    raises)."""
    stream = sb.TestStream({"n": int, "t": int})
    stream.add_epoch([{"n": 1, "t": WINDOW_AT}, {"n": 2, "t": WINDOW_AT + 1}])
    p = sb.Pipeline(runner=runner)
    out = (
        p
        | stream
        | sb.WithWatermark("t", delay=0)
        | "Spans" >> sb.Tumble("t", WINDOW_SIZE, offset=WINDOW_AT)
        | sb.CombinePerKey("window_start", n=sb.Count())
    )
    return p.run().collect(out)


@pytest.mark.spark
def test_a_window_ending_after_what_spark_streaming_holds_is_a_data_error(
    spark_streams: dict[str, Any],
) -> None:
    """On a stream the Spark runner holds integer times up to `INT_TIME_RANGE` (its end of
    input lies beyond them): a window ending later, within 64 bits, is a `DataError` naming
    the window and the row there (before, it never closed and its rows were lost without a
    word); the direct runner emits it."""
    from sparkbeam.runners.spark.exact.judges import INT_TIME_RANGE

    t = WINDOW_AT
    assert t <= INT_TIME_RANGE[1] < t + WINDOW_SIZE <= INT64_MAX
    assert window_ending_late(sb.DirectRunner()) == [{"window_start": t, "n": 2}]
    text = str(spark_data_error(spark_streams, "window_ending_late"))
    assert text.startswith(f"Spans: the row's window ends after {INT_TIME_RANGE[1]}"), text
    assert str(t) in text and "java." not in text


SPARK_STREAMS: dict[str, Callable[[Any], Any]] = {
    "nan_keys": nan_keys_rows,
    "overflowing_sum": overflowing_sum,
    "last_years": last_years,
    "integer_times_beyond": integer_times_beyond,
    "integer_times_beyond_where_watermarks_meet": integer_times_beyond_where_watermarks_meet,
    "window_ending_late": window_ending_late,
}
"""The module's Spark streaming runs, by name: each takes a runner."""


@pytest.fixture(scope="module")
def spark_streams(spark_runner: Any) -> dict[str, Any]:
    """Each of `SPARK_STREAMS` on Spark, `SIDE_BY_SIDE` pipelines at once: what it returned,
    or the error it raised (each test reads its own)."""
    return side_by_side(
        {name: functools.partial(run, spark_runner) for name, run in SPARK_STREAMS.items()}
    )


def spark_data_error(spark_streams: dict[str, Any], name: str) -> sb.DataError:
    """The `DataError` the Spark run `name` raised (any other error raised here; rows it
    returned instead fail the test)."""
    outcome = spark_streams[name]
    if isinstance(outcome, BaseException) and not isinstance(outcome, sb.DataError):
        raise outcome
    assert isinstance(outcome, sb.DataError), f"{name}: no DataError on Spark, rows {outcome}"
    return outcome


@pytest.mark.parametrize("format", ["json", "csv"])
def test_floats_that_are_no_number_survive_a_file(runner: Any, tmp_path: Any, format: str) -> None:
    """Written as Spark writes them (`NaN`, `Infinity`; a string in JSON) and read back, on
    both runners."""
    rows = [{"i": 0, "x": NAN}, {"i": 1, "x": math.inf}, {"i": 2, "x": -math.inf}]
    w = sb.Pipeline()
    (w | sb.Create(rows)).write_files(str(tmp_path / "out"), format=format)
    w.run()
    text = "".join(path.read_text() for path in (tmp_path / "out").iterdir())
    assert ('"x":"NaN"' if format == "json" else ",NaN\n") in text, text
    p = sb.Pipeline(runner=runner)
    read = p | sb.ReadFiles(str(tmp_path / "out"), format=format, schema={"i": int, "x": float})
    got = sorted(p.run().collect(read), key=lambda row: row["i"])
    assert [row["i"] for row in got] == [0, 1, 2]
    assert all(same(row["x"], want["x"]) for row, want in zip(got, rows, strict=True)), got
