"""The pipeline API: applying and labelling transforms, running, results, assertions (SPEC 4, 5)."""

from __future__ import annotations

import gc
import types
import weakref
from datetime import datetime, timedelta
from typing import Any

import pytest

import sparkbeam as sb


def at(hour: int, minute: int, second: int = 0) -> datetime:
    return datetime(2026, 4, 1, hour, minute, second)


ORDERS = [
    [
        {"order_id": "o1", "amount": 29.5, "event_time": at(10, 0, 5)},
        {"order_id": "o2", "amount": 10.0, "event_time": at(10, 0, 40)},
        {"order_id": "o3", "amount": 5.0, "event_time": at(10, 1, 30)},
    ],
    [
        {"order_id": "o4", "amount": 1.0, "event_time": at(10, 7, 0)},
        {"order_id": "o5", "amount": 2.0, "event_time": at(10, 1, 10)},  # on time: wm is 09:56:30
    ],
    [
        {"order_id": "o6", "amount": 4.0, "event_time": at(10, 1, 50)},  # late: wm is 10:02
        {"order_id": "o7", "amount": 8.0, "event_time": at(10, 2, 0)},  # equal to wm: kept
    ],
]


def orders_stream() -> sb.TestStream:
    stream = sb.TestStream()
    for rows in ORDERS:
        stream.add_epoch(rows)
    return stream


# --- the example of SPEC section 5 -----------------------------------------------------


def test_the_spec_example(runner: Any) -> None:
    with sb.Pipeline(runner=runner) as p:
        orders = p | sb.Create(
            [{"order_id": "o1", "amount": 29.99, "event_time": datetime(2026, 4, 1, 10, 0)}]
        )
        per_minute = (
            orders.with_watermark("event_time", delay=timedelta(minutes=5))
            .tumble("event_time", size="1 minute")
            .combine_per_key(
                ["window_start", "window_end"],
                order_count=sb.Count(),
                total_revenue=sb.Sum("amount"),
            )
        )
    result = p.result
    assert result is not None
    assert result.collect(per_minute) == [
        {
            "window_start": at(10, 0),
            "window_end": at(10, 1),
            "order_count": 1,
            "total_revenue": 29.99,
        }
    ]


def fluent(p: sb.Pipeline) -> tuple[sb.PCollection, sb.PCollection]:
    marked = (p | orders_stream()).with_watermark("event_time", delay="5 minutes")
    per_minute = marked.tumble("event_time", size="1 minute").combine_per_key(
        ["window_start", "window_end"], order_count=sb.Count(), total_revenue=sb.Sum("amount")
    )
    return marked, per_minute


def piped(p: sb.Pipeline) -> tuple[sb.PCollection, sb.PCollection]:
    marked = p | orders_stream() | sb.WithWatermark("event_time", "5 minutes")
    per_minute = (
        marked
        | sb.Tumble("event_time", "1 minute")
        | sb.CombinePerKey(
            ["window_start", "window_end"],
            order_count=sb.Count(),
            total_revenue=sb.Sum("amount"),
        )
    )
    return marked, per_minute


def test_orders_per_minute_over_epochs() -> None:
    # e0: wm := 10:01:30 - 5 min = 09:56:30: no window closes.
    # e1: o4, o5 kept; wm := 10:07 - 5 = 10:02: windows 10:00 and 10:01 (< 10:02) close.
    # e2: o6 (10:01:50 < 10:02) late; o7 kept; wm unchanged.
    # end: windows 10:02 and 10:07 flushed.
    p = sb.Pipeline()
    marked, per_minute = fluent(p)
    result = p.run()

    def row(minute: int, count: int, revenue: float) -> dict[str, Any]:
        return {
            "window_start": at(10, minute),
            "window_end": at(10, minute + 1),
            "order_count": count,
            "total_revenue": revenue,
        }

    e0, e1, e2, flush = result.collect_by_epoch(per_minute)
    assert e0 == []
    assert sorted(e1, key=lambda r: r["window_start"]) == [row(0, 2, 39.5), row(1, 2, 7.0)]
    assert e2 == []
    assert sorted(flush, key=lambda r: r["window_start"]) == [row(2, 1, 8.0), row(7, 1, 1.0)]
    assert result.late_count(marked) == 1
    assert result.watermarks(marked) == [
        sb.Watermark("event_time", at(9, 56, 30)),
        sb.Watermark("event_time", at(10, 2)),
    ]


def test_fluent_methods_build_the_same_pipeline_as_the_pipe_form() -> None:
    p1, p2 = sb.Pipeline(), sb.Pipeline()
    marked1, per_minute1 = fluent(p1)
    marked2, per_minute2 = piped(p2)
    result1, result2 = p1.run(), p2.run()
    assert result1.collect_by_epoch(per_minute1) == result2.collect_by_epoch(per_minute2)
    assert result1.watermarks(per_minute1) == result2.watermarks(per_minute2)
    assert result1.watermarks(marked1) == result2.watermarks(marked2)
    assert result1.late_count(marked1) == result2.late_count(marked2) == 1
    assert len(result1.collect(per_minute1)) == 4


# --- applying and labelling ------------------------------------------------------------


def test_a_label_names_the_transform_in_errors() -> None:
    p = sb.Pipeline()
    rows = p | "orders" >> sb.Create([{"t": at(10, 0)}])
    with pytest.raises(sb.PipelineError, match="per minute"):
        rows | "per minute" >> sb.Tumble("missing", "1 minute")


def test_labels_are_kept_and_made_unique() -> None:
    p = sb.Pipeline()
    rows = p | "orders" >> sb.Create([{"n": 1}])
    first = rows | "double" >> sb.Map(lambda r: {"n": r["n"] * 2})
    second = first | "double" >> sb.Map(lambda r: {"n": r["n"] * 2})
    plain1 = rows | sb.Filter(lambda r: True)
    plain2 = rows | sb.Filter(lambda r: True)
    labels = [pc.node.label for pc in (rows, first, second, plain1, plain2)]
    assert labels[:2] == ["orders", "double"]
    assert len(set(labels)) == 5
    result = p.run()
    assert result.collect(first) == [{"n": 2}]
    assert result.collect(second) == [{"n": 4}]
    assert result.collect(plain2) == [{"n": 1}]


def test_a_labelled_transform_applied_by_the_fluent_style() -> None:
    p = sb.Pipeline()
    out = (p | sb.Create([{"n": 1}])).map(lambda r: {"n": r["n"] + 1}) | "again" >> sb.Map(
        lambda r: {"n": r["n"] + 1}
    )
    assert p.run().collect(out) == [{"n": 3}]


def test_applying_something_that_is_not_a_transform() -> None:
    p = sb.Pipeline()
    rows = p | sb.Create([{"n": 1}])
    with pytest.raises(sb.PipelineError, match="not a transform"):
        rows | 42  # type: ignore[operator]
    with pytest.raises(sb.PipelineError, match="not a transform"):
        p | 42  # type: ignore[operator]


def test_applying_a_transform_to_something_that_is_not_a_pcollection() -> None:
    with pytest.raises(sb.PipelineError, match="PCollection"):
        [{"n": 1}] | sb.Filter(lambda r: True)  # type: ignore[operator]
    with pytest.raises(sb.PipelineError, match="PCollection"):
        [{"n": 1}] | "label" >> sb.Filter(lambda r: True)  # type: ignore[operator]


def test_an_input_from_another_pipeline_is_refused() -> None:
    p1, p2 = sb.Pipeline(), sb.Pipeline()
    a = p1 | sb.Create([{"n": 1}])
    b = p2 | sb.Create([{"n": 2}])
    with pytest.raises(sb.PipelineError, match="pipeline"):
        a | "both" >> sb.Union(b)


def test_an_input_that_is_not_a_pcollection_is_refused() -> None:
    p = sb.Pipeline()
    a = p | sb.Create([{"n": 1}])
    with pytest.raises(sb.PipelineError, match=r"Union: its inputs are PCollections; got the list"):
        a.union([a])  # type: ignore[arg-type]
    with pytest.raises(sb.PipelineError, match="Join: its inputs are PCollections; got 1"):
        a.join(1, on="n")  # type: ignore[arg-type]


def union_join_late_rows(p: sb.Pipeline) -> dict[str, sb.PCollection]:
    """`a.union(b)`, joined with `b`, watermarked on each row: every handle, by name."""
    a = p | "a" >> sb.Create([{"k": 1, "t": 5}, {"k": 2, "t": 9}])
    b = p | "b" >> sb.Create([{"k": 1, "t": 2}])
    union = a.union(b)
    joined = union.join(b, on="k")
    watermarked = joined.with_watermark("t", 0, emit="event")
    late = watermarked.late_rows()
    return {"a": a, "b": b, "union": union, "joined": joined, "w": watermarked, "late": late}


def reachable(root: object) -> list[object]:
    """Every object `root` refers to, directly or not (not through classes or modules)."""
    seen: dict[int, object] = {}
    stack = [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, type | types.ModuleType):
            continue
        seen[id(obj)] = obj
        stack.extend(gc.get_referents(obj))
    return list(seen.values())


def test_the_graph_keeps_no_pcollection_the_user_dropped() -> None:
    # Only held PCollections are recorded (docs/decisions.md): the nodes refer to their
    # inputs by node.
    held = sb.Pipeline()
    handles = union_join_late_rows(held)
    expected = held.run().collect(handles["late"])
    p = sb.Pipeline()
    built = union_join_late_rows(p)
    dropped = [weakref.ref(pcoll) for name, pcoll in built.items() if name != "late"]
    late = built.pop("late")
    del built
    gc.collect()
    assert [ref() for ref in dropped] == [None] * len(dropped)
    assert not [obj for obj in reachable(p.nodes) if isinstance(obj, sb.PCollection)]
    assert p.live_node_ids() == {late.node.id}
    assert p.run().collect(late) == expected
    assert expected == [{"k": 1, "t": 2, "t_right": 2, "late_watermark": 5}]


# --- running and results ---------------------------------------------------------------


def test_context_manager_runs_on_exit_and_keeps_the_result(runner: Any) -> None:
    with sb.Pipeline(runner=runner) as p:
        rows = p | sb.Create([{"n": 1}, {"n": 2}])
        assert p.result is None  # not run yet
    assert p.result is not None
    assert p.result.collect(rows) == [{"n": 1}, {"n": 2}]


def test_context_manager_does_not_run_when_the_block_raises() -> None:
    calls: list[dict[str, Any]] = []
    with pytest.raises(RuntimeError, match="stop"), sb.Pipeline() as p:
        _ = p | sb.Create([{"n": 1}]) | sb.Map(lambda r: calls.append(r) or r)
        raise RuntimeError("stop")
    assert p.result is None
    assert calls == []


def test_run_returns_the_result(runner: Any) -> None:
    p = sb.Pipeline(runner=runner)
    rows = p | sb.Create([{"n": 1}])
    result = p.run()
    assert p.result is result
    assert result.collect(rows) == [{"n": 1}]


def test_collect_of_a_pcollection_of_another_pipeline() -> None:
    p1, p2 = sb.Pipeline(), sb.Pipeline()
    _ = p1 | sb.Create([{"n": 1}])
    other = p2 | sb.Create([{"n": 2}])
    result = p1.run()
    with pytest.raises(ValueError, match="another pipeline"):
        result.collect(other)
    with pytest.raises(ValueError, match="another pipeline"):
        result.watermarks(other)


def test_unknown_runner() -> None:
    with pytest.raises(sb.PipelineError) as info:
        sb.Pipeline(runner="unknown")
    message = str(info.value)
    assert "'unknown'" in message
    assert "direct" in message


def test_runner_objects() -> None:
    for runner in (sb.DirectRunner(), sb.DirectRunner(check_invariants=False)):
        p = sb.Pipeline(runner=runner)
        marked = p | orders_stream() | sb.WithWatermark("event_time", "5 minutes")
        result = p.run()
        assert [r["order_id"] for r in result.collect(marked)] == [
            "o1",
            "o2",
            "o3",
            "o4",
            "o5",
            "o7",
        ]
        assert result.late_count(marked) == 1


def test_default_runner_is_direct() -> None:
    assert isinstance(sb.Pipeline().runner, sb.DirectRunner)
    assert isinstance(sb.Pipeline(runner="direct").runner, sb.DirectRunner)


# --- assert_that -----------------------------------------------------------------------


def test_assert_that_passes(runner: Any) -> None:
    with sb.Pipeline(runner=runner) as p:
        rows = p | sb.Create([{"n": 1}, {"n": 2}, {"n": 2}])
        sb.assert_that(rows, sb.equal_to([{"n": 2}, {"n": 1}, {"n": 2}]))
    assert p.result is not None


def test_assert_that_fails_on_a_wrong_row(runner: Any) -> None:
    with pytest.raises(AssertionError) as info, sb.Pipeline(runner=runner) as p:
        rows = p | sb.Create([{"n": 1}, {"n": 2}])
        sb.assert_that(rows, sb.equal_to([{"n": 1}, {"n": 3}]))
    assert "3" in str(info.value)


def test_assert_that_counts_duplicates(runner: Any) -> None:
    p = sb.Pipeline(runner=runner)
    rows = p | sb.Create([{"n": 1}, {"n": 1}])
    sb.assert_that(rows, sb.equal_to([{"n": 1}]))
    with pytest.raises(AssertionError):
        p.run()


def test_assert_that_fails_on_a_missing_row(runner: Any) -> None:
    p = sb.Pipeline(runner=runner)
    rows = p | sb.Create([{"n": 1}])
    sb.assert_that(rows, sb.equal_to([{"n": 1}, {"n": 1}]))
    with pytest.raises(AssertionError):
        p.run()


def test_assert_that_on_datetimes_and_a_custom_matcher(runner: Any) -> None:
    seen: list[list[dict[str, Any]]] = []
    with sb.Pipeline(runner=runner) as p:
        rows = p | sb.Create([{"t": at(10, 0)}])
        windowed = rows.tumble("t", "1 hour")
        sb.assert_that(
            windowed,
            sb.equal_to([{"t": at(10, 0), "window_start": at(10, 0), "window_end": at(11, 0)}]),
        )
        sb.assert_that(rows, seen.append, label="record")
    assert seen == [[{"t": at(10, 0)}]]


def test_failing_custom_matcher_names_its_label(runner: Any) -> None:
    def never(rows: list[dict[str, Any]]) -> None:
        raise AssertionError("no")

    p = sb.Pipeline(runner=runner)
    rows = p | sb.Create([{"n": 1}])
    sb.assert_that(rows, never, label="my check")
    with pytest.raises(AssertionError, match="my check"):
        p.run()


def test_error_classes() -> None:
    assert issubclass(sb.PipelineError, ValueError)
    assert issubclass(sb.DataError, ValueError)
    assert issubclass(sb.InvariantViolation, AssertionError)
    assert not issubclass(sb.InvariantViolation, ValueError)
