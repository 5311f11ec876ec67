"""WithWatermark: the watermark filter (SPEC sections 3, 4 and 6), on the direct runner.

Rule: `wm = floor_to_ms(max event time) - delay` on datetime columns (`max - delay`
on integer columns); a row is late, dropped and counted, when `t < wm`; `None`
event times are dropped and counted apart. `emit="periodic"` raises the watermark
at the end of each epoch, `emit="event"` after every row.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import pytest

import sparkbeam as sb


def at(hour: int, minute: int, second: int = 0, micro: int = 0) -> datetime:
    return datetime(2026, 4, 1, hour, minute, second, micro)


def W(column: str, value: Any) -> sb.Watermark:
    return sb.Watermark(column, value)


def by_column(marks: Sequence[sb.Watermark]) -> dict[str, list[Any]]:
    """Watermark values per column, in order (the order across columns is not pinned)."""
    out: dict[str, list[Any]] = {}
    for mark in marks:
        out.setdefault(mark.column, []).append(mark.value)
    return out


def stream_of(*epochs: list[dict[str, Any]], schema: Any = None) -> sb.TestStream:
    stream = sb.TestStream(schema)
    for rows in epochs:
        stream.add_epoch(rows)
    return stream


def times(rows: list[dict[str, Any]], column: str = "t") -> list[Any]:
    return [row[column] for row in rows]


def times_by_epoch(epochs: list[list[dict[str, Any]]], column: str = "t") -> list[list[Any]]:
    return [times(rows, column) for rows in epochs]


# --- the watermark's value -------------------------------------------------------------


def test_watermark_is_max_minus_delay_at_end_of_epoch() -> None:
    p = sb.Pipeline()
    wm = p | stream_of([{"t": at(10, 45), "k": "a"}]) | sb.WithWatermark("t", "5 minutes")
    result = p.run()
    marks = result.watermarks(wm)
    assert marks == [W("t", at(10, 40))]
    assert type(marks[0].value) is datetime
    assert marks[0].value.tzinfo is None
    assert result.collect_by_epoch(wm) == [[{"t": at(10, 45), "k": "a"}], []]


@pytest.mark.parametrize(
    "delay",
    [
        "5 minutes",
        "300 seconds",
        "300000 milliseconds",
        timedelta(minutes=5),
        timedelta(seconds=300),
    ],
)
def test_delay_forms_are_equivalent(delay: Any) -> None:
    p = sb.Pipeline()
    wm = p | stream_of([{"t": at(10, 45)}]) | sb.WithWatermark("t", delay)
    assert p.run().watermarks(wm) == [W("t", at(10, 40))]


def test_datetime_watermark_is_floored_to_whole_milliseconds() -> None:
    # max = 10:00:00.000999, delay 0: wm = 10:00:00.000 (not .000999). A later row at
    # .000500 is therefore on time (it would be late against an unrounded watermark).
    p = sb.Pipeline()
    wm = (
        p
        | stream_of([{"t": at(10, 0, 0, 999)}], [{"t": at(10, 0, 0, 500)}])
        | sb.WithWatermark("t", timedelta(0))
    )
    result = p.run()
    assert result.watermarks(wm) == [W("t", at(10, 0, 0, 0))]
    assert times_by_epoch(result.collect_by_epoch(wm)) == [
        [at(10, 0, 0, 999)],
        [at(10, 0, 0, 500)],
        [],
    ]
    assert result.late_count(wm) == 0


def test_floor_happens_before_the_delay_is_subtracted() -> None:
    # floor_to_ms(10:00:00.123456) = .123000; minus 100 ms = 10:00:00.023000.
    p = sb.Pipeline()
    wm = p | stream_of([{"t": at(10, 0, 0, 123_456)}]) | sb.WithWatermark("t", "100 milliseconds")
    assert p.run().watermarks(wm) == [W("t", at(10, 0, 0, 23_000))]


def test_integer_watermark_is_not_rounded() -> None:
    # max 1999, delay 0: wm 1999 exactly (a millisecond floor would give 1000).
    p = sb.Pipeline()
    wm = p | stream_of([{"t": 1999}], [{"t": 1998}, {"t": 1999}]) | sb.WithWatermark("t", 0)
    result = p.run()
    marks = result.watermarks(wm)
    assert marks == [W("t", 1999)]
    assert type(marks[0].value) is int
    assert times_by_epoch(result.collect_by_epoch(wm)) == [[1999], [1999], []]
    assert result.late_count(wm) == 1


def test_integer_watermark_with_integer_delay() -> None:
    p = sb.Pipeline()
    wm = p | stream_of([{"t": 1005}], [{"t": 1000}, {"t": 999}]) | sb.WithWatermark("t", 6)
    result = p.run()
    # wm = 1005 - 6 = 999: 1000 and 999 are both >= 999, kept.
    assert result.watermarks(wm) == [W("t", 999)]
    assert times(result.collect(wm)) == [1005, 1000, 999]
    assert result.late_count(wm) == 0


# --- lateness --------------------------------------------------------------------------


def test_row_equal_to_watermark_is_kept_and_a_row_below_is_late() -> None:
    p = sb.Pipeline()
    wm = (
        p
        | stream_of(
            [{"t": at(10, 45)}],
            [{"t": at(10, 40)}, {"t": at(10, 39, 59, 999_999)}, {"t": at(10, 50)}],
        )
        | sb.WithWatermark("t", "5 minutes")
    )
    result = p.run()
    assert times_by_epoch(result.collect_by_epoch(wm)) == [
        [at(10, 45)],
        [at(10, 40), at(10, 50)],
        [],
    ]
    assert result.late_count(wm) == 1
    assert result.watermarks(wm) == [W("t", at(10, 40)), W("t", at(10, 45))]


EPOCHS = (
    [{"t": at(10, 0)}, {"t": at(10, 10)}],
    [{"t": at(10, 20)}, {"t": at(10, 12)}, {"t": at(10, 4)}],
    [{"t": at(10, 14)}, {"t": at(10, 16)}],
)


def test_periodic_judges_each_epoch_against_the_previous_epochs_watermark() -> None:
    # e0: no watermark yet, both kept; wm := 10:10 - 5 = 10:05.
    # e1: against 10:05: 10:20 and 10:12 kept, 10:04 late; wm := 10:15.
    # e2: against 10:15: 10:14 late, 10:16 kept; max is still 10:20, no new wm.
    p = sb.Pipeline()
    wm = p | stream_of(*EPOCHS) | sb.WithWatermark("t", "5 minutes", emit="periodic")
    result = p.run()
    assert times_by_epoch(result.collect_by_epoch(wm)) == [
        [at(10, 0), at(10, 10)],
        [at(10, 20), at(10, 12)],
        [at(10, 16)],
        [],
    ]
    assert result.watermarks(wm) == [W("t", at(10, 5)), W("t", at(10, 15))]
    assert result.late_count(wm) == 2


def test_periodic_is_the_default() -> None:
    p = sb.Pipeline()
    wm = p | stream_of(*EPOCHS) | sb.WithWatermark("t", "5 minutes")
    result = p.run()
    assert result.late_count(wm) == 2
    assert result.watermarks(wm) == [W("t", at(10, 5)), W("t", at(10, 15))]


def test_event_raises_the_watermark_after_every_row() -> None:
    # e0: 10:00 kept, wm 09:55; 10:10 kept, wm 10:05.
    # e1: 10:20 kept, wm 10:15; 10:12 and 10:04 late.
    # e2: 10:14 late; 10:16 kept (its 10:11 does not raise the wm).
    p = sb.Pipeline()
    wm = p | stream_of(*EPOCHS) | sb.WithWatermark("t", "5 minutes", emit="event")
    result = p.run()
    assert times_by_epoch(result.collect_by_epoch(wm)) == [
        [at(10, 0), at(10, 10)],
        [at(10, 20)],
        [at(10, 16)],
        [],
    ]
    assert result.watermarks(wm) == [
        W("t", at(9, 55)),
        W("t", at(10, 5)),
        W("t", at(10, 15)),
    ]
    assert result.late_count(wm) == 3


def test_event_mode_keeps_a_row_equal_to_the_watermark() -> None:
    p = sb.Pipeline()
    wm = (
        p
        | sb.Create([{"t": at(10, 10)}, {"t": at(10, 5)}, {"t": at(10, 4)}])
        | sb.WithWatermark("t", "5 minutes", emit="event")
    )
    result = p.run()
    assert times(result.collect(wm)) == [at(10, 10), at(10, 5)]
    assert result.late_count(wm) == 1


def test_periodic_on_bounded_input_drops_nothing() -> None:
    # A Create is one epoch: the periodic watermark rises only after it.
    p = sb.Pipeline()
    wm = p | sb.Create([{"t": at(10, 10)}, {"t": at(9, 0)}]) | sb.WithWatermark("t", "5 minutes")
    result = p.run()
    assert sorted(times(result.collect(wm))) == [at(9, 0), at(10, 10)]
    assert result.late_count(wm) == 0
    assert result.watermarks(wm) == [W("t", at(10, 5))]


def test_none_event_times_are_dropped_and_counted_apart_from_late_rows() -> None:
    p = sb.Pipeline()
    wm = (
        p
        | stream_of(
            [{"t": at(10, 0), "k": "a"}, {"t": None, "k": "b"}],
            [{"t": at(9, 0), "k": "c"}, {"t": None, "k": "d"}, {"t": at(10, 30), "k": "e"}],
        )
        | sb.WithWatermark("t", "10 minutes")
    )
    result = p.run()
    assert times(result.collect(wm), "k") == ["a", "e"]
    assert result.invalid_count(wm) == 2
    assert result.late_count(wm) == 1
    # None rows do not move the watermark: 10:00 - 10 min, then 10:30 - 10 min.
    assert result.watermarks(wm) == [W("t", at(9, 50)), W("t", at(10, 20))]


def test_all_none_event_times_give_no_watermark() -> None:
    p = sb.Pipeline()
    wm = (
        p
        | sb.Create([{"t": None}, {"t": None}], schema={"t": datetime})
        | sb.WithWatermark("t", "1 minute")
    )
    result = p.run()
    assert result.collect(wm) == []
    assert result.watermarks(wm) == []
    assert result.invalid_count(wm) == 2
    assert result.late_count(wm) == 0


# --- upstream watermarks ---------------------------------------------------------------


def test_upstream_watermarks_on_other_columns_pass_through() -> None:
    p = sb.Pipeline()
    first = (
        p
        | stream_of(
            [{"t": at(10, 30), "u": at(10, 0)}],
            [{"t": at(10, 40), "u": at(10, 20)}],
        )
        | sb.WithWatermark("t", "10 minutes")
    )
    second = first | sb.WithWatermark("u", "1 minute")
    result = p.run()
    assert result.watermarks(first) == [W("t", at(10, 20)), W("t", at(10, 30))]
    assert by_column(result.watermarks(second)) == {
        "t": [at(10, 20), at(10, 30)],
        "u": [at(9, 59), at(10, 19)],
    }
    assert len(result.collect(second)) == 2


def test_upstream_watermark_on_the_same_column_passes_through() -> None:
    # The upstream W(t, 10:20) passes through when it arrives; the filter's own
    # W(t, 10:29) follows at the end of the epoch.
    p = sb.Pipeline()
    second = (
        p
        | stream_of([{"t": at(10, 30)}])
        | "loose" >> sb.WithWatermark("t", "10 minutes")
        | "tight" >> sb.WithWatermark("t", "1 minute")
    )
    assert by_column(p.run().watermarks(second)) == {"t": [at(10, 20), at(10, 29)]}


def test_zero_integer_delay_on_a_datetime_column_is_accepted() -> None:
    p = sb.Pipeline()
    wm = p | stream_of([{"t": at(10, 0, 1, 1500)}]) | sb.WithWatermark("t", 0)
    assert p.run().watermarks(wm) == [W("t", at(10, 0, 1, 1000))]


def test_fluent_with_watermark_matches_the_transform() -> None:
    p = sb.Pipeline()
    source = p | stream_of(*EPOCHS)
    piped = source | sb.WithWatermark("t", "5 minutes", emit="event")
    fluent = source.with_watermark("t", "5 minutes", emit="event")
    result = p.run()
    assert result.collect_by_epoch(piped) == result.collect_by_epoch(fluent)
    assert result.watermarks(piped) == result.watermarks(fluent)
    assert result.late_count(fluent) == 3


# --- errors when applied ---------------------------------------------------------------


@pytest.fixture
def source() -> sb.PCollection:
    p = sb.Pipeline()
    return p | sb.TestStream().add_epoch([{"t": at(10, 0), "n": 5, "k": "a", "x": 1.5}])


def test_unknown_column(source: sb.PCollection) -> None:
    with pytest.raises(sb.PipelineError) as info:
        source | "wm" >> sb.WithWatermark("event_tme", "1 minute")
    message = str(info.value)
    assert "wm" in message
    assert "'event_tme'" in message
    assert "'t'" in message  # the columns it could have meant


@pytest.mark.parametrize("column, kind", [("k", "str"), ("x", "float")])
def test_watermark_on_a_non_time_column(source: sb.PCollection, column: str, kind: str) -> None:
    with pytest.raises(sb.PipelineError) as info:
        source | "wm" >> sb.WithWatermark(column, 0)
    message = str(info.value)
    assert "wm" in message
    assert repr(column) in message
    assert kind in message
    assert "datetime" in message


@pytest.mark.parametrize(
    "column, delay", [("t", "-5 minutes"), ("t", timedelta(minutes=-5)), ("n", -3)]
)
def test_negative_delay(source: sb.PCollection, column: str, delay: Any) -> None:
    with pytest.raises(sb.PipelineError) as info:
        source | "wm" >> sb.WithWatermark(column, delay)
    message = str(info.value)
    assert "wm" in message
    assert "delay" in message
    assert "positive" in message


def test_negative_delay_names_the_value(source: sb.PCollection) -> None:
    with pytest.raises(sb.PipelineError, match="-5 minutes"):
        source | sb.WithWatermark("t", "-5 minutes")
    with pytest.raises(sb.PipelineError, match="-3"):
        source | sb.WithWatermark("n", -3)
    # a timedelta as its words, not datetime.timedelta(days=-1, seconds=86100)
    with pytest.raises(sb.PipelineError, match="got '-5 minutes'"):
        source | sb.WithWatermark("t", timedelta(minutes=-5))


@pytest.mark.parametrize(
    "delay", [timedelta(microseconds=1500), "1500 microseconds", "1 second 1 microsecond"]
)
def test_sub_millisecond_delay_on_datetime_column(source: sb.PCollection, delay: Any) -> None:
    with pytest.raises(sb.PipelineError) as info:
        source | "wm" >> sb.WithWatermark("t", delay)
    message = str(info.value)
    assert "wm" in message
    assert "millisecond" in message


def test_sub_millisecond_rule_does_not_apply_to_integer_columns(source: sb.PCollection) -> None:
    wm = source | sb.WithWatermark("n", 1)
    assert wm.pipeline.run().watermarks(wm) == [W("n", 4)]


@pytest.mark.parametrize("delay, named", [("5 minuts", "minuts"), ("soon", "soon")])
def test_bad_duration_string(source: sb.PCollection, delay: str, named: str) -> None:
    with pytest.raises(sb.PipelineError) as info:
        source | "wm" >> sb.WithWatermark("t", delay)
    message = str(info.value)
    assert "wm" in message
    assert named in message
    assert "minutes" in message  # an example of the accepted form


def test_bad_duration_type(source: sb.PCollection) -> None:
    with pytest.raises(sb.PipelineError, match=r"5\.5"):
        source | "wm" >> sb.WithWatermark("t", 5.5)


def test_integer_delay_on_a_datetime_column(source: sb.PCollection) -> None:
    with pytest.raises(sb.PipelineError) as info:
        source | "wm" >> sb.WithWatermark("t", 300)
    message = str(info.value)
    assert "wm" in message
    assert "300" in message
    assert "'t'" in message
    assert "timedelta" in message


@pytest.mark.parametrize("delay", [timedelta(seconds=5), "5 seconds", 5.0])
def test_non_integer_delay_on_an_integer_column(source: sb.PCollection, delay: Any) -> None:
    with pytest.raises(sb.PipelineError) as info:
        source | "wm" >> sb.WithWatermark("n", delay)
    message = str(info.value)
    assert "wm" in message
    assert "'n'" in message
    assert "integer" in message


def test_unknown_emit_mode(source: sb.PCollection) -> None:
    with pytest.raises(sb.PipelineError) as info:
        source | "wm" >> sb.WithWatermark("t", "1 minute", emit="sometimes")
    message = str(info.value)
    assert "wm" in message
    assert "sometimes" in message
    assert "periodic" in message
    assert "event" in message


def test_errors_are_raised_when_applied_not_when_run() -> None:
    p = sb.Pipeline()
    source = p | sb.Create([{"t": at(10, 0)}])
    with pytest.raises(sb.PipelineError):
        source.with_watermark("t", "-1 minute")
    assert p.run().collect(source) == [{"t": at(10, 0)}]


# --- a transform that needs a watermark names the one that dropped it ------------------

NEEDS_A_WATERMARK_ON_T = {
    "sort": lambda pc: pc.sort("t"),
    "tumble": lambda pc: pc.tumble("t", "1 minute"),
    "hop": lambda pc: pc.hop("t", "2 minutes", "1 minute"),
    "session": lambda pc: pc.session("t", "1 minute", keys="k"),
    "combine": lambda pc: pc.combine_per_key(["k", "t"], n=sb.Count()),
    "join": lambda pc: pc.join(pc, on=["k", "t"]),
}
"""Transforms that refuse unbounded input with no watermark on "t"."""

DROPPING_T = {
    "map": (lambda pc: pc | "Parse" >> sb.Map(lambda row: row), "keeps=['t']"),
    "flat_map": (lambda pc: pc | "Explode" >> sb.FlatMap(lambda row: [row]), "keeps=['t']"),
    "select": (
        lambda pc: pc | "Pick" >> sb.Select("k", t=sb.when(sb.col("k") == "a", sb.col("t"))),
        "an expression that keeps the order",
    ),
    "union": (
        lambda pc: pc | "Both" >> sb.Union(pc.pipeline | sb.TestStream(pc.schema)),
        ".with_watermark('t', delay=...) on each input",
    ),
}
"""Transforms that drop the watermark on "t", labelled, and the words of their fix."""

DROPPERS = {"map": "Parse", "flat_map": "Explode", "select": "Pick", "union": "Both"}


@pytest.mark.parametrize("needing", list(NEEDS_A_WATERMARK_ON_T))
@pytest.mark.parametrize("dropping", list(DROPPING_T))
def test_a_watermark_dropped_upstream_is_named_with_its_fix(needing: str, dropping: str) -> None:
    """`with_watermark(...)` -> `map(fn)` -> `sort("t")` said "apply .with_watermark(...)
    before the Sort", which the user had done: the message names the transform that dropped
    the watermark and how to keep it."""
    p = sb.Pipeline()
    stream = sb.TestStream(schema={"k": str, "t": datetime})
    watermarked = (p | stream).with_watermark("t", "1 minute")
    drop, fix = DROPPING_T[dropping]
    dropped = drop(watermarked)
    with pytest.raises(sb.PipelineError) as caught:
        NEEDS_A_WATERMARK_ON_T[needing](dropped)
    message = str(caught.value)
    assert f"{DROPPERS[dropping]} drops the watermark on 't'" in message, message
    assert fix in message, message
    assert "before the" not in message, message


def test_the_fix_a_dropped_watermark_names_keeps_it() -> None:
    p = sb.Pipeline()
    stream = sb.TestStream(schema={"k": str, "t": datetime})
    watermarked = (p | stream).with_watermark("t", "1 minute")
    assert "t" in watermarked.map(lambda row: row, keeps=["t"]).sort("t").watermarked_columns


def test_a_watermark_dropped_two_transforms_up_is_still_named() -> None:
    """A `Filter` after the `Map` passes what it has: the `Map` is still the one named."""
    p = sb.Pipeline()
    stream = sb.TestStream(schema={"k": str, "t": datetime})
    mapped = (p | stream).with_watermark("t", "1 minute") | "Parse" >> sb.Map(lambda row: row)
    with pytest.raises(sb.PipelineError, match=r"Parse drops the watermark on 't'.*keeps="):
        mapped.filter(sb.col("k") == "a").sort("t")


def test_an_aggregate_of_a_watermarked_column_names_the_combine() -> None:
    p = sb.Pipeline()
    stream = sb.TestStream(schema={"k": str, "t": datetime})
    windows = (p | stream).with_watermark("t", "1 minute").tumble("t", "1 minute")
    latest = windows | "Latest" >> sb.CombinePerKey(["k", "window_end"], t=sb.Max("t"))
    with pytest.raises(sb.PipelineError, match=r"Latest drops .*'t'.*keys only"):
        latest.sort("t")


def test_with_no_watermark_upstream_the_message_says_to_apply_one() -> None:
    p = sb.Pipeline()
    stream = p | sb.TestStream(schema={"k": str, "t": datetime})
    with pytest.raises(sb.PipelineError, match=r"apply .with_watermark\('t', delay=...\) before"):
        stream.map(lambda row: row).sort("t")


def test_an_interval_join_names_the_transform_that_dropped_a_time_watermark() -> None:
    p = sb.Pipeline()
    clicks = (p | sb.TestStream(schema={"u": str, "c": datetime})).with_watermark("c", 0)
    buys = (p | sb.TestStream(schema={"u": str, "b": datetime})).with_watermark("b", 0)
    parsed = buys | "Parse" >> sb.Map(lambda row: row)
    with pytest.raises(sb.PipelineError, match=r"on the right, Parse drops the watermark on 'b'"):
        clicks.join(parsed, on="u", times=("c", "b"), within=("0 minutes", "5 minutes"))
