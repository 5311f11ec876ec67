"""`Sort(col, keys=())`: RisingWave's event-time sort on the direct runner.

Rule under test (SPEC section 4): rows are buffered; `W(col, wm)` releases the
buffered rows with `col < wm`, in `col` order (ties in arrival order), and is
then forwarded; with `keys` the order holds within each key; the end of input
flushes the rest in order. The direct runner checks the promised order.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import sparkbeam as sb
from sparkbeam.derivation import WatermarkRule, passing
from sparkbeam.graph import EdgeInfo, Node, PrimitiveTransform
from sparkbeam.runners.direct import runner as direct_runner
from sparkbeam.runners.direct.operator import Chunk, Message, Operator
from sparkbeam.transforms.validation import single_input

DAY = datetime(2026, 4, 1)


def at(hour: int, minute: int, second: int = 0) -> datetime:
    return DAY.replace(hour=hour, minute=minute, second=second)


def stream(
    *epochs: Sequence[dict[str, Any]], schema: dict[str, type] | None = None
) -> sb.TestStream:
    ts = sb.TestStream(schema)
    for rows in epochs:
        ts.add_epoch(rows)
    return ts


# RisingWave's example: a 5-minute delay holds rows at 16:51 until a row at
# 16:56:01 or later arrives.


def test_risingwave_example_periodic_release_needs_a_row_after_the_delay() -> None:
    with sb.Pipeline() as p:
        rows = p | stream(
            [{"id": "a", "t": at(16, 51)}],
            [{"id": "b", "t": at(16, 56)}],  # wm = 16:51:00; 16:51 < 16:51 is false: kept
            [{"id": "c", "t": at(16, 56, 1)}],  # wm = 16:51:01: releases 16:51
        )
        sorted_rows = rows.with_watermark("t", "5 minutes").sort("t")
    result = p.result
    assert result.collect_by_epoch(sorted_rows) == [
        [],
        [],
        [{"id": "a", "t": at(16, 51)}],
        [{"id": "b", "t": at(16, 56)}, {"id": "c", "t": at(16, 56, 1)}],
    ]
    assert result.watermarks(sorted_rows) == [
        sb.Watermark("t", at(16, 46)),
        sb.Watermark("t", at(16, 51)),
        sb.Watermark("t", at(16, 51, 1)),
    ]
    assert result.state_size(sorted_rows) == 0


def test_risingwave_example_event_emit_releases_within_the_epoch() -> None:
    with sb.Pipeline() as p:
        rows = p | stream(
            [{"id": "a", "t": at(16, 51)}, {"id": "b", "t": at(16, 56)}],
            [{"id": "c", "t": at(16, 56, 1)}, {"id": "d", "t": at(16, 57)}],
        )
        sorted_rows = rows.with_watermark("t", timedelta(minutes=5), emit="event").sort("t")
    by_epoch = p.result.collect_by_epoch(sorted_rows)
    # 16:56:00 gives wm 16:51:00, which does not release the 16:51 row.
    assert by_epoch[0] == []
    # 16:56:01 gives wm 16:51:01 (releases a), 16:57 gives wm 16:52 (nothing more).
    assert [row["id"] for row in by_epoch[1]] == ["a"]
    assert [row["id"] for row in by_epoch[2]] == ["b", "c", "d"]


def test_released_rows_come_in_time_order_with_ties_in_arrival_order() -> None:
    with sb.Pipeline() as p:
        rows = p | stream(
            [
                {"id": 1, "t": 30},
                {"id": 2, "t": 10},
                {"id": 3, "t": 20},
                {"id": 4, "t": 10},
                {"id": 5, "t": 40},
            ],
            [{"id": 6, "t": 20}, {"id": 7, "t": 10}, {"id": 8, "t": 100}],
        )
        sorted_rows = rows.with_watermark("t", 15).sort("t")
    by_epoch = p.result.collect_by_epoch(sorted_rows)
    # End of epoch 0: wm = 40 - 15 = 25 releases 10 (ids 2, 4) and 20 (id 3).
    assert [row["id"] for row in by_epoch[0]] == [2, 4, 3]
    # Epoch 1 is filtered with wm 25: ids 6 and 7 are late. wm = 85 releases 30, 40.
    assert [row["id"] for row in by_epoch[1]] == [1, 5]
    assert [row["id"] for row in by_epoch[2]] == [8]


def test_ties_across_epochs_keep_arrival_order() -> None:
    with sb.Pipeline() as p:
        rows = p | stream(
            [{"id": "first", "t": 7}],
            [{"id": "second", "t": 7}],
            [{"id": "third", "t": 7}, {"id": "early", "t": 5}],
        )
        sorted_rows = rows.with_watermark("t", 2).sort("t")
    assert [r["id"] for r in p.result.collect(sorted_rows)] == ["early", "first", "second", "third"]


@pytest.mark.parametrize("emit", ["periodic", "event"])
def test_epochs_of_several_chunks_come_out_in_time_then_arrival_order(emit: str) -> None:
    # 20,000 rows an epoch: several chunks each, held as several sorted runs; many ties.
    epochs = [
        [{"id": i, "t": i // 4 - (i * 7919) % 3000} for i in range(e * 20_000, (e + 1) * 20_000)]
        for e in range(3)
    ]
    with sb.Pipeline() as p:
        watermarked = p | stream(*epochs) | sb.WithWatermark("t", 1000, emit=emit)
        sorted_rows = watermarked | sb.Sort("t")
    kept = p.result.collect(watermarked)
    assert p.result.late_count(watermarked) > 0
    assert p.result.collect(sorted_rows) == sorted(kept, key=lambda r: r["t"])


def test_end_of_bounded_input_flushes_everything_in_order() -> None:
    rows = [{"id": i, "t": t} for i, t in enumerate([5, 3, 9, 3, 1, 9, 0])]
    with sb.Pipeline() as p:
        sorted_rows = p | sb.Create(rows) | sb.Sort("t")
    result = p.result
    assert result.collect(sorted_rows) == sorted(rows, key=lambda r: r["t"])
    assert result.collect_by_epoch(sorted_rows)[0] == []  # held until the end
    assert result.state_size(sorted_rows) == 0
    assert result.peak_state_size(sorted_rows) == len(rows)


def test_keys_order_within_each_key() -> None:
    with sb.Pipeline() as p:
        rows = p | stream(
            [
                {"k": "x", "t": 9, "id": 0},
                {"k": "y", "t": 2, "id": 1},
                {"k": "x", "t": 1, "id": 2},
                {"k": "y", "t": 8, "id": 3},
                {"k": "x", "t": 4, "id": 4},
            ],
            [{"k": "y", "t": 20, "id": 5}, {"k": "x", "t": 9, "id": 6}],
        )
        sorted_rows = rows.with_watermark("t", 0) | "by key" >> sb.Sort("t", keys=["k"])
    out = p.result.collect(sorted_rows)
    assert sorted(r["id"] for r in out) == list(range(7))
    for key in ("x", "y"):
        times = [(r["t"], r["id"]) for r in out if r["k"] == key]
        assert times == sorted(times)
    assert [r["id"] for r in out if r["k"] == "x"] == [2, 4, 0, 6]


def test_forwards_only_the_sort_column_watermark_after_the_rows() -> None:
    with sb.Pipeline() as p:
        rows = p | stream([{"t": 3}, {"t": 12}], [{"t": 25}])
        windowed = rows.with_watermark("t", 0).tumble("t", 10)
        sorted_rows = windowed.sort("t")
    result = p.result
    assert sorted_rows.watermarked_columns == frozenset({"t"})
    assert {w.column for w in result.watermarks(windowed)} == {"t", "window_start", "window_end"}
    assert result.watermarks(sorted_rows) == [sb.Watermark("t", 12), sb.Watermark("t", 25)]
    assert [r["t"] for r in result.collect(sorted_rows)] == [3, 12, 25]


def test_fluent_and_transform_forms_agree(runner: Any) -> None:
    rows = [{"t": t} for t in (4, 2, 8, 6)]
    with sb.Pipeline(runner=runner) as p:
        a = p | "a" >> sb.Create(rows)
        fluent = a.sort("t")
        applied = a | sb.Sort("t")
    assert (
        p.result.collect(fluent) == p.result.collect(applied) == sorted(rows, key=lambda r: r["t"])
    )


def test_sort_without_watermark_on_unbounded_input_is_refused() -> None:
    p = sb.Pipeline()
    rows = p | stream([{"t": 1, "u": 2}]) | sb.WithWatermark("u", 0)
    with pytest.raises(sb.PipelineError) as info:
        rows | "order events" >> sb.Sort("t")
    message = str(info.value)
    assert "order events" in message
    assert "'t'" in message
    assert ".with_watermark('t'" in message


def test_sort_on_unknown_or_non_time_column_is_refused() -> None:
    p = sb.Pipeline()
    rows = p | sb.Create([{"t": 1, "name": "x"}])
    with pytest.raises(sb.PipelineError, match="unknown column 'nope'"):
        rows.sort("nope")
    with pytest.raises(sb.PipelineError, match="'name' is str"):
        rows.sort("name")
    with pytest.raises(sb.PipelineError, match="unknown column 'missing'"):
        rows.sort("t", keys=["missing"])


# The order check: a transform that claims an order its operator does not keep.


class ClaimsOrder(PrimitiveTransform):
    """Test-only: promises `column` order within `keys`; its operator reverses the rows."""

    def __init__(self, column: str, keys: tuple[str, ...] = ()) -> None:
        self.column = column
        self.keys = keys

    def output_order(self) -> tuple[str, tuple[str, ...]] | None:
        return self.column, self.keys

    def infer(self, inputs: Sequence[EdgeInfo], label: str) -> EdgeInfo:
        return single_input(inputs, label)

    def watermark_rule(self, inputs: Sequence[EdgeInfo], label: str) -> WatermarkRule:
        return WatermarkRule(passing(inputs[0].schema.names))


class ReverseAtEnd(Operator):
    """Holds every row and emits them in reverse arrival order at the end of input."""

    def __init__(self, node: Node, inputs: Sequence[EdgeInfo]) -> None:
        super().__init__(node, inputs)
        self.names = list(inputs[0].schema.names)
        self.rows: list[tuple[Any, ...]] = []

    def on_chunk(self, port: int, chunk: Chunk) -> list[Message]:
        self.rows.extend(zip(*(chunk.columns[n] for n in self.names), strict=True))
        return []

    def on_watermark(self, port: int, watermark: sb.Watermark) -> list[Message]:
        return []

    def on_end(self) -> list[Message]:
        rows, self.rows = self.rows[::-1], []
        return [Chunk.from_rows(self.names, rows)] if rows else []


@pytest.fixture
def reverse_operator(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(direct_runner.OPERATORS, ClaimsOrder, ReverseAtEnd)


def test_order_check_catches_a_broken_order(reverse_operator: None) -> None:
    p = sb.Pipeline()
    rows = p | sb.Create([{"k": "a", "t": 1}, {"k": "a", "t": 2}])
    claimed = rows | "liar" >> ClaimsOrder("t")
    assert claimed is not None
    with pytest.raises(sb.InvariantViolation, match=r"order broken on the output of liar"):
        p.run()


def test_order_check_is_per_key(reverse_operator: None) -> None:
    # Reversed, [(a, 1), (b, 5)] becomes [(b, 5), (a, 1)]: out of order overall,
    # in order within each key.
    p = sb.Pipeline()
    rows = p | sb.Create([{"k": "a", "t": 1}, {"k": "b", "t": 5}])
    claimed = rows | "per key" >> ClaimsOrder("t", ("k",))
    result = p.run()
    assert result.collect(claimed) == [{"k": "b", "t": 5}, {"k": "a", "t": 1}]

    p = sb.Pipeline()
    rows = p | sb.Create([{"k": "a", "t": 1}, {"k": "b", "t": 0}, {"k": "a", "t": 2}])
    claimed = rows | "per key" >> ClaimsOrder("t", ("k",))
    with pytest.raises(sb.InvariantViolation, match=r"within key \{'k': 'a'\}"):
        p.run()


def test_order_check_is_off_without_invariant_checks(reverse_operator: None) -> None:
    p = sb.Pipeline(runner=sb.DirectRunner(check_invariants=False))
    rows = p | sb.Create([{"t": 1}, {"t": 2}])
    claimed = rows | ClaimsOrder("t")
    assert p.run().collect(claimed) == [{"t": 2}, {"t": 1}]


def test_test_operator_is_unregistered_afterwards() -> None:
    assert ClaimsOrder not in direct_runner.OPERATORS
    p = sb.Pipeline()
    p | sb.Create([{"t": 1}]) | ClaimsOrder("t")
    with pytest.raises(sb.PipelineError, match="not supported on the direct runner"):
        p.run()


# Property: the output is the stable sort of the rows that survive the
# watermark filter, and each epoch releases exactly the rows below its watermark.


def _survivors_and_marks(
    epochs: list[list[dict[str, Any]]], delay: int
) -> tuple[list[dict[str, Any]], list[int | None]]:
    """WithWatermark(periodic) by hand: the rows kept, and the watermark after each epoch."""
    kept: list[dict[str, Any]] = []
    marks: list[int | None] = []
    wm: int | None = None
    top: int | None = None
    for rows in epochs:
        for row in rows:
            if wm is None or row["t"] >= wm:
                kept.append(row)
                top = row["t"] if top is None else max(top, row["t"])
        if top is not None and (wm is None or top - delay > wm):
            wm = top - delay
        marks.append(wm)
    return kept, marks


SCHEMA = {"id": int, "k": str, "t": int}
rows_strategy = st.lists(
    st.lists(st.tuples(st.integers(0, 40), st.sampled_from("pq")), max_size=6),
    min_size=1,
    max_size=6,
)


def _numbered(raw: list[list[tuple[int, str]]]) -> list[list[dict[str, Any]]]:
    n = 0
    epochs = []
    for rows in raw:
        epoch = []
        for t, k in rows:
            epoch.append({"id": n, "k": k, "t": t})
            n += 1
        epochs.append(epoch)
    return epochs


@given(raw=rows_strategy, delay=st.integers(0, 12))
def test_sort_releases_exactly_the_rows_below_each_watermark(
    raw: list[list[tuple[int, str]]], delay: int
) -> None:
    epochs = _numbered(raw)
    with sb.Pipeline() as p:
        watermarked = p | stream(*epochs, schema=SCHEMA) | sb.WithWatermark("t", delay)
        sorted_rows = watermarked | sb.Sort("t")
    result = p.result
    kept, marks = _survivors_and_marks(epochs, delay)
    assert result.collect(watermarked) == kept
    ordered = sorted(kept, key=lambda r: r["t"])  # stable: ties keep arrival order
    assert result.collect(sorted_rows) == ordered
    by_epoch = result.collect_by_epoch(sorted_rows)
    low: int | None = None
    for index, mark in enumerate(marks):
        expected = [
            r
            for r in ordered
            if mark is not None and r["t"] < mark and (low is None or r["t"] >= low)
        ]
        assert by_epoch[index] == expected
        low = mark if mark is not None else low
    assert by_epoch[-1] == [r for r in ordered if low is None or r["t"] >= low]
    assert [w.value for w in result.watermarks(sorted_rows)] == sorted(
        {m for m in marks if m is not None}
    )
    assert result.state_size(sorted_rows) == 0


@given(raw=rows_strategy, delay=st.integers(0, 12), emit=st.sampled_from(["periodic", "event"]))
def test_sort_with_keys_is_ordered_within_each_key(
    raw: list[list[tuple[int, str]]], delay: int, emit: str
) -> None:
    epochs = _numbered(raw)
    with sb.Pipeline() as p:
        watermarked = p | stream(*epochs, schema=SCHEMA) | sb.WithWatermark("t", delay, emit=emit)
        sorted_rows = watermarked | sb.Sort("t", keys="k")
    result = p.result
    kept = result.collect(watermarked)
    out = result.collect(sorted_rows)
    assert sorted(r["id"] for r in out) == sorted(r["id"] for r in kept)
    for key in "pq":
        expected = sorted((r for r in kept if r["k"] == key), key=lambda r: r["t"])
        assert [r for r in out if r["k"] == key] == expected
