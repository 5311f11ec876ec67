"""`Union(*others)` / `a.union(b, ...)`: RisingWave's watermark merger.

Rule under test (SPEC section 4): all rows of all inputs pass at once (same
schema required); per column watermarked in every input, the output watermark
is the minimum of the inputs' latest watermarks, emitted once every input has
given one; other watermarks are dropped.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import sparkbeam as sb

SCHEMA = {"src": int, "id": int, "t": int}


def stream(
    *epochs: Sequence[dict[str, Any]], schema: dict[str, type] | None = None
) -> sb.TestStream:
    ts = sb.TestStream(schema)
    for rows in epochs:
        ts.add_epoch(rows)
    return ts


def marks(result: Any, pcoll: sb.PCollection, column: str = "t") -> list[Any]:
    return [w.value for w in result.watermarks(pcoll) if w.column == column]


def test_rows_of_every_input_pass_at_once() -> None:
    with sb.Pipeline() as p:
        a = p | "a" >> stream([{"t": 1}], [{"t": 2}])
        b = p | "b" >> stream([], [{"t": 10}], [{"t": 11}])
        c = p | "c" >> sb.Create([{"t": 100}])
        merged = a.union(b, c)
    by_epoch = p.result.collect_by_epoch(merged)
    assert [sorted(r["t"] for r in rows) for rows in by_epoch] == [[1, 100], [2, 10], [11], []]
    assert not merged.bounded
    assert merged.watermarked_columns == frozenset()


def test_transform_and_fluent_forms_agree(runner: Any) -> None:
    with sb.Pipeline(runner=runner) as p:
        a = p | "a" >> sb.Create([{"t": 1}, {"t": 2}])
        b = p | "b" >> sb.Create([{"t": 2}])
        c = p | "c" >> sb.Create([{"t": 3}])
        applied = a | "merge" >> sb.Union(b, c)
        fluent = a.union(b, c)
    result = p.result
    assert Counter(r["t"] for r in result.collect(applied)) == Counter([1, 2, 2, 3])
    assert Counter(r["t"] for r in result.collect(fluent)) == Counter([1, 2, 2, 3])
    assert applied.bounded


def test_watermark_is_the_minimum_once_every_input_has_one() -> None:
    # The values are chosen so that the result does not depend on which
    # input's watermark reaches the Union first within an epoch.
    with sb.Pipeline() as p:
        fast = (p | "fast" >> stream([{"t": 10}], [{"t": 20}], [{"t": 30}])).with_watermark("t", 0)
        slow = (p | "slow" >> stream([], [{"t": 5}], [{"t": 18}], [{"t": 40}])).with_watermark(
            "t", 0
        )
        merged = fast.union(slow)
    result = p.result
    assert marks(result, fast) == [10, 20, 30]
    assert marks(result, slow) == [5, 18, 40]
    # Epoch 0: only fast has a watermark, so none goes out. Then min(20, 5),
    # min(30, 18), min(30, 40).
    assert marks(result, merged) == [5, 18, 30]
    # Rows below the other input's watermark are fine: the output promise is the minimum.
    assert sorted(r["t"] for r in result.collect(merged)) == [5, 10, 18, 20, 30, 40]


def test_no_watermark_while_one_input_has_none() -> None:
    with sb.Pipeline() as p:
        a = (p | "a" >> stream([{"t": 10}], [{"t": 20}])).with_watermark("t", 0)
        idle = (p | "idle" >> stream([], [], schema={"t": int})).with_watermark("t", 0)
        merged = a.union(idle)
    result = p.result
    assert merged.watermarked_columns == frozenset({"t"})
    assert marks(result, a) == [10, 20]
    assert marks(result, merged) == []
    assert sorted(r["t"] for r in result.collect(merged)) == [10, 20]


def test_a_column_keeps_its_watermark_only_if_every_input_has_one() -> None:
    schema = {"t": int, "u": int}
    with sb.Pipeline() as p:
        a = (
            (p | "a" >> stream([{"t": 1, "u": 1}], [{"t": 9, "u": 9}]))
            .with_watermark("t", 0)
            .with_watermark("u", 0)
        )
        b = (p | "b" >> stream([{"t": 2, "u": 2}], schema=schema)).with_watermark("t", 0)
        merged = a.union(b)
    result = p.result
    assert merged.watermarked_columns == frozenset({"t"})
    assert {w.column for w in result.watermarks(a)} == {"t", "u"}
    assert {w.column for w in result.watermarks(merged)} == {"t"}
    assert marks(result, merged) == [1, 2]


def test_window_columns_are_merged_too() -> None:
    with sb.Pipeline() as p:
        a = (p | "a" >> stream([{"t": 12}], [{"t": 35}])).with_watermark("t", 0).tumble("t", 10)
        b = (p | "b" >> stream([{"t": 3}], [{"t": 11}])).with_watermark("t", 0).tumble("t", 10)
        merged = a.union(b)
    result = p.result
    assert marks(result, merged, "t") == [3, 11]
    assert marks(result, merged, "window_start") == [0, 10]
    assert marks(result, merged, "window_end") == [10, 20]


def test_schema_mismatch_names_both_schemas() -> None:
    p = sb.Pipeline()
    a = p | "a" >> sb.Create([{"t": 1, "v": 1.5}])
    b = p | "b" >> sb.Create([{"t": 1, "v": "x"}])
    with pytest.raises(sb.PipelineError) as info:
        a | "merge orders" >> sb.Union(b)
    message = str(info.value)
    assert "merge orders" in message
    assert "t: int, v: str" in message
    assert "t: int, v: float" in message
    assert "Select" in message


def test_schema_mismatch_in_column_order_or_names() -> None:
    p = sb.Pipeline()
    a = p | "a" >> sb.Create([{"t": 1, "v": 1}])
    swapped = p | "swapped" >> sb.Create([{"v": 1, "t": 1}])
    renamed = p | "renamed" >> sb.Create([{"t": 1, "w": 1}])
    with pytest.raises(sb.PipelineError, match="input 2 has columns"):
        a.union(swapped)
    with pytest.raises(sb.PipelineError, match=r"input 3 has columns \(t: int, w: int\)"):
        a.union(a, renamed)


def test_union_needs_another_input() -> None:
    p = sb.Pipeline()
    a = p | sb.Create([{"t": 1}])
    with pytest.raises(sb.PipelineError, match="at least one other"):
        a.union()


# Property: with 2-4 TestStream inputs, random delays and epoch splits, Union
# passes every row, never breaks invariant W, and emits the minimum.


@st.composite
def union_inputs(draw: st.DrawFn) -> tuple[list[list[list[int]]], list[int]]:
    count = draw(st.integers(2, 4))
    inputs = [
        draw(st.lists(st.lists(st.integers(0, 50), max_size=4), min_size=0, max_size=5))
        for _ in range(count)
    ]
    delays = [draw(st.integers(0, 10)) for _ in range(count)]
    return inputs, delays


def periodic_marks(epochs: list[list[int]], delay: int, total: int) -> list[int | None]:
    """The watermark of `WithWatermark(delay)` after each of `total` pipeline epochs."""
    out: list[int | None] = []
    top: int | None = None
    for index in range(total):
        for t in epochs[index] if index < len(epochs) else []:
            top = t if top is None else max(top, t)
        out.append(None if top is None else top - delay)
    return out


@given(union_inputs())
def test_union_emits_the_minimum_and_keeps_invariant_w(
    case: tuple[list[list[list[int]]], list[int]],
) -> None:
    inputs, delays = case
    total = max(len(epochs) for epochs in inputs)
    p = sb.Pipeline(runner=sb.DirectRunner(check_invariants=True))
    watermarked = []
    ident = 0
    for src, (epochs, delay) in enumerate(zip(inputs, delays, strict=True)):
        ts = sb.TestStream(SCHEMA)
        for times in epochs:
            ts.add_epoch([{"src": src, "id": ident + i, "t": t} for i, t in enumerate(times)])
            ident += len(times)
        watermarked.append(p | f"in{src}" >> ts | f"wm{src}" >> sb.WithWatermark("t", delay))
    merged = watermarked[0].union(*watermarked[1:])
    result = p.run()  # raises InvariantViolation if an edge breaks invariant W

    kept = [row for w in watermarked for row in result.collect(w)]
    assert Counter(r["id"] for r in result.collect(merged)) == Counter(r["id"] for r in kept)
    # Rows pass in the epoch they arrive in.
    for index, rows in enumerate(result.collect_by_epoch(merged)):
        expected = [r for w in watermarked for r in result.collect_by_epoch(w)[index]]
        assert Counter(r["id"] for r in rows) == Counter(r["id"] for r in expected)

    per_input = [
        periodic_marks(epochs, delay, total) for epochs, delay in zip(inputs, delays, strict=True)
    ]
    out = marks(result, merged)
    assert out == sorted(set(out))
    # After each epoch the merged watermark is the minimum of the inputs' latest.
    ends = []
    for index in range(total):
        latest = [m[index] for m in per_input]
        if all(m is not None for m in latest):
            ends.append(min(m for m in latest if m is not None))
    assert set(ends) <= set(out)
    if ends:
        assert out[-1] == ends[-1]
        # Nothing above the minimum at the end of the epoch, nothing before all have one.
        assert all(v <= ends[-1] for v in out)
    else:
        assert out == []
    every_input_value = {m for ms in per_input for m in ms if m is not None}
    assert set(out) <= every_input_value


@pytest.mark.spark
def test_spark_streaming_refuses_windows_of_different_sizes_keyed_after_a_union(
    spark_runner: Any,
) -> None:
    # The model's watermark on window_end is min(floor(wm_a, 10) + 10, floor(wm_b, 4) + 4);
    # Spark's one watermark is min(wm_a, wm_b), which cannot tell which input holds it back.
    def pipeline(runner: Any) -> tuple[sb.Pipeline, sb.PCollection]:
        p = sb.Pipeline(runner=runner)
        a = (p | "a" >> stream([{"t": 5}], [{"t": 100}], [])).with_watermark("t", 0)
        b = (p | "b" >> stream([{"t": 9}], [], [{"t": 100}])).with_watermark("t", 0)
        windows = a.tumble("t", 10).union(b.tumble("t", 4))
        return p, windows.combine_per_key(["window_end"], n=sb.Count())

    p, counts = pipeline(sb.DirectRunner())
    p.run()
    by_epoch = [
        sorted((r["window_end"], r["n"]) for r in rows)
        for rows in p.result.collect_by_epoch(counts)
    ]
    # After epoch 1, wm_a = 100 and wm_b = 9: the watermark of window_end is min(110, 12), so
    # window_end 10 closes; Spark's watermark, min(100, 9) = 9, would keep it open until b moves.
    assert by_epoch == [[], [(10, 1)], [(12, 1)], [(104, 1), (110, 1)]]
    p, counts = pipeline(spark_runner)
    with pytest.raises(
        sb.PipelineError, match=r"'window_end' is, from Union.* derived differently"
    ):
        p.run()
