"""Map, Filter and Select: rows and watermark derivation (SPEC sections 4 and 6).

`Filter` keeps every watermark; `Select`/`Map` keep the watermarks of columns they
pass through unchanged (Map: those it declares in `keeps`), derive them through
`col + delta` and `.truncate(unit)`, and drop all others.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import pytest

import sparkbeam as sb


def at(hour: int, minute: int, second: int = 0) -> datetime:
    return datetime(2026, 4, 1, hour, minute, second)


def by_column(marks: Sequence[sb.Watermark]) -> dict[str, list[Any]]:
    """Watermark values per column, in order (the order across columns is not pinned)."""
    out: dict[str, list[Any]] = {}
    for mark in marks:
        out.setdefault(mark.column, []).append(mark.value)
    return out


# Two epochs; W(t) is 10:40 then 11:15 (delay 5 minutes), W(u) 10:05 then 10:35 (delay 0).
ROW0 = {"t": at(10, 45), "u": at(10, 5), "k": "a", "v": 1}
ROW1 = {"t": at(11, 20), "u": at(10, 35), "k": "b", "v": 2}
T_MARKS = [at(10, 40), at(11, 15)]
U_MARKS = [at(10, 5), at(10, 35)]


def watermarked(p: sb.Pipeline) -> sb.PCollection:
    stream = sb.TestStream().add_epoch([ROW0]).add_epoch([ROW1])
    return p | stream | sb.WithWatermark("t", "5 minutes") | sb.WithWatermark("u", 0)


def run(transform: sb.PTransform) -> tuple[list[list[dict[str, Any]]], dict[str, list[Any]]]:
    """Rows by epoch and watermarks by column of `transform` applied to the stream above."""
    p = sb.Pipeline()
    out = watermarked(p) | transform
    result = p.run()
    return result.collect_by_epoch(out), by_column(result.watermarks(out))


def test_the_input_carries_both_watermarks() -> None:
    p = sb.Pipeline()
    source = watermarked(p)
    assert by_column(p.run().watermarks(source)) == {"t": T_MARKS, "u": U_MARKS}


# --- Filter ----------------------------------------------------------------------------


def test_filter_keeps_rows_and_every_watermark() -> None:
    rows, marks = run(sb.Filter(lambda row: row["k"] == "b"))
    assert rows == [[], [ROW1], []]
    assert marks == {"t": T_MARKS, "u": U_MARKS}


def test_filter_that_drops_every_row_still_passes_watermarks() -> None:
    rows, marks = run(sb.Filter(lambda row: False))
    assert rows == [[], [], []]
    assert marks == {"t": T_MARKS, "u": U_MARKS}


def test_filter_sees_datetimes() -> None:
    rows, _ = run(sb.Filter(lambda row: row["t"] > datetime(2026, 4, 1, 11, 0)))
    assert rows == [[], [ROW1], []]


# --- Select ----------------------------------------------------------------------------


def test_select_passes_through_the_watermarks_of_kept_columns() -> None:
    rows, marks = run(sb.Select("t", "v"))
    assert rows == [[{"t": at(10, 45), "v": 1}], [{"t": at(11, 20), "v": 2}], []]
    assert marks == {"t": T_MARKS}


def test_select_renames_a_watermark_with_its_column() -> None:
    rows, marks = run(sb.Select("v", ts="t", us=sb.col("u")))
    assert rows[0] == [{"v": 1, "ts": at(10, 45), "us": at(10, 5)}]
    assert marks == {"ts": T_MARKS, "us": U_MARKS}


def test_select_of_one_column_under_two_names() -> None:
    _, marks = run(sb.Select("t", again="t"))
    assert marks == {"t": T_MARKS, "again": T_MARKS}


def test_select_drops_the_watermarks_of_dropped_columns() -> None:
    rows, marks = run(sb.Select("k", "v"))
    assert rows == [[{"k": "a", "v": 1}], [{"k": "b", "v": 2}], []]
    assert marks == {}


@pytest.mark.parametrize(
    "expression",
    [
        sb.col("t") + timedelta(minutes=5),
        sb.col("t") + "5 minutes",
        sb.col("t") + "300 seconds",
        sb.col("t") - timedelta(minutes=-5),
        (sb.col("t") + "2 minutes") + "3 minutes",
    ],
)
def test_select_shifts_a_watermark_by_a_delta(expression: sb.Expr) -> None:
    rows, marks = run(sb.Select(later=expression))
    assert rows == [[{"later": at(10, 50)}], [{"later": at(11, 25)}], []]
    assert marks == {"later": [at(10, 45), at(11, 20)]}


def test_select_shifts_back() -> None:
    rows, marks = run(
        sb.Select(earlier=sb.col("t") - "1 hour", before=sb.col("t") + timedelta(hours=-1))
    )
    assert rows[0] == [{"earlier": at(9, 45), "before": at(9, 45)}]
    assert marks == {"earlier": [at(9, 40), at(10, 15)], "before": [at(9, 40), at(10, 15)]}


def test_select_truncates_a_watermark() -> None:
    rows, marks = run(
        sb.Select(
            "t",
            hour=sb.col("t").truncate("1 hour"),
            half=sb.col("t").truncate(timedelta(minutes=30)),
            shifted=(sb.col("t") - "10 minutes").truncate("1 hour"),
        )
    )
    assert rows == [
        [{"t": at(10, 45), "hour": at(10, 0), "half": at(10, 30), "shifted": at(10, 0)}],
        [{"t": at(11, 20), "hour": at(11, 0), "half": at(11, 0), "shifted": at(11, 0)}],
        [],
    ]
    # 10:40 -> 10:00, 10:30; 11:15 -> 11:00, 11:00; 10:30 -> 10:00, 11:05 -> 11:00.
    assert marks == {
        "t": T_MARKS,
        "hour": [at(10, 0), at(11, 0)],
        "half": [at(10, 30), at(11, 0)],
        "shifted": [at(10, 0), at(11, 0)],
    }


def test_select_on_integer_time_columns() -> None:
    p = sb.Pipeline()
    stream = sb.TestStream().add_epoch([{"n": 23}]).add_epoch([{"n": 47}])
    out = (
        p
        | stream
        | sb.WithWatermark("n", 0)
        | sb.Select("n", later=sb.col("n") + 5, tens=sb.col("n").truncate(10))
    )
    result = p.run()
    assert result.collect(out) == [
        {"n": 23, "later": 28, "tens": 20},
        {"n": 47, "later": 52, "tens": 40},
    ]
    assert by_column(result.watermarks(out)) == {
        "n": [23, 47],
        "later": [28, 52],
        "tens": [20, 40],
    }


def test_select_truncates_before_1970_and_negative_integers_down(runner: Any) -> None:
    p = sb.Pipeline(runner=runner)
    source = p | sb.Create([{"t": datetime(1969, 12, 31, 23, 30), "n": -7}, {"t": None, "n": None}])
    out = source | sb.Select(hour=sb.col("t").truncate("1 hour"), tens=sb.col("n").truncate(10))
    later = source | sb.Select(t2=sb.col("t") + "1 hour")
    result = p.run()
    assert result.collect(out) == [
        {"hour": datetime(1969, 12, 31, 23, 0), "tens": -10},
        {"hour": None, "tens": None},
    ]
    assert result.collect(later) == [{"t2": datetime(1970, 1, 1, 0, 30)}, {"t2": None}]


# --- Map -------------------------------------------------------------------------------


def add_one(row: dict[str, Any]) -> dict[str, Any]:
    return {**row, "v": row["v"] + 1}


def test_map_without_keeps_drops_every_watermark() -> None:
    rows, marks = run(sb.Map(add_one))
    assert rows == [[{**ROW0, "v": 2}], [{**ROW1, "v": 3}], []]
    assert marks == {}


def test_map_keeps_only_the_watermarks_it_declares() -> None:
    _, marks = run(sb.Map(add_one, keeps=["t"]))
    assert marks == {"t": T_MARKS}
    _, marks = run(sb.Map(add_one, keeps=["t", "u"]))
    assert marks == {"t": T_MARKS, "u": U_MARKS}


def test_map_with_an_output_schema() -> None:
    def summarize(row: dict[str, Any]) -> dict[str, Any]:
        return {"t": row["t"], "label": f"{row['k']}{row['v']}", "t2": row["t"] + timedelta(1)}

    schema = {"t": datetime, "label": str, "t2": datetime}
    rows, marks = run(sb.Map(summarize, schema=schema, keeps=["t"]))
    assert rows[0] == [{"t": at(10, 45), "label": "a1", "t2": datetime(2026, 4, 2, 10, 45)}]
    assert marks == {"t": T_MARKS}  # t2 is computed by Python code: no watermark


def test_map_sees_naive_utc_datetimes() -> None:
    seen: list[dict[str, Any]] = []

    def record(row: dict[str, Any]) -> dict[str, Any]:
        seen.append(row)
        return row

    run(sb.Map(record))
    assert seen == [ROW0, ROW1]
    assert all(type(row["t"]) is datetime and row["t"].tzinfo is None for row in seen)


def test_fluent_elementwise_methods_match_the_transforms() -> None:
    p = sb.Pipeline()
    source = watermarked(p)
    pairs = [
        (source | sb.Map(add_one, keeps=["u"]), source.map(add_one, keeps=["u"])),
        (
            source | sb.Map(lambda r: {"v": r["v"]}, schema={"v": int}),
            source.map(lambda r: {"v": r["v"]}, schema={"v": int}),
        ),
        (source | sb.Filter(lambda r: r["v"] > 1), source.filter(lambda r: r["v"] > 1)),
        (
            source | sb.Select("k", m=sb.col("t") + "1 minute"),
            source.select("k", m=sb.col("t") + "1 minute"),
        ),
    ]
    result = p.run()
    for piped, fluent in pairs:
        assert result.collect_by_epoch(piped) == result.collect_by_epoch(fluent)
        assert result.watermarks(piped) == result.watermarks(fluent)
    assert result.collect(pairs[0][1]) == [{**ROW0, "v": 2}, {**ROW1, "v": 3}]
    assert by_column(result.watermarks(pairs[3][1])) == {"m": [at(10, 41), at(11, 16)]}


# --- errors when applied ---------------------------------------------------------------


@pytest.fixture
def source() -> sb.PCollection:
    return sb.Pipeline() | sb.Create([{"ts": at(10, 0), "n": 5, "k": "a"}])


@pytest.mark.parametrize(
    "transform",
    [sb.Select("missing"), sb.Select(x=sb.col("missing")), sb.Select(x=sb.col("missing") + 1)],
)
def test_select_of_an_unknown_column(source: sb.PCollection, transform: sb.PTransform) -> None:
    with pytest.raises(sb.PipelineError) as info:
        source | "pick" >> transform
    message = str(info.value)
    assert "pick" in message
    assert "'missing'" in message
    assert "'ts'" in message


def test_shift_of_a_string_column(source: sb.PCollection) -> None:
    with pytest.raises(sb.PipelineError) as info:
        source | "pick" >> sb.Select(x=sb.col("k") + "5 minutes")
    message = str(info.value)
    assert "pick" in message
    assert "str" in message
    assert "5 minutes" in message


def test_integer_shift_of_a_datetime_column(source: sb.PCollection) -> None:
    with pytest.raises(sb.PipelineError) as info:
        source | "pick" >> sb.Select(x=sb.col("ts") + 5)
    message = str(info.value)
    assert "pick" in message
    assert "5" in message
    assert "timedelta" in message


@pytest.mark.parametrize(
    "expression",
    [sb.col("ts") + 5, sb.col("ts").truncate(60), sb.col("n").truncate("1 hour")],
)
def test_duration_errors_in_expressions_name_no_column_the_input_lacks(
    source: sb.PCollection, expression: sb.Expr
) -> None:
    # The input has ts, n and k: a message about a column 't' sends the user astray.
    with pytest.raises(sb.PipelineError) as info:
        source | "pick" >> sb.Select(x=expression)
    assert "'t'" not in str(info.value)


@pytest.mark.parametrize("delta", [timedelta(seconds=5), "5 seconds"])
def test_non_integer_shift_of_an_integer_column(source: sb.PCollection, delta: Any) -> None:
    with pytest.raises(sb.PipelineError) as info:
        source | "pick" >> sb.Select(x=sb.col("n") + delta)
    message = str(info.value)
    assert "pick" in message
    assert "int" in message


def test_bad_shift_string(source: sb.PCollection) -> None:
    with pytest.raises(sb.PipelineError) as info:
        source | "pick" >> sb.Select(x=sb.col("ts") + "5 parsecs")
    message = str(info.value)
    assert "pick" in message
    assert "parsecs" in message


@pytest.mark.parametrize(
    "expression, named",
    [
        (sb.col("k").truncate("1 hour"), "str"),
        (sb.col("ts").truncate("0 minutes"), "positive"),
        (sb.col("ts").truncate("-1 hour"), "positive"),
        (sb.col("ts").truncate(60), "timedelta"),
        (sb.col("n").truncate("1 hour"), "integer"),
        (sb.col("n").truncate(0), "positive"),
    ],
)
def test_bad_truncation(source: sb.PCollection, expression: sb.Expr, named: str) -> None:
    with pytest.raises(sb.PipelineError) as info:
        source | "pick" >> sb.Select(x=expression)
    message = str(info.value)
    assert "pick" in message
    assert named in message


def test_select_of_something_that_is_not_an_expression() -> None:
    with pytest.raises(sb.PipelineError) as info:
        sb.Select(x=[42])
    assert "42" in str(info.value)
    assert "sb.col" in str(info.value)


def test_select_naming_a_column_twice() -> None:
    with pytest.raises(sb.PipelineError, match="'ts'"):
        sb.Select("ts", ts="n")


def test_map_keeps_an_unknown_column(source: sb.PCollection) -> None:
    with pytest.raises(sb.PipelineError) as info:
        source | "fix" >> sb.Map(lambda r: r, keeps=["missing"])
    message = str(info.value)
    assert "fix" in message
    assert "'missing'" in message


def test_map_keeps_a_column_missing_from_its_output_schema(source: sb.PCollection) -> None:
    with pytest.raises(sb.PipelineError) as info:
        source | "fix" >> sb.Map(lambda r: {"n": r["n"]}, schema={"n": int}, keeps=["ts"])
    message = str(info.value)
    assert "fix" in message
    assert "'ts'" in message


def test_map_keeps_a_column_whose_type_changes(source: sb.PCollection) -> None:
    with pytest.raises(sb.PipelineError) as info:
        source | "fix" >> sb.Map(lambda r: r, schema={"ts": str, "n": int, "k": str}, keeps="ts")
    message = str(info.value)
    assert "fix" in message
    assert "ts" in message


def test_map_and_filter_need_callables() -> None:
    with pytest.raises(sb.PipelineError, match="callable"):
        sb.Map("not a function")  # type: ignore[arg-type]
    with pytest.raises(sb.PipelineError, match="callable"):
        sb.Filter(None)  # type: ignore[arg-type]


# --- errors at run time ----------------------------------------------------------------


def test_map_function_raising_is_a_data_error_naming_the_row() -> None:
    def divide(row: dict[str, Any]) -> dict[str, Any]:
        return {**row, "n": 10 // row["n"]}

    p = sb.Pipeline()
    rows = [{"k": "a", "n": 5}, {"k": "b", "n": 0}]
    _ = p | sb.Create(rows) | "divide" >> sb.Map(divide)
    with pytest.raises(sb.DataError) as info:
        p.run()
    assert info.value.row == {"k": "b", "n": 0}
    assert isinstance(info.value.__cause__, ZeroDivisionError)
    message = str(info.value)
    assert "divide" in message
    assert "'b'" in message
    assert "ZeroDivisionError" in message


def test_filter_predicate_raising_is_a_data_error() -> None:
    p = sb.Pipeline()
    _ = (
        p
        | sb.Create([{"k": "a"}, {"k": None}], schema={"k": str})
        | "long" >> sb.Filter(lambda row: len(row["k"]) > 0)
    )
    with pytest.raises(sb.DataError) as info:
        p.run()
    assert info.value.row == {"k": None}
    assert "long" in str(info.value)


def test_map_output_missing_a_column_is_a_data_error() -> None:
    p = sb.Pipeline()
    _ = p | sb.Create([{"k": "a", "n": 1}]) | "drop n" >> sb.Map(lambda row: {"k": row["k"]})
    with pytest.raises(sb.DataError) as info:
        p.run()
    message = str(info.value)
    assert "drop n" in message
    assert "'n'" in message
    assert info.value.row == {"k": "a"}


def test_map_output_of_the_wrong_type_is_a_data_error() -> None:
    p = sb.Pipeline()
    _ = p | sb.Create([{"t": at(10, 0)}]) | "fmt" >> sb.Map(lambda row: {"t": str(row["t"])})
    with pytest.raises(sb.DataError) as info:
        p.run()
    message = str(info.value)
    assert "fmt" in message
    assert "'t'" in message
    assert "datetime" in message
