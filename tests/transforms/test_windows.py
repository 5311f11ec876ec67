"""Tumble and Hop: window assignment and watermark derivation (SPEC sections 3, 4 and 6).

Windows are half-open `[start, end)`, aligned to 1970-01-01 UTC plus `offset`.
`W(col, t)` gives `W(col, t)`, `W(window_start, s0)`, `W(window_end, s0 + size)`
with `s0 = tumble_start(t)` for Tumble and `floor_to_slide(t - size) + slide` for Hop.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import pytest

import sparkbeam as sb


def at(hour: int, minute: int, second: int = 0, micro: int = 0) -> datetime:
    return datetime(2026, 4, 1, hour, minute, second, micro)


def by_column(marks: Sequence[sb.Watermark]) -> dict[str, list[Any]]:
    """Watermark values per column, in order (the order across columns is not pinned)."""
    out: dict[str, list[Any]] = {}
    for mark in marks:
        out.setdefault(mark.column, []).append(mark.value)
    return out


def stream_of(*epochs: list[dict[str, Any]]) -> sb.TestStream:
    stream = sb.TestStream()
    for rows in epochs:
        stream.add_epoch(rows)
    return stream


def windows(rows: list[dict[str, Any]], column: str = "t") -> list[tuple[Any, Any, Any]]:
    """`(time, window_start, window_end)` per row, sorted (row order is not pinned)."""
    return sorted((row[column], row["window_start"], row["window_end"]) for row in rows)


def run_window(
    rows: list[dict[str, Any]], transform: sb.PTransform, runner: Any = None
) -> list[tuple[Any, Any, Any]]:
    p = sb.Pipeline(runner=runner)
    out = p | sb.Create(rows) | transform
    return windows(p.run().collect(out))


# --- watermark derivation --------------------------------------------------------------


def test_worked_example_tumble_of_a_watermark() -> None:
    # Watermark(order_time, 10:40) through a 30-minute Tumble gives
    # Watermark(window_start, 10:30) and Watermark(window_end, 11:00).
    p = sb.Pipeline()
    windowed = (
        p
        | stream_of([{"order_time": at(10, 45), "amount": 29.99}])
        | sb.WithWatermark("order_time", timedelta(minutes=5))
        | sb.Tumble("order_time", "30 minutes")
    )
    result = p.run()
    assert by_column(result.watermarks(windowed)) == {
        "order_time": [at(10, 40)],
        "window_start": [at(10, 30)],
        "window_end": [at(11, 0)],
    }
    assert result.collect(windowed) == [
        {
            "order_time": at(10, 45),
            "amount": 29.99,
            "window_start": at(10, 30),
            "window_end": at(11, 0),
        }
    ]


def test_tumble_watermarks_follow_the_input_watermark_over_epochs() -> None:
    # wm 10:40 -> [10:30, 11:00); wm 11:07 -> [11:00, 11:30); wm 11:30 -> [11:30, 12:00).
    p = sb.Pipeline()
    windowed = (
        p
        | stream_of([{"t": at(10, 45)}], [{"t": at(11, 12)}], [{"t": at(11, 35)}])
        | sb.WithWatermark("t", "5 minutes")
        | sb.Tumble("t", "30 minutes")
    )
    marks = by_column(p.run().watermarks(windowed))
    assert marks == {
        "t": [at(10, 40), at(11, 7), at(11, 30)],
        "window_start": [at(10, 30), at(11, 0), at(11, 30)],
        "window_end": [at(11, 0), at(11, 30), at(12, 0)],
    }
    assert all(type(v) is datetime for values in marks.values() for v in values)


def test_tumble_watermark_with_offset() -> None:
    # Windows start at :10 and :40; wm 10:40 lies at the start of [10:40, 11:10).
    p = sb.Pipeline()
    windowed = (
        p
        | stream_of([{"t": at(10, 45)}])
        | sb.WithWatermark("t", "5 minutes")
        | sb.Tumble("t", "30 minutes", offset="10 minutes")
    )
    result = p.run()
    assert by_column(result.watermarks(windowed)) == {
        "t": [at(10, 40)],
        "window_start": [at(10, 40)],
        "window_end": [at(11, 10)],
    }
    assert windows(result.collect(windowed)) == [(at(10, 45), at(10, 40), at(11, 10))]


def test_tumble_passes_other_watermarks_through() -> None:
    p = sb.Pipeline()
    windowed = (
        p
        | stream_of([{"t": at(10, 45), "u": at(10, 5)}])
        | sb.WithWatermark("t", "5 minutes")
        | sb.WithWatermark("u", 0)
        | sb.Tumble("t", "30 minutes")
    )
    assert by_column(p.run().watermarks(windowed)) == {
        "t": [at(10, 40)],
        "u": [at(10, 5)],
        "window_start": [at(10, 30)],
        "window_end": [at(11, 0)],
    }


def test_tumble_without_watermark_on_bounded_input_has_no_watermarks() -> None:
    p = sb.Pipeline()
    windowed = p | sb.Create([{"t": at(10, 45)}]) | sb.Tumble("t", "30 minutes")
    result = p.run()
    assert result.watermarks(windowed) == []
    assert windows(result.collect(windowed)) == [(at(10, 45), at(10, 30), at(11, 0))]


def test_hop_watermark_is_the_start_of_the_earliest_window_holding_it() -> None:
    # size 30, slide 10, wm 10:45: s0 = floor_10(10:15) + 10 = 10:20: [10:20, 10:50)
    # is the earliest window holding 10:45 ([10:10, 10:40) does not).
    p = sb.Pipeline()
    windowed = (
        p
        | stream_of([{"t": at(10, 50)}])
        | sb.WithWatermark("t", "5 minutes")
        | sb.Hop("t", "30 minutes", "10 minutes")
    )
    result = p.run()
    assert by_column(result.watermarks(windowed)) == {
        "t": [at(10, 45)],
        "window_start": [at(10, 20)],
        "window_end": [at(10, 50)],
    }
    # 10:50 is in [10:30, 11:00), [10:40, 11:10), [10:50, 11:20); not in [10:20, 10:50).
    assert windows(result.collect(windowed)) == [
        (at(10, 50), at(10, 30), at(11, 0)),
        (at(10, 50), at(10, 40), at(11, 10)),
        (at(10, 50), at(10, 50), at(11, 20)),
    ]


def test_hop_watermark_on_a_window_boundary() -> None:
    # wm 10:40: s0 = floor_10(10:10) + 10 = 10:20 ([10:10, 10:40) excludes 10:40).
    p = sb.Pipeline()
    windowed = (
        p
        | stream_of([{"t": at(10, 40)}])
        | sb.WithWatermark("t", 0)
        | sb.Hop("t", "30 minutes", "10 minutes")
    )
    assert by_column(p.run().watermarks(windowed)) == {
        "t": [at(10, 40)],
        "window_start": [at(10, 20)],
        "window_end": [at(10, 50)],
    }


def test_hop_watermark_with_gaps_between_windows() -> None:
    # size 10, slide 30: windows [0,10), [30,40), [60,70), [90,100), ...
    # wm 45: s0 = floor_30(35) + 30 = 60 (45 is in a gap; the next window is [60, 70)).
    # wm 95: s0 = floor_30(85) + 30 = 90.
    p = sb.Pipeline()
    windowed = (
        p | stream_of([{"t": 45}], [{"t": 95}]) | sb.WithWatermark("t", 0) | sb.Hop("t", 10, 30)
    )
    result = p.run()
    assert by_column(result.watermarks(windowed)) == {
        "t": [45, 95],
        "window_start": [60, 90],
        "window_end": [70, 100],
    }
    assert result.collect_by_epoch(windowed) == [
        [],
        [{"t": 95, "window_start": 90, "window_end": 100}],
        [],
    ]


def test_hop_passes_other_watermarks_through() -> None:
    p = sb.Pipeline()
    windowed = (
        p
        | stream_of([{"t": 100, "u": 7}])
        | sb.WithWatermark("t", 0)
        | sb.WithWatermark("u", 2)
        | sb.Hop("t", 20, 10)
    )
    # s0 = floor_10(80) + 10 = 90.
    assert by_column(p.run().watermarks(windowed)) == {
        "t": [100],
        "u": [5],
        "window_start": [90],
        "window_end": [110],
    }


# --- assignment ------------------------------------------------------------------------


def test_tumble_windows_are_half_open(runner: Any) -> None:
    rows = [{"t": at(10, 29, 59, 999_999)}, {"t": at(10, 30)}, {"t": at(11, 0)}]
    assert run_window(rows, sb.Tumble("t", "30 minutes"), runner) == [
        (at(10, 29, 59, 999_999), at(10, 0), at(10, 30)),
        (at(10, 30), at(10, 30), at(11, 0)),
        (at(11, 0), at(11, 0), at(11, 30)),
    ]


def test_tumble_keeps_the_other_columns(runner: Any) -> None:
    p = sb.Pipeline(runner=runner)
    out = p | sb.Create([{"id": "o1", "t": at(10, 1), "x": 2.5}]) | sb.Tumble("t", "1 minute")
    assert p.run().collect(out) == [
        {"id": "o1", "t": at(10, 1), "x": 2.5, "window_start": at(10, 1), "window_end": at(10, 2)}
    ]


def test_tumble_with_offset(runner: Any) -> None:
    rows = [{"t": at(10, 10)}, {"t": at(10, 15)}, {"t": at(11, 14, 59)}]
    assert run_window(rows, sb.Tumble("t", "1 hour", offset="15 minutes"), runner) == [
        (at(10, 10), at(9, 15), at(10, 15)),
        (at(10, 15), at(10, 15), at(11, 15)),
        (at(11, 14, 59), at(10, 15), at(11, 15)),
    ]


def test_tumble_with_timedelta_size_and_offset(runner: Any) -> None:
    rows = [{"t": at(10, 10)}]
    transform = sb.Tumble("t", timedelta(hours=1), offset=timedelta(minutes=15))
    assert run_window(rows, transform, runner) == [(at(10, 10), at(9, 15), at(10, 15))]


def test_compound_and_fractional_duration_strings(runner: Any) -> None:
    rows = [{"t": datetime(1970, 1, 1, 2, 0, 2)}]
    # 1 h 30 min windows from the epoch: [01:30, 03:00).
    assert run_window(rows, sb.Tumble("t", "1 hour 30 minutes"), runner) == [
        (datetime(1970, 1, 1, 2, 0, 2), datetime(1970, 1, 1, 1, 30), datetime(1970, 1, 1, 3, 0))
    ]
    # 1.5 s windows from the epoch: 02:00:02 is in [02:00:01.5, 02:00:03).
    assert run_window(rows, sb.Tumble("t", "1.5 seconds"), runner) == [
        (
            datetime(1970, 1, 1, 2, 0, 2),
            datetime(1970, 1, 1, 2, 0, 1, 500_000),
            datetime(1970, 1, 1, 2, 0, 3),
        )
    ]


def test_tumble_with_negative_offset_on_integers(runner: Any) -> None:
    # size 60, offset -5: windows ..., [-65, -5), [-5, 55), [55, 115), ...
    rows = [{"t": 10}, {"t": 55}, {"t": -6}, {"t": -5}]
    assert run_window(rows, sb.Tumble("t", 60, offset=-5), runner) == [
        (-6, -65, -5),
        (-5, -5, 55),
        (10, -5, 55),
        (55, 55, 115),
    ]


def test_tumble_before_1970(runner: Any) -> None:
    rows = [
        {"t": datetime(1969, 12, 31, 23, 59, 30)},
        {"t": datetime(1969, 12, 31, 23, 59, 59, 999_999)},
        {"t": datetime(1969, 7, 20, 20, 17, 40)},
    ]
    assert run_window(rows, sb.Tumble("t", "1 minute"), runner) == [
        (
            datetime(1969, 7, 20, 20, 17, 40),
            datetime(1969, 7, 20, 20, 17),
            datetime(1969, 7, 20, 20, 18),
        ),
        (datetime(1969, 12, 31, 23, 59, 30), datetime(1969, 12, 31, 23, 59), datetime(1970, 1, 1)),
        (
            datetime(1969, 12, 31, 23, 59, 59, 999_999),
            datetime(1969, 12, 31, 23, 59),
            datetime(1970, 1, 1),
        ),
    ]
    assert run_window(rows[2:], sb.Tumble("t", "1 day"), runner) == [
        (datetime(1969, 7, 20, 20, 17, 40), datetime(1969, 7, 20), datetime(1969, 7, 21))
    ]


def test_tumble_on_negative_integers(runner: Any) -> None:
    rows = [{"t": -1}, {"t": -10}, {"t": -11}, {"t": 0}, {"t": 9}]
    out = run_window(rows, sb.Tumble("t", 10), runner)
    assert out == [(-11, -20, -10), (-10, -10, 0), (-1, -10, 0), (0, 0, 10), (9, 0, 10)]
    assert all(type(v) is int for row in out for v in row)


def test_hop_with_slide_smaller_than_size_gives_several_rows_per_row(runner: Any) -> None:
    # size 10, slide 5: each time is in two windows.
    rows = [{"t": 12}, {"t": 10}, {"t": -3}]
    assert run_window(rows, sb.Hop("t", 10, 5), runner) == [
        (-3, -10, 0),
        (-3, -5, 5),
        (10, 5, 15),
        (10, 10, 20),
        (12, 5, 15),
        (12, 10, 20),
    ]


def test_hop_with_size_not_a_multiple_of_slide(runner: Any) -> None:
    # size 10, slide 4: 12 is in [4, 14), [8, 18), [12, 22).
    assert run_window([{"t": 12}], sb.Hop("t", 10, 4), runner) == [
        (12, 4, 14),
        (12, 8, 18),
        (12, 12, 22),
    ]


def test_hop_on_datetimes(runner: Any) -> None:
    rows = [{"t": at(10, 40)}, {"t": at(10, 29, 59, 999_999)}]
    assert run_window(rows, sb.Hop("t", "1 hour", "30 minutes"), runner) == [
        (at(10, 29, 59, 999_999), at(9, 30), at(10, 30)),
        (at(10, 29, 59, 999_999), at(10, 0), at(11, 0)),
        (at(10, 40), at(10, 0), at(11, 0)),
        (at(10, 40), at(10, 30), at(11, 30)),
    ]


def test_hop_before_1970(runner: Any) -> None:
    rows = [{"t": datetime(1969, 12, 31, 23, 50)}]
    assert run_window(rows, sb.Hop("t", "20 minutes", "10 minutes"), runner) == [
        (datetime(1969, 12, 31, 23, 50), datetime(1969, 12, 31, 23, 40), datetime(1970, 1, 1)),
        (
            datetime(1969, 12, 31, 23, 50),
            datetime(1969, 12, 31, 23, 50),
            datetime(1970, 1, 1, 0, 10),
        ),
    ]


def test_hop_with_offset(runner: Any) -> None:
    # size 10, slide 5, offset 2: starts ..., 2, 7, 12, ...
    assert run_window([{"t": 12}, {"t": 6}], sb.Hop("t", 10, 5, offset=2), runner) == [
        (6, -3, 7),
        (6, 2, 12),
        (12, 7, 17),
        (12, 12, 22),
    ]


def test_hop_with_slide_larger_than_size_drops_rows_in_gaps(runner: Any) -> None:
    # size 10, slide 30: windows [-30,-20), [0,10), [30,40), ...
    rows = [{"t": 5}, {"t": 10}, {"t": 15}, {"t": 29}, {"t": 30}, {"t": -25}, {"t": -5}]
    assert run_window(rows, sb.Hop("t", 10, 30), runner) == [
        (-25, -30, -20),
        (5, 0, 10),
        (30, 30, 40),
    ]


def test_hop_with_gaps_and_offset(runner: Any) -> None:
    # size 10, slide 30, offset 5: windows [5, 15), [35, 45), ...
    rows = [{"t": 4}, {"t": 5}, {"t": 14}, {"t": 15}, {"t": 40}]
    assert run_window(rows, sb.Hop("t", 10, 30, offset=5), runner) == [
        (5, 5, 15),
        (14, 5, 15),
        (40, 35, 45),
    ]


def test_hop_where_slide_equals_size_is_a_tumble(runner: Any) -> None:
    rows = [{"t": t} for t in (-7, 0, 3, 10, 19)]
    assert run_window(rows, sb.Hop("t", 10, 10), runner) == run_window(
        rows, sb.Tumble("t", 10), runner
    )


def test_window_columns_have_the_time_columns_type(runner: Any) -> None:
    p = sb.Pipeline(runner=runner)
    source = p | sb.Create([{"t": at(10, 1), "n": 7}])
    by_time = source | sb.Tumble("t", "1 minute")
    by_number = source | sb.Hop("n", 4, 2)
    result = p.run()
    (row,) = result.collect(by_time)
    assert type(row["window_start"]) is datetime
    assert type(row["window_end"]) is datetime
    assert sorted((r["window_start"], r["window_end"]) for r in result.collect(by_number)) == [
        (4, 8),
        (6, 10),
    ]


def test_fluent_window_methods_match_the_transforms() -> None:
    p = sb.Pipeline()
    source = (
        p | stream_of([{"t": at(10, 3)}, {"t": at(10, 7)}], [{"t": at(10, 13)}])
    ).with_watermark("t", "1 minute")
    pairs = [
        (
            source | sb.Tumble("t", "5 minutes", offset="1 minute"),
            source.tumble("t", "5 minutes", offset="1 minute"),
        ),
        (
            source | sb.Hop("t", "10 minutes", "5 minutes"),
            source.hop("t", "10 minutes", "5 minutes"),
        ),
    ]
    result = p.run()
    for piped, fluent in pairs:
        assert result.collect_by_epoch(piped) == result.collect_by_epoch(fluent)
        assert result.watermarks(piped) == result.watermarks(fluent)
        assert result.watermarks(fluent)  # something to compare


# --- errors ----------------------------------------------------------------------------


@pytest.fixture
def bounded() -> sb.PCollection:
    return sb.Pipeline() | sb.Create([{"t": at(10, 0), "n": 5, "k": "a"}])


@pytest.mark.parametrize(
    "transform",
    [sb.Tumble("missing", "1 minute"), sb.Hop("missing", "2 minutes", "1 minute")],
)
def test_window_over_unknown_column(bounded: sb.PCollection, transform: sb.PTransform) -> None:
    with pytest.raises(sb.PipelineError) as info:
        bounded | "per minute" >> transform
    message = str(info.value)
    assert "per minute" in message
    assert "'missing'" in message
    assert "'t'" in message


def test_window_over_a_string_column(bounded: sb.PCollection) -> None:
    with pytest.raises(sb.PipelineError) as info:
        bounded | "per minute" >> sb.Tumble("k", "1 minute")
    message = str(info.value)
    assert "per minute" in message
    assert "'k'" in message
    assert "datetime" in message


@pytest.mark.parametrize(
    "transform, named",
    [
        (sb.Tumble("t", timedelta(0)), "size"),
        (sb.Tumble("t", "0 minutes"), "size"),
        (sb.Tumble("n", 0), "size"),
        (sb.Hop("t", "1 minute", "0 seconds"), "slide"),
        (sb.Hop("n", 0, 1), "size"),
        (sb.Hop("n", 4, 0), "slide"),
    ],
)
def test_zero_size_or_slide(bounded: sb.PCollection, transform: sb.PTransform, named: str) -> None:
    with pytest.raises(sb.PipelineError) as info:
        bounded | "w" >> transform
    message = str(info.value)
    assert message.startswith("w")
    assert named in message
    assert "positive" in message


@pytest.mark.parametrize(
    "transform, named, value",
    [
        (sb.Tumble("t", "-1 minute"), "size", "-1 minute"),
        (sb.Tumble("n", -10), "size", "-10"),
        (sb.Hop("t", "1 minute", "-30 seconds"), "slide", "-30 seconds"),
        (sb.Hop("n", -4, 2), "size", "-4"),
    ],
)
def test_negative_size_or_slide(
    bounded: sb.PCollection, transform: sb.PTransform, named: str, value: str
) -> None:
    with pytest.raises(sb.PipelineError) as info:
        bounded | "w" >> transform
    message = str(info.value)
    assert message.startswith("w")
    assert named in message
    assert value in message
    assert "positive" in message


def test_negative_timedelta_size(bounded: sb.PCollection) -> None:
    with pytest.raises(sb.PipelineError, match="positive"):
        bounded | sb.Tumble("t", timedelta(minutes=-1))


@pytest.mark.parametrize(
    "transform, named",
    [
        (sb.Tumble("t", "1 fortnight"), "fortnight"),
        (sb.Tumble("t", "one minute"), "one minute"),
        (sb.Tumble("t", "1.5 microseconds"), "1.5 microseconds"),
        (sb.Hop("t", "10 minutes", "5 minuts"), "minuts"),
        (sb.Tumble("t", "1 minute", offset="5 seconds and"), "5 seconds and"),
    ],
)
def test_bad_duration_strings(
    bounded: sb.PCollection, transform: sb.PTransform, named: str
) -> None:
    with pytest.raises(sb.PipelineError) as info:
        bounded | "w" >> transform
    message = str(info.value)
    assert message.startswith("w")
    assert named in message


@pytest.mark.parametrize(
    "transform, value",
    [
        (sb.Tumble("t", 60), "60"),
        (sb.Hop("t", "1 minute", 30), "30"),
        (sb.Tumble("t", "1 minute", offset=15), "15"),
    ],
)
def test_integer_durations_on_a_datetime_column(
    bounded: sb.PCollection, transform: sb.PTransform, value: str
) -> None:
    with pytest.raises(sb.PipelineError) as info:
        bounded | "w" >> transform
    message = str(info.value)
    assert message.startswith("w")
    assert value in message
    assert "'t'" in message
    assert "timedelta" in message


@pytest.mark.parametrize(
    "transform",
    [
        sb.Tumble("n", timedelta(seconds=10)),
        sb.Tumble("n", "10 seconds"),
        sb.Hop("n", 10, timedelta(seconds=5)),
        sb.Tumble("n", 10, offset="1 second"),
        sb.Tumble("n", 2.5),
    ],
)
def test_non_integer_durations_on_an_integer_column(
    bounded: sb.PCollection, transform: sb.PTransform
) -> None:
    with pytest.raises(sb.PipelineError) as info:
        bounded | "w" >> transform
    message = str(info.value)
    assert message.startswith("w")
    assert "'n'" in message
    assert "integer" in message


@pytest.mark.parametrize(
    "transform", [sb.Tumble("t", "1 minute"), sb.Hop("t", "2 minutes", "1 minute")]
)
def test_window_without_watermark_on_unbounded_input(transform: sb.PTransform) -> None:
    p = sb.Pipeline()
    stream = p | sb.TestStream().add_epoch([{"t": at(10, 0), "u": at(10, 0)}])
    for source in (stream, stream.with_watermark("u", "1 minute")):
        with pytest.raises(sb.PipelineError) as info:
            source | "per minute" >> transform
        message = str(info.value)
        assert "per minute" in message
        assert "'t'" in message
        assert "with_watermark" in message


def test_window_columns_already_in_the_schema() -> None:
    p = sb.Pipeline()
    source = p | sb.Create([{"t": at(10, 0), "window_start": at(9, 0)}])
    for transform in (sb.Tumble("t", "1 minute"), sb.Hop("t", "2 minutes", "1 minute")):
        with pytest.raises(sb.PipelineError) as info:
            source | "w" >> transform
        message = str(info.value)
        assert message.startswith("w")
        assert "window_start" in message
        assert "Select" in message or "rename" in message


@pytest.mark.parametrize(
    "transform", [sb.Tumble("t", "1 minute"), sb.Hop("t", "2 minutes", "1 minute")]
)
def test_none_time_reaching_a_window_is_a_data_error(transform: sb.PTransform) -> None:
    p = sb.Pipeline()
    _ = p | sb.Create([{"t": at(10, 0), "k": "a"}, {"t": None, "k": "b"}]) | "w" >> transform
    with pytest.raises(sb.DataError) as info:
        p.run()
    assert info.value.row == {"t": None, "k": "b"}
    message = str(info.value)
    assert message.startswith("w")
    assert "'t'" in message
    assert "'b'" in message  # the row
    assert "with_watermark" in message or "Filter" in message
