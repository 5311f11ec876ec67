"""Schemas: inference from rows, explicit `schema=`, type checks on rows (SPEC sections 3, 6)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

import sparkbeam as sb


def collect(
    rows: list[dict[str, Any]], schema: Any = None, runner: Any = None
) -> list[dict[str, Any]]:
    p = sb.Pipeline(runner=runner)
    out = p | sb.Create(rows, schema=schema)
    return p.run().collect(out)


# --- inference -------------------------------------------------------------------------


def test_inferred_types_round_trip() -> None:
    rows = [
        {
            "t": datetime(2026, 4, 1, 10, 0, 0, 1),
            "n": 3,
            "x": 0.5,
            "s": "a",
            "b": True,
            "raw": b"\x00",
            "any": [1, 2],
        }
    ]
    out = collect(rows)
    assert out == rows
    assert [type(v) for v in out[0].values()] == [datetime, int, float, str, bool, bytes, list]


def test_integers_and_floats_make_a_float_column(runner: Any) -> None:
    out = collect([{"v": 1}, {"v": 2.5}, {"v": None}], runner=runner)
    assert out == [{"v": 1.0}, {"v": 2.5}, {"v": None}]
    assert type(out[0]["v"]) is float


def test_sum_over_a_mixed_column_is_a_float(runner: Any) -> None:
    p = sb.Pipeline(runner=runner)
    total = (
        p
        | sb.Create([{"k": "a", "v": 1}, {"k": "a", "v": 2.5}])
        | sb.CombinePerKey("k", total=sb.Sum("v"))
    )
    assert p.run().collect(total) == [{"k": "a", "total": 3.5}]


def test_none_does_not_decide_a_columns_type(runner: Any) -> None:
    out = collect([{"v": None}, {"v": 4}], runner=runner)
    assert out == [{"v": None}, {"v": 4}]
    assert type(out[1]["v"]) is int


@pytest.mark.parametrize(
    "values, kinds",
    [
        ([1, "x"], ("int", "str")),
        ([datetime(2026, 4, 1), 5], ("datetime", "int")),
        ([True, 1], ("bool", "int")),
        (["a", b"a"], ("str", "bytes")),
    ],
)
def test_mixed_types_are_refused_when_applied(values: list[Any], kinds: tuple[str, str]) -> None:
    p = sb.Pipeline()
    with pytest.raises(sb.PipelineError) as info:
        p | "orders" >> sb.Create([{"v": v} for v in values])
    message = str(info.value)
    assert "orders" in message
    assert "'v'" in message
    assert kinds[0] in message
    assert kinds[1] in message
    assert "schema=" in message


def test_mixed_types_across_stream_epochs_are_refused() -> None:
    p = sb.Pipeline()
    stream = sb.TestStream().add_epoch([{"v": 1}]).add_epoch([{"v": "one"}])
    with pytest.raises(sb.PipelineError, match="schema="):
        p | stream


def test_a_column_of_only_none_is_refused() -> None:
    p = sb.Pipeline()
    with pytest.raises(sb.PipelineError) as info:
        p | "orders" >> sb.Create([{"k": "a", "v": None}, {"k": "b", "v": None}])
    message = str(info.value)
    assert "orders" in message
    assert "'v'" in message
    assert "'k'" not in message
    assert "schema=" in message


def test_no_rows_and_no_schema_is_refused() -> None:
    p = sb.Pipeline()
    with pytest.raises(sb.PipelineError, match="schema="):
        p | sb.Create([])
    with pytest.raises(sb.PipelineError, match="schema="):
        p | sb.TestStream().add_epoch([])


# --- explicit schemas ------------------------------------------------------------------


def test_explicit_schema_types_a_column_of_only_none(runner: Any) -> None:
    assert collect([{"v": None}], schema={"v": int}, runner=runner) == [{"v": None}]


def test_explicit_schema_with_no_rows(runner: Any) -> None:
    assert collect([], schema={"v": int}, runner=runner) == []


def test_explicit_float_schema_takes_integers(runner: Any) -> None:
    out = collect([{"v": 1}], schema={"v": float}, runner=runner)
    assert out == [{"v": 1.0}]
    assert type(out[0]["v"]) is float


def test_explicit_schema_by_type_names_and_as_pairs(runner: Any) -> None:
    row = {"t": datetime(2026, 4, 1), "n": 1, "x": 1.5, "s": "a"}
    by_names = {"t": "timestamp", "n": "long", "x": "double", "s": "string"}
    pairs = [("t", datetime), ("n", int), ("x", float), ("s", str)]
    assert collect([row], schema=by_names, runner=runner) == [row]
    assert collect([row], schema=pairs, runner=runner) == [row]
    assert collect([row], schema=sb.Schema.of(pairs), runner=runner) == [row]


def test_explicit_schema_decides_the_time_column() -> None:
    p = sb.Pipeline()
    rows = p | sb.Create([{"t": None}, {"t": 5}], schema={"t": int})
    marked = rows.with_watermark("t", 2)
    result = p.run()
    assert result.collect(marked) == [{"t": 5}]
    assert result.watermarks(marked) == [sb.Watermark("t", 3)]


def test_explicit_schema_with_an_unknown_type() -> None:
    with pytest.raises(sb.PipelineError) as info:
        sb.Create([{"v": [1]}], schema={"v": list})
    message = str(info.value)
    assert "'v'" in message
    assert "datetime" in message  # the types there are


# --- rows checked against the schema at run time ---------------------------------------


@pytest.mark.parametrize(
    "kind, value",
    [
        (int, True),
        (int, 1.5),
        (int, "1"),
        (bool, 1),
        (float, "1.5"),
        (str, 5),
        (datetime, 1_700_000_000),
        (bytes, "b"),
    ],
)
def test_a_value_of_the_wrong_type_is_a_data_error(kind: type, value: Any) -> None:
    p = sb.Pipeline()
    bad = {"k": "b", "v": value}
    _ = p | "rows" >> sb.Create([{"k": "a", "v": None}, bad], schema={"k": str, "v": kind})
    with pytest.raises(sb.DataError) as info:
        p.run()
    assert info.value.row == bad
    message = str(info.value)
    assert "rows" in message
    assert "'v'" in message
    assert repr(value) in message


def test_object_columns_take_anything() -> None:
    rows = [{"v": {"a": 1}}, {"v": 3}, {"v": None}]
    assert collect(rows, schema={"v": object}) == rows


def test_error_classes() -> None:
    assert issubclass(sb.PipelineError, ValueError)
    assert issubclass(sb.DataError, ValueError)
    assert issubclass(sb.InvariantViolation, AssertionError)
    assert sb.DataError("bad row", {"k": 1}).row == {"k": 1}
