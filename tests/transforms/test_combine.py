"""CombinePerKey: aggregates, emission and watermark derivation (SPEC sections 4 and 6).

A group is emitted once, when the watermark of a key column passes it (group value
`< wm`) or at end of input; key-column watermarks pass through after the groups
they release; other watermarks are dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
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


def stream_of(*epochs: list[dict[str, Any]], schema: Any = None) -> sb.TestStream:
    stream = sb.TestStream(schema)
    for rows in epochs:
        stream.add_epoch(rows)
    return stream


def keyed(rows: list[dict[str, Any]], key: str = "k") -> dict[Any, dict[str, Any]]:
    """Rows by their key value, checking each key appears once (each group emitted once)."""
    out = {row[key]: row for row in rows}
    assert len(out) == len(rows), f"a group was emitted more than once: {rows}"
    return out


ROWS = [
    {"k": "a", "n": 1, "x": 1.5, "t": at(10, 0), "s": "pear"},
    {"k": "a", "n": 2, "x": None, "t": at(10, 5), "s": "apple"},
    {"k": "b", "n": 10, "x": 2.0, "t": at(9, 0), "s": "fig"},
    {"k": "c", "n": None, "x": None, "t": None, "s": None},
]


def combine(
    rows: list[dict[str, Any]], keys: Any = "k", runner: Any = None, **aggregates: Any
) -> list[dict[str, Any]]:
    p = sb.Pipeline(runner=runner)
    out = p | sb.Create(rows) | sb.CombinePerKey(keys, **aggregates)
    return p.run().collect(out)


# --- the built-in aggregates -----------------------------------------------------------


def test_count_rows_and_count_non_none_values(runner: Any) -> None:
    out = keyed(combine(ROWS, runner=runner, count=sb.Count(), xs=sb.Count("x"), ts=sb.Count("t")))
    assert out == {
        "a": {"k": "a", "count": 2, "xs": 1, "ts": 2},
        "b": {"k": "b", "count": 1, "xs": 1, "ts": 1},
        "c": {"k": "c", "count": 1, "xs": 0, "ts": 0},
    }


def test_sum_of_integers_is_an_integer(runner: Any) -> None:
    out = keyed(combine(ROWS, runner=runner, total=sb.Sum("n")))
    assert out == {
        "a": {"k": "a", "total": 3},
        "b": {"k": "b", "total": 10},
        "c": {"k": "c", "total": None},
    }
    assert type(out["a"]["total"]) is int


def test_sum_of_floats_is_a_float(runner: Any) -> None:
    out = keyed(combine(ROWS, runner=runner, total=sb.Sum("x")))
    assert out == {
        "a": {"k": "a", "total": 1.5},
        "b": {"k": "b", "total": 2.0},
        "c": {"k": "c", "total": None},
    }
    assert type(out["b"]["total"]) is float


def test_sum_of_a_column_mixing_ints_and_floats_is_a_float(runner: Any) -> None:
    rows = [{"k": "a", "v": 1}, {"k": "a", "v": 2}, {"k": "b", "v": 0.5}]
    out = keyed(combine(rows, runner=runner, total=sb.Sum("v")))
    assert out == {"a": {"k": "a", "total": 3.0}, "b": {"k": "b", "total": 0.5}}
    assert type(out["a"]["total"]) is float


def test_mean_is_a_float_and_none_without_values(runner: Any) -> None:
    rows = [*ROWS, {"k": "b", "n": 20, "x": 4.0, "t": at(9, 1), "s": "kiwi"}]
    out = keyed(combine(rows, runner=runner, mean_n=sb.Mean("n"), mean_x=sb.Mean("x")))
    assert out == {
        "a": {"k": "a", "mean_n": 1.5, "mean_x": 1.5},
        "b": {"k": "b", "mean_n": 15.0, "mean_x": 3.0},
        "c": {"k": "c", "mean_n": None, "mean_x": None},
    }
    assert type(out["b"]["mean_n"]) is float  # the mean of 10 and 20, an integer column


def test_min_and_max_of_datetimes_are_datetimes(runner: Any) -> None:
    out = keyed(combine(ROWS, runner=runner, first=sb.Min("t"), last=sb.Max("t")))
    assert out == {
        "a": {"k": "a", "first": at(10, 0), "last": at(10, 5)},
        "b": {"k": "b", "first": at(9, 0), "last": at(9, 0)},
        "c": {"k": "c", "first": None, "last": None},
    }
    assert type(out["a"]["first"]) is datetime
    assert type(out["a"]["last"]) is datetime


def test_min_and_max_of_numbers_and_strings(runner: Any) -> None:
    out = keyed(
        combine(
            ROWS, runner=runner, lo=sb.Min("n"), hi=sb.Max("n"), first=sb.Min("s"), last=sb.Max("s")
        )
    )
    assert out["a"] == {"k": "a", "lo": 1, "hi": 2, "first": "apple", "last": "pear"}
    assert out["b"] == {"k": "b", "lo": 10, "hi": 10, "first": "fig", "last": "fig"}
    assert out["c"] == {"k": "c", "lo": None, "hi": None, "first": None, "last": None}


def test_several_keys(runner: Any) -> None:
    rows = [
        {"k": "a", "j": 1, "n": 1},
        {"k": "a", "j": 1, "n": 2},
        {"k": "a", "j": 2, "n": 4},
        {"k": "b", "j": 1, "n": 8},
    ]
    out = combine(rows, ["k", "j"], runner=runner, total=sb.Sum("n"))
    assert sorted((r["k"], r["j"], r["total"]) for r in out) == [
        ("a", 1, 3),
        ("a", 2, 4),
        ("b", 1, 8),
    ]
    assert all(set(r) == {"k", "j", "total"} for r in out)


def test_none_is_a_group_of_its_own(runner: Any) -> None:
    rows = [{"k": None, "n": 1}, {"k": None, "n": 2}, {"k": "a", "n": 4}]
    out = combine(rows, runner=runner, total=sb.Sum("n"))
    assert sorted(out, key=lambda r: str(r["k"])) == [
        {"k": None, "total": 3},
        {"k": "a", "total": 4},
    ]


# --- user CombineFns -------------------------------------------------------------------


class DistinctNames(sb.CombineFn):
    """The sorted distinct values of `s`, comma-joined; records what it was given."""

    output_type = str

    def __init__(self) -> None:
        self.elements: list[dict[str, Any]] = []
        self.merges = 0

    def create_accumulator(self) -> frozenset[str]:
        return frozenset()

    def add_input(self, accumulator: frozenset[str], element: dict[str, Any]) -> frozenset[str]:
        self.elements.append(dict(element))
        return accumulator | {element["s"]}

    def merge_accumulators(self, accumulators: Sequence[frozenset[str]]) -> frozenset[str]:
        self.merges += 1
        return frozenset().union(*accumulators)

    def extract_output(self, accumulator: frozenset[str]) -> str:
        return ",".join(sorted(accumulator))


def test_user_combine_fn_gets_the_row_dict() -> None:
    fn = DistinctNames()
    rows = [
        {"k": "a", "s": "x", "t": at(10, 0)},
        {"k": "a", "s": "y", "t": at(10, 1)},
        {"k": "a", "s": "x", "t": at(10, 2)},
        {"k": "b", "s": "z", "t": at(10, 3)},
    ]
    out = keyed(combine(rows, names=fn, n=sb.Count()))
    assert out == {"a": {"k": "a", "names": "x,y", "n": 3}, "b": {"k": "b", "names": "z", "n": 1}}
    assert sorted(fn.elements, key=lambda e: e["t"]) == rows
    assert all(type(e["t"]) is datetime and e["t"].tzinfo is None for e in fn.elements)


def test_user_combine_fn_accumulators_are_merged_across_epochs() -> None:
    # Window [10:00, 11:00) gets rows in epochs 0 and 1; the watermark (10:00 after
    # epoch 0, 11:05 after epoch 1) releases it after epoch 1 with both epochs' names.
    fn = DistinctNames()
    p = sb.Pipeline()
    out = (
        p
        | stream_of(
            [{"s": "x", "t": at(10, 0)}],
            [{"s": "y", "t": at(10, 30)}, {"s": "z", "t": at(11, 5)}],
        )
        | sb.WithWatermark("t", 0)
        | sb.Tumble("t", "1 hour")
        | sb.CombinePerKey(["window_start"], names=fn)
    )
    result = p.run()
    assert result.collect_by_epoch(out) == [
        [],
        [{"window_start": at(10, 0), "names": "x,y"}],
        [{"window_start": at(11, 0), "names": "z"}],
    ]
    assert fn.merges >= 1
    assert {e["s"] for e in fn.elements} == {"x", "y", "z"}
    assert set(fn.elements[0]) == {"s", "t", "window_start", "window_end"}


class LatestTime(sb.CombineFn):
    """The latest `t` of the group, as a datetime."""

    output_type = datetime

    def create_accumulator(self) -> datetime | None:
        return None

    def add_input(self, accumulator: datetime | None, element: dict[str, Any]) -> datetime:
        t = element["t"]
        return t if accumulator is None else max(accumulator, t)

    def merge_accumulators(self, accumulators: Sequence[datetime | None]) -> datetime | None:
        present = [a for a in accumulators if a is not None]
        return max(present) if present else None

    def extract_output(self, accumulator: datetime | None) -> datetime | None:
        return accumulator


def test_user_combine_fn_with_a_datetime_output() -> None:
    rows = [{"k": "a", "t": at(10, 0)}, {"k": "a", "t": at(10, 7)}, {"k": "b", "t": at(9, 0)}]
    out = keyed(combine(rows, latest=LatestTime()))
    assert out == {"a": {"k": "a", "latest": at(10, 7)}, "b": {"k": "b", "latest": at(9, 0)}}


class BeamStyleSum:
    """A duck-typed CombineFn (not a subclass), as Beam users write them."""

    def create_accumulator(self) -> int:
        return 0

    def add_input(self, accumulator: int, element: dict[str, Any]) -> int:
        return accumulator + element["n"]

    def merge_accumulators(self, accumulators: Sequence[int]) -> int:
        return sum(accumulators)

    def extract_output(self, accumulator: int) -> int:
        return accumulator * 100


def test_duck_typed_combine_fn() -> None:
    rows = [{"k": "a", "n": 1}, {"k": "a", "n": 2}, {"k": "b", "n": 5}]
    out = keyed(combine(rows, total=BeamStyleSum()))
    assert out == {"a": {"k": "a", "total": 300}, "b": {"k": "b", "total": 500}}


# --- emission --------------------------------------------------------------------------


def test_bounded_input_without_watermark_is_emitted_at_end_of_input() -> None:
    p = sb.Pipeline()
    out = p | sb.Create(ROWS[:3]) | sb.CombinePerKey("k", n=sb.Count())
    result = p.run()
    first, flush = result.collect_by_epoch(out)
    assert first == []
    assert keyed(flush) == {"a": {"k": "a", "n": 2}, "b": {"k": "b", "n": 1}}
    assert result.watermarks(out) == []


def test_empty_input_gives_no_rows(runner: Any) -> None:
    p = sb.Pipeline(runner=runner)
    out = p | sb.Create([], schema={"k": str, "n": int}) | sb.CombinePerKey("k", n=sb.Count())
    result = p.run()
    assert result.collect(out) == []


def test_empty_unbounded_input_gives_no_rows_and_no_watermarks() -> None:
    p = sb.Pipeline()
    out = (
        p
        | stream_of([], [], schema={"t": datetime, "v": int})
        | sb.WithWatermark("t", "1 minute")
        | sb.Tumble("t", "5 minutes")
        | sb.CombinePerKey(["window_start", "window_end"], total=sb.Sum("v"))
    )
    result = p.run()
    assert result.collect_by_epoch(out) == [[], [], []]
    assert result.watermarks(out) == []


def test_group_is_emitted_once_its_window_passes_the_watermark() -> None:
    # e0: 10:01, 10:02, 10:07; wm 10:07 -> W(window_start, 10:05), W(window_end, 10:10):
    #     [10:00, 10:05) is released (10:00 < 10:05); [10:05, 10:10) is not (10:05 !< 10:05).
    # e1: 10:08, 10:12; wm 10:12 -> W(window_start, 10:10): [10:05, 10:10) released.
    # end: [10:10, 10:15) flushed.
    p = sb.Pipeline()
    out = (
        p
        | stream_of(
            [{"t": at(10, 1), "v": 1}, {"t": at(10, 2), "v": 2}, {"t": at(10, 7), "v": 4}],
            [{"t": at(10, 8), "v": 8}, {"t": at(10, 12), "v": 16}],
        )
        | sb.WithWatermark("t", 0)
        | sb.Tumble("t", "5 minutes")
        | sb.CombinePerKey(["window_start", "window_end"], n=sb.Count(), total=sb.Sum("v"))
    )
    result = p.run()
    assert result.collect_by_epoch(out) == [
        [{"window_start": at(10, 0), "window_end": at(10, 5), "n": 2, "total": 3}],
        [{"window_start": at(10, 5), "window_end": at(10, 10), "n": 2, "total": 12}],
        [{"window_start": at(10, 10), "window_end": at(10, 15), "n": 1, "total": 16}],
    ]
    # Key-column watermarks pass through (after the groups they release: the direct
    # runner's invariant check would fail otherwise); W(t) is dropped.
    assert by_column(result.watermarks(out)) == {
        "window_start": [at(10, 5), at(10, 10)],
        "window_end": [at(10, 10), at(10, 15)],
    }


def test_groups_opened_after_others_were_emitted_start_from_nothing() -> None:
    # The direct runner reuses an emitted group's slot for a new group: every aggregate of
    # the new group must start empty (a Sum or Min of only None stays None, a Count at 0).
    p = sb.Pipeline()
    epochs = [
        [{"k": k, "t": t, "v": v} for k, v in (("a", 5), ("b", None), ("c", 1.5))]
        for t in range(0, 40, 10)
    ]
    out = (
        p
        | stream_of(*epochs, schema={"k": str, "t": int, "v": float})
        | sb.WithWatermark("t", 0)
        | sb.CombinePerKey(
            ["k", "t"],
            n=sb.Count(),
            values=sb.Count("v"),
            total=sb.Sum("v"),
            mean=sb.Mean("v"),
            low=sb.Min("v"),
            high=sb.Max("v"),
        )
    )
    rows = p.run().collect(out)
    assert len(rows) == 12
    for row in rows:
        v = {"a": 5.0, "b": None, "c": 1.5}[row["k"]]
        assert row == {
            "k": row["k"],
            "t": row["t"],
            "n": 1,
            "values": 0 if v is None else 1,
            "total": v,
            "mean": v,
            "low": v,
            "high": v,
        }


def test_group_on_a_watermarked_column_itself() -> None:
    # Key t (integers, delay 0): wm 2 releases group 1; wm 3 releases group 2; end: 3.
    p = sb.Pipeline()
    out = (
        p
        | stream_of([{"t": 1}, {"t": 1}, {"t": 2}], [{"t": 3}])
        | sb.WithWatermark("t", 0)
        | sb.CombinePerKey("t", n=sb.Count())
    )
    result = p.run()
    assert result.collect_by_epoch(out) == [
        [{"t": 1, "n": 2}],
        [{"t": 2, "n": 1}],
        [{"t": 3, "n": 1}],
    ]
    assert result.watermarks(out) == [sb.Watermark("t", 2), sb.Watermark("t", 3)]


def test_only_the_watermarked_key_releases_groups() -> None:
    # Keys (k, window_start): groups of both k are released by W(window_start) alone.
    p = sb.Pipeline()
    out = (
        p
        | stream_of(
            [{"k": "a", "t": 10}, {"k": "b", "t": 12}, {"k": "a", "t": 25}],
            [{"k": "b", "t": 41}],
        )
        | sb.WithWatermark("t", 0)
        | sb.Tumble("t", 10)
        | sb.CombinePerKey(["k", "window_start"], n=sb.Count())
    )
    result = p.run()
    e0, e1, flush = result.collect_by_epoch(out)
    # wm 25 -> W(window_start, 20): window 10 (keys a and b) is released.
    assert sorted((r["k"], r["window_start"], r["n"]) for r in e0) == [("a", 10, 1), ("b", 10, 1)]
    # wm 41 -> W(window_start, 40): window 20 released.
    assert e1 == [{"k": "a", "window_start": 20, "n": 1}]
    assert flush == [{"k": "b", "window_start": 40, "n": 1}]
    assert by_column(result.watermarks(out)) == {"window_start": [20, 40]}


def test_an_aggregate_named_like_a_watermarked_column_has_no_watermark() -> None:
    # Output column t is Max(t), not a key: W(t) must be dropped.
    p = sb.Pipeline()
    out = (
        p
        | stream_of([{"t": 3}, {"t": 14}], [{"t": 25}])
        | sb.WithWatermark("t", 0)
        | sb.Tumble("t", 10)
        | sb.CombinePerKey("window_start", t=sb.Max("t"))
    )
    result = p.run()
    assert result.collect_by_epoch(out) == [
        [{"window_start": 0, "t": 3}],
        [{"window_start": 10, "t": 14}],
        [{"window_start": 20, "t": 25}],
    ]
    assert by_column(result.watermarks(out)) == {"window_start": [10, 20]}


def test_bounded_input_with_a_watermark_releases_groups_before_the_end() -> None:
    # One epoch (10:00, 10:20, 11:10), wm 11:10 after it: W(window_start, 11:00)
    # releases [10:00, 11:00) in epoch 0; [11:00, 12:00) is flushed at the end.
    p = sb.Pipeline()
    out = (
        p
        | sb.Create([{"t": at(10, 0)}, {"t": at(10, 20)}, {"t": at(11, 10)}])
        | sb.WithWatermark("t", 0)
        | sb.Tumble("t", "1 hour")
        | sb.CombinePerKey("window_start", n=sb.Count())
    )
    assert p.run().collect_by_epoch(out) == [
        [{"window_start": at(10, 0), "n": 2}],
        [{"window_start": at(11, 0), "n": 1}],
    ]


def test_fluent_combine_per_key_matches_the_transform(runner: Any) -> None:
    p = sb.Pipeline(runner=runner)
    source = p | sb.Create(ROWS)
    piped = source | sb.CombinePerKey(["k"], n=sb.Count(), total=sb.Sum("n"))
    fluent = source.combine_per_key(["k"], n=sb.Count(), total=sb.Sum("n"))
    result = p.run()
    assert keyed(result.collect(piped)) == keyed(result.collect(fluent))
    assert keyed(result.collect(fluent))["a"] == {"k": "a", "n": 2, "total": 3}


# --- errors ----------------------------------------------------------------------------


@pytest.fixture
def bounded() -> sb.PCollection:
    return sb.Pipeline() | sb.Create(ROWS)


def test_unbounded_input_without_a_watermarked_key_is_refused() -> None:
    p = sb.Pipeline()
    stream = p | sb.TestStream().add_epoch([{"k": "a", "t": at(10, 0)}])
    for source in (stream, stream.with_watermark("t", "1 minute")):
        with pytest.raises(sb.PipelineError) as info:
            source | "per key" >> sb.CombinePerKey("k", n=sb.Count())
        message = str(info.value)
        assert "per key" in message
        assert "'k'" in message
        assert "watermark" in message
        assert "with_watermark" in message or "window_start" in message


def test_aggregate_named_like_a_key(bounded: sb.PCollection) -> None:
    with pytest.raises(sb.PipelineError) as info:
        bounded | "per key" >> sb.CombinePerKey("k", k=sb.Count())
    message = str(info.value)
    assert "per key" in message
    assert "'k'" in message


@pytest.mark.parametrize("aggregate", [sb.Sum("s"), sb.Mean("s")])
def test_numeric_aggregate_over_a_string_column(bounded: sb.PCollection, aggregate: Any) -> None:
    with pytest.raises(sb.PipelineError) as info:
        bounded | "per key" >> sb.CombinePerKey("k", total=aggregate)
    message = str(info.value)
    assert "per key" in message
    assert type(aggregate).__name__ in message
    assert "'s'" in message
    assert "str" in message
    assert "numeric" in message


@pytest.mark.parametrize(
    "keys, aggregate",
    [("missing", sb.Count()), ("k", sb.Sum("missing")), ("k", sb.Count("missing"))],
)
def test_unknown_column(bounded: sb.PCollection, keys: str, aggregate: Any) -> None:
    with pytest.raises(sb.PipelineError) as info:
        bounded | "per key" >> sb.CombinePerKey(keys, total=aggregate)
    message = str(info.value)
    assert "per key" in message
    assert "'missing'" in message
    assert "'k'" in message  # the columns there are


def test_not_an_aggregate(bounded: sb.PCollection) -> None:
    with pytest.raises(sb.PipelineError) as info:
        bounded | "per key" >> sb.CombinePerKey("k", total=42)
    message = str(info.value)
    assert "per key" in message
    assert "total" in message
    assert "CombineFn" in message


def test_no_aggregate() -> None:
    with pytest.raises(sb.PipelineError, match="aggregate"):
        sb.CombinePerKey("k")


def eowc_stream() -> sb.TestStream:
    """RisingWave's EOWC case: 1-hour windows, a 5-minute delay."""
    day = datetime(2026, 4, 1)

    def at(hour: int, minute: int) -> dict[str, Any]:
        return {"t": day.replace(hour=hour, minute=minute), "v": 1}

    return (
        sb.TestStream()
        .add_epoch([at(16, 10), at(16, 40), at(16, 58)])
        .add_epoch([at(17, 30), at(18, 1)])
        .add_epoch([at(18, 10)])
    )


def test_hourly_window_is_emitted_at_the_end_of_the_epoch_whose_watermark_passes_it() -> None:
    """The 16:00 window comes out after the epoch bringing 18:01 (wm 17:56, so
    window_start's watermark 17:00), the 17:00 window after 18:10 (wm 18:05)."""
    with sb.Pipeline() as p:
        hourly = (
            (p | eowc_stream())
            .with_watermark("t", "5 minutes")
            .tumble("t", "1 hour")
            .combine_per_key(["window_start"], n=sb.Count())
        )
    day = datetime(2026, 4, 1)
    assert p.result.collect_by_epoch(hourly) == [
        [],
        [{"window_start": day.replace(hour=16), "n": 3}],
        [{"window_start": day.replace(hour=17), "n": 1}],
        [{"window_start": day.replace(hour=18), "n": 2}],
    ]
