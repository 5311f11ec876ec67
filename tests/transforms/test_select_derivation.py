"""Watermark derivation through `Select` expressions.

Rule under test (SPEC section 4, `transforms.elementwise`): `Select` keeps
the watermark of a column it passes through (also under a new name) and
derives one through an order-keeping expression: `col + d` gives
`W(out, wm + d)`, `col.truncate(unit)` gives `W(out, floor(wm))`; other
watermarks are dropped.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import sparkbeam as sb

T0 = datetime(2026, 4, 1, 10, 0)


def at(minute: int, second: int = 0) -> datetime:
    return T0 + timedelta(minutes=minute, seconds=second)


def stream(*epochs: list[dict[str, Any]]) -> sb.TestStream:
    ts = sb.TestStream()
    for rows in epochs:
        ts.add_epoch(rows)
    return ts


def marks(result: Any, pcoll: sb.PCollection, column: str) -> list[Any]:
    return [w.value for w in result.watermarks(pcoll) if w.column == column]


def test_shift_gives_the_shifted_watermark() -> None:
    with sb.Pipeline() as p:
        events = (p | stream([{"id": 1, "t": at(10)}], [{"id": 2, "t": at(20)}])).with_watermark(
            "t", "1 minute"
        )
        shifted = events | sb.Select("id", "t", t2=sb.col("t") + "5 minutes")
    result = p.result
    assert marks(result, events, "t") == [at(9), at(19)]
    assert marks(result, shifted, "t2") == [at(14), at(24)]
    assert marks(result, shifted, "t") == [at(9), at(19)]
    assert shifted.watermarked_columns == frozenset({"t", "t2"})
    assert [r["t2"] for r in result.collect(shifted)] == [at(15), at(25)]


def test_shift_back_and_timedelta() -> None:
    with sb.Pipeline() as p:
        events = (p | stream([{"t": at(30)}])).with_watermark("t", 0)
        shifted = events.select(
            early=sb.col("t") - timedelta(minutes=10), late=sb.col("t") + timedelta(seconds=30)
        )
    result = p.result
    assert marks(result, shifted, "early") == [at(20)]
    assert marks(result, shifted, "late") == [at(30, 30)]
    assert marks(result, shifted, "t") == []


def test_truncate_gives_the_floored_watermark() -> None:
    with sb.Pipeline() as p:
        events = (p | stream([{"t": at(47, 30)}], [{"t": at(75)}])).with_watermark("t", 0)
        hours = events.select("t", hour=sb.col("t").truncate("1 hour"))
    result = p.result
    assert marks(result, hours, "hour") == [datetime(2026, 4, 1, 10), datetime(2026, 4, 1, 11)]
    assert [r["hour"] for r in result.collect(hours)] == [
        datetime(2026, 4, 1, 10),
        datetime(2026, 4, 1, 11),
    ]


def test_truncate_repeats_no_watermark_that_does_not_rise() -> None:
    with sb.Pipeline() as p:
        events = (p | stream([{"t": at(1)}], [{"t": at(2)}], [{"t": at(61)}])).with_watermark(
            "t", 0
        )
        hours = events.select(hour=sb.col("t").truncate("1 hour"))
    result = p.result
    assert len(marks(result, events, "t")) == 3
    assert marks(result, hours, "hour") == [datetime(2026, 4, 1, 10), datetime(2026, 4, 1, 11)]


def test_chains_apply_in_order() -> None:
    with sb.Pipeline() as p:
        events = (p | stream([{"t": at(47, 30)}])).with_watermark("t", 0)
        derived = events.select(
            truncate_then_shift=sb.col("t").truncate("1 hour") + "30 minutes",
            shift_then_truncate=(sb.col("t") + "30 minutes").truncate("1 hour"),
            twice=sb.col("t") + "1 minute" + "1 minute",
        )
    result = p.result
    assert marks(result, derived, "truncate_then_shift") == [at(30)]
    assert marks(result, derived, "shift_then_truncate") == [datetime(2026, 4, 1, 11)]
    assert marks(result, derived, "twice") == [at(49, 30)]
    assert result.collect(derived) == [
        {
            "truncate_then_shift": at(30),
            "shift_then_truncate": datetime(2026, 4, 1, 11),
            "twice": at(49, 30),
        }
    ]


def test_rename_keeps_the_watermark_under_the_new_name() -> None:
    with sb.Pipeline() as p:
        events = (p | stream([{"t": at(5), "v": 1}])).with_watermark("t", "1 minute")
        renamed = events.select("v", event_time="t")
        renamed_expr = events.select(when=sb.col("t"))
    result = p.result
    assert renamed.watermarked_columns == frozenset({"event_time"})
    assert result.watermarks(renamed) == [sb.Watermark("event_time", at(4))]
    assert result.watermarks(renamed_expr) == [sb.Watermark("when", at(4))]


def test_dropped_and_non_time_columns_lose_their_watermark() -> None:
    with sb.Pipeline() as p:
        events = (p | stream([{"t": at(5), "v": 1}])).with_watermark("t", 0)
        values = events.select("v")
    assert values.watermarked_columns == frozenset()
    assert p.result.watermarks(values) == []


def test_a_shifted_column_can_be_windowed_on_unbounded_input() -> None:
    with sb.Pipeline() as p:
        events = (
            p
            | stream(
                [{"id": 1, "t": at(1)}, {"id": 2, "t": at(3)}],
                [{"id": 3, "t": at(12)}],
                [{"id": 4, "t": at(30)}],
            )
        ).with_watermark("t", 0)
        per_window = (
            events.select("id", local=sb.col("t") + "5 minutes")
            .tumble("local", "10 minutes")
            .combine_per_key(["window_start", "window_end"], n=sb.Count())
        )
    result = p.result
    by_epoch = result.collect_by_epoch(per_window)
    # local times: 10:06, 10:08 | 10:17 | 10:35. Windows [10:00, 10:10) and
    # [10:10, 10:20) close when the shifted watermark passes them.
    assert by_epoch[0] == []
    assert by_epoch[1] == [{"window_start": at(0), "window_end": at(10), "n": 2}]
    assert by_epoch[2] == [{"window_start": at(10), "window_end": at(20), "n": 1}]
    assert by_epoch[3] == [{"window_start": at(30), "window_end": at(40), "n": 1}]


def test_a_column_without_a_derived_watermark_cannot_be_windowed_unbounded() -> None:
    p = sb.Pipeline()
    events = (p | stream([{"t": at(1)}])).with_watermark("t", 0)
    mapped = events.map(lambda row: {"t": row["t"] + timedelta(minutes=5)})
    with pytest.raises(sb.PipelineError, match="need a watermark on 't'"):
        mapped.tumble("t", "10 minutes")


def test_shift_of_a_non_time_column_is_refused() -> None:
    p = sb.Pipeline()
    events = p | sb.Create([{"name": "x", "t": 1}])
    with pytest.raises(sb.PipelineError, match="needs numbers, not str"):
        events.select(n=sb.col("name") + 1)
    with pytest.raises(sb.PipelineError, match="truncate\\(\\) needs a datetime or integer"):
        events.select(n=sb.col("name").truncate(5))
    with pytest.raises(sb.PipelineError, match="bare integer"):
        (p | "dt" >> sb.Create([{"t": at(0)}])).select(s=sb.col("t") + 5)


@given(
    epochs=st.lists(st.lists(st.integers(-100, 100), max_size=4), min_size=1, max_size=6),
    delay=st.integers(0, 20),
    unit=st.integers(1, 30),
    shift=st.integers(-50, 50),
)
def test_integer_derivations_map_each_watermark(
    epochs: list[list[int]], delay: int, unit: int, shift: int
) -> None:
    ts = sb.TestStream({"t": int})
    for times in epochs:
        ts.add_epoch([{"t": t} for t in times])
    with sb.Pipeline() as p:
        events = (p | ts).with_watermark("t", delay)
        derived = events.select(
            floor=sb.col("t").truncate(unit),
            moved=sb.col("t") + shift,
            both=(sb.col("t") - shift).truncate(unit),
        )
    result = p.result
    source = marks(result, events, "t")

    def dedup(values: list[int]) -> list[int]:
        return [v for i, v in enumerate(values) if i == 0 or v > values[i - 1]]

    assert marks(result, derived, "moved") == [m + shift for m in source]
    assert marks(result, derived, "floor") == dedup([m - m % unit for m in source])
    assert marks(result, derived, "both") == dedup([(m - shift) // unit * unit for m in source])
    for row in result.collect(derived):
        assert row["floor"] % unit == 0
