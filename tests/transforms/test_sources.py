"""Create and TestStream: epochs, rows, and what bad rows get (SPEC sections 2, 3, 5 and 6)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

import sparkbeam as sb


def at(hour: int, minute: int, second: int = 0) -> datetime:
    return datetime(2026, 4, 1, hour, minute, second)


ROWS = [
    {"id": "o1", "amount": 29.99, "t": at(10, 0)},
    {"id": "o2", "amount": 5.0, "t": at(10, 1)},
]


def test_create_is_one_epoch() -> None:
    p = sb.Pipeline()
    rows = p | sb.Create(ROWS)
    result = p.run()
    assert result.collect(rows) == ROWS
    assert result.collect_by_epoch(rows) == [ROWS, []]
    assert result.watermarks(rows) == []


def test_create_takes_any_iterable_of_dicts(runner: Any) -> None:
    p = sb.Pipeline(runner=runner)
    rows = p | sb.Create(dict(row) for row in ROWS)
    assert p.run().collect(rows) == ROWS


def test_test_stream_is_a_list_of_epochs() -> None:
    p = sb.Pipeline()
    stream = sb.TestStream().add_epoch(ROWS[:1]).add_epoch([]).add_epoch(ROWS[1:])
    rows = p | stream
    result = p.run()
    assert result.collect_by_epoch(rows) == [ROWS[:1], [], ROWS[1:], []]
    assert result.collect(rows) == ROWS
    assert result.watermarks(rows) == []


def test_add_epoch_returns_the_same_builder() -> None:
    stream = sb.TestStream()
    assert stream.add_epoch(ROWS) is stream


def test_epochs_added_after_applying_do_not_change_the_pipeline() -> None:
    p = sb.Pipeline()
    stream = sb.TestStream().add_epoch(ROWS[:1])
    rows = p | stream
    stream.add_epoch(ROWS[1:])
    assert p.run().collect_by_epoch(rows) == [ROWS[:1], []]


def test_several_sources_advance_together() -> None:
    # Epoch i of each stream is the pipeline's epoch i; a Create is epoch 0; a shorter
    # stream is idle afterwards.
    p = sb.Pipeline()
    long = p | "long" >> sb.TestStream().add_epoch([{"n": 1}]).add_epoch([{"n": 2}]).add_epoch(
        [{"n": 3}]
    )
    short = p | "short" >> sb.TestStream().add_epoch([{"n": 10}])
    bounded = p | "bounded" >> sb.Create([{"n": 100}])
    result = p.run()
    assert result.collect_by_epoch(long) == [[{"n": 1}], [{"n": 2}], [{"n": 3}], []]
    assert result.collect_by_epoch(short) == [[{"n": 10}], [], [], []]
    assert result.collect_by_epoch(bounded) == [[{"n": 100}], [], [], []]


def test_a_shorter_streams_watermark_stays_where_it_was() -> None:
    p = sb.Pipeline()
    _ = p | "long" >> sb.TestStream().add_epoch([{"n": 1}]).add_epoch([{"n": 2}])
    short = p | "short" >> sb.TestStream().add_epoch([{"t": at(10, 0)}])
    marked = short.with_watermark("t", "1 minute")
    result = p.run()
    assert result.watermarks(marked) == [sb.Watermark("t", at(9, 59))]
    assert result.collect_by_epoch(marked) == [[{"t": at(10, 0)}], [], []]


def test_aware_datetimes_become_naive_utc() -> None:
    plus_two = timezone(timedelta(hours=2))
    p = sb.Pipeline()
    rows = p | sb.Create(
        [
            {"t": datetime(2026, 4, 1, 10, 0, tzinfo=plus_two)},
            {"t": datetime(2026, 4, 1, 9, 0, tzinfo=UTC)},
            {"t": datetime(2026, 4, 1, 7, 30)},
        ]
    )
    marked = rows.with_watermark("t", 0)
    windowed = marked.tumble("t", "1 hour")
    result = p.run()
    out = result.collect(rows)
    assert out == [{"t": at(8, 0)}, {"t": at(9, 0)}, {"t": at(7, 30)}]
    assert all(row["t"].tzinfo is None for row in out)
    assert result.watermarks(marked) == [sb.Watermark("t", at(9, 0))]
    assert sorted((r["t"], r["window_start"]) for r in result.collect(windowed)) == [
        (at(7, 30), at(7, 0)),
        (at(8, 0), at(8, 0)),
        (at(9, 0), at(9, 0)),
    ]


def test_test_stream_with_an_explicit_schema() -> None:
    p = sb.Pipeline()
    stream = sb.TestStream(schema={"t": datetime, "note": str}).add_epoch(
        [{"t": at(10, 0), "note": None}]
    )
    rows = p | stream
    assert p.run().collect(rows) == [{"t": at(10, 0), "note": None}]


def test_test_stream_infers_its_schema_from_every_epoch() -> None:
    p = sb.Pipeline()
    stream = sb.TestStream().add_epoch([{"v": 1, "s": None}]).add_epoch([{"v": 2.5, "s": "x"}])
    rows = p | stream
    out = p.run().collect(rows)
    assert out == [{"v": 1.0, "s": None}, {"v": 2.5, "s": "x"}]
    assert type(out[0]["v"]) is float


# --- errors ----------------------------------------------------------------------------


@pytest.mark.parametrize("rows", [{"t": 1}, "rows", 42])
def test_create_needs_a_list_of_rows(rows: Any) -> None:
    with pytest.raises(sb.PipelineError, match="list of dicts"):
        sb.Create(rows)


def test_rows_that_are_not_dicts() -> None:
    p = sb.Pipeline()
    with pytest.raises(ValueError, match="dict"):
        p | sb.Create([1, 2])


def test_sources_apply_only_to_a_pipeline() -> None:
    p = sb.Pipeline()
    rows = p | sb.Create(ROWS)
    with pytest.raises(sb.PipelineError, match="source"):
        rows | "again" >> sb.Create(ROWS)
    with pytest.raises(sb.PipelineError, match="source"):
        rows | sb.TestStream().add_epoch(ROWS)


def test_a_row_missing_a_column_is_a_data_error() -> None:
    p = sb.Pipeline()
    bad = {"id": "o3", "t": at(10, 2)}
    _ = p | "orders" >> sb.Create([*ROWS, bad])
    with pytest.raises(sb.DataError) as info:
        p.run()
    assert info.value.row == bad
    message = str(info.value)
    assert "orders" in message
    assert "'amount'" in message
    assert "'o3'" in message
    assert "None" in message  # what to do: give None for an unknown value


def test_a_row_missing_a_column_in_a_later_epoch() -> None:
    p = sb.Pipeline()
    bad = {"id": "o3"}
    _ = p | "orders" >> sb.TestStream().add_epoch(ROWS).add_epoch([bad])
    with pytest.raises(sb.DataError) as info:
        p.run()
    assert info.value.row == bad
    assert "'amount'" in str(info.value)


def test_a_row_with_an_extra_column_is_a_data_error() -> None:
    p = sb.Pipeline()
    bad = {"id": "o3", "amount": 1.0, "t": at(10, 2), "coupon": "FREE"}
    schema = {"id": str, "amount": float, "t": datetime}
    _ = p | "orders" >> sb.Create([*ROWS, bad], schema=schema)
    with pytest.raises(sb.DataError) as info:
        p.run()
    assert info.value.row == bad
    message = str(info.value)
    assert "orders" in message
    assert "'coupon'" in message
    assert "schema" in message


def test_a_time_column_holding_a_string_is_a_data_error() -> None:
    p = sb.Pipeline()
    bad = {"id": "o3", "amount": 1.0, "t": "2026-04-01 10:02"}
    schema = {"id": str, "amount": float, "t": datetime}
    _ = p | "orders" >> sb.Create([*ROWS, bad], schema=schema)
    with pytest.raises(sb.DataError) as info:
        p.run()
    assert info.value.row == bad
    message = str(info.value)
    assert "orders" in message
    assert "'t'" in message
    assert "'2026-04-01 10:02'" in message
    assert "datetime" in message


def test_an_integer_time_column_holding_a_string_in_a_stream() -> None:
    p = sb.Pipeline()
    bad = {"t": "7"}
    stream = sb.TestStream(schema={"t": int}).add_epoch([{"t": 5}]).add_epoch([bad])
    _ = p | "ticks" >> stream | sb.WithWatermark("t", 0)
    with pytest.raises(sb.DataError) as info:
        p.run()
    assert info.value.row == bad
    assert "ticks" in str(info.value)
    assert "'t'" in str(info.value)
