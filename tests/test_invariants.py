"""The direct runner checks invariant W on every edge (SPEC section 2).

After `Watermark(c, t)` every later row has `row[c] >= t`, and watermarks on one
column never decrease; a violation raises `sb.InvariantViolation` naming the
transform, the column, the watermark and the row.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any

import pytest

import sparkbeam as sb
from sparkbeam.derivation import WatermarkRule, passing
from sparkbeam.graph import EdgeInfo, Node, PrimitiveTransform
from sparkbeam.runners.direct import runner as direct_runner
from sparkbeam.runners.direct.operator import Message, Operator


def at(hour: int, minute: int) -> datetime:
    return datetime(2026, 4, 1, hour, minute)


def mentions(message: str, value: Any) -> bool:
    """`value` appears in `message` in one of the usual spellings."""
    spellings = {repr(value), str(value)}
    if isinstance(value, datetime):
        spellings.add(value.isoformat())
    return any(spelling in message for spelling in spellings)


def micros(value: datetime) -> int:
    """The runner's internal form of a datetime: microseconds since 1970-01-01 UTC."""
    return (value - datetime(1970, 1, 1)) // timedelta(microseconds=1)


def shift_back(row: dict[str, Any]) -> dict[str, Any]:
    return {**row, "t": row["t"] - timedelta(minutes=30)}


def broken_map_pipeline(runner: Any = None) -> tuple[sb.Pipeline, sb.PCollection]:
    """A Map that promises `keeps=["t"]` but moves t 30 minutes back.

    Epoch 0: o1 at 10:10 becomes 09:40; then W(t, 10:10) passes through the Map.
    Epoch 1: o2 at 10:20 becomes 09:50, below W(t, 10:10).
    """
    p = sb.Pipeline(runner=runner)
    stream = sb.TestStream().add_epoch([{"id": "o1", "t": at(10, 10)}])
    stream.add_epoch([{"id": "o2", "t": at(10, 20)}])
    shifted = (
        p | stream | sb.WithWatermark("t", 0) | "shift back" >> sb.Map(shift_back, keeps=["t"])
    )
    return p, shifted


@pytest.mark.parametrize("check_invariants", [True, False])
def test_a_map_breaking_its_keeps_promise_is_a_data_error(check_invariants: bool) -> None:
    """The promise is checked row by row, as on Spark (issue 19): the first row that
    breaks it is a `DataError`, whether or not invariant W is checked."""
    p, _ = broken_map_pipeline(sb.DirectRunner(check_invariants=check_invariants))
    with pytest.raises(sb.DataError) as info:
        p.run()
    message = str(info.value)
    assert message.startswith("shift back: keeps=['t']")
    assert "'o1'" in message  # the row
    assert mentions(message, at(10, 10)) and mentions(message, at(9, 40))


@pytest.mark.usefixtures("stamp")
def test_the_check_is_on_by_default_for_a_runner_object() -> None:
    p, _ = stamped([[{"t": 100}], [{"t": 50}]], [100], sb.DirectRunner())
    with pytest.raises(sb.InvariantViolation):
        p.run()


def test_a_map_that_keeps_its_promise_passes() -> None:
    p = sb.Pipeline()
    stream = sb.TestStream().add_epoch([{"id": "o1", "t": at(10, 10)}])
    stream.add_epoch([{"id": "o2", "t": at(10, 20)}])
    upper = (
        p
        | stream
        | sb.WithWatermark("t", 0)
        | sb.Map(lambda row: {**row, "id": row["id"].upper()}, keeps=["t"])
    )
    result = p.run()
    assert [row["id"] for row in result.collect(upper)] == ["O1", "O2"]


def test_a_map_that_declares_nothing_may_move_times() -> None:
    # Without keeps the Map drops W(t): moving t back breaks no promise.
    p = sb.Pipeline()
    stream = sb.TestStream().add_epoch([{"id": "o1", "t": at(10, 10)}])
    stream.add_epoch([{"id": "o2", "t": at(10, 20)}])
    shifted = p | stream | sb.WithWatermark("t", 0) | sb.Map(shift_back)
    result = p.run()
    assert result.watermarks(shifted) == []
    assert len(result.collect(shifted)) == 2


# --- a test-only operator that breaks the invariant ------------------------------------


class Stamp(PrimitiveTransform):
    """Test only: passes rows through and, at the end of epoch i, emits `W(column, values[i])`."""

    def __init__(self, column: str, values: Sequence[Any]) -> None:
        self.column = column
        self.values = tuple(values)

    def infer(self, inputs: Sequence[EdgeInfo], label: str) -> EdgeInfo:
        return inputs[0]

    def watermark_rule(self, inputs: Sequence[EdgeInfo], label: str) -> WatermarkRule:
        return WatermarkRule(passing(inputs[0].schema.names))


class StampOperator(Operator):
    def __init__(self, node: Node, inputs: Sequence[EdgeInfo]) -> None:
        super().__init__(node, inputs)
        transform = node.transform
        assert isinstance(transform, Stamp)
        self.column = transform.column
        self.values = transform.values

    def on_barrier(self, epoch: int) -> list[Message]:
        if epoch < len(self.values):
            return [sb.Watermark(self.column, self.values[epoch])]
        return []


@pytest.fixture
def stamp() -> Iterator[None]:
    direct_runner.OPERATORS[Stamp] = StampOperator
    try:
        yield
    finally:
        del direct_runner.OPERATORS[Stamp]


def stamped(
    epochs: Sequence[list[dict[str, Any]]], values: Sequence[Any], runner: Any = None
) -> tuple[sb.Pipeline, sb.PCollection]:
    p = sb.Pipeline(runner=runner)
    stream = sb.TestStream()
    for rows in epochs:
        stream.add_epoch(rows)
    out = p | stream | "stamp" >> Stamp("t", values)
    return p, out


@pytest.mark.usefixtures("stamp")
def test_a_decreasing_watermark_is_caught() -> None:
    p, _ = stamped([[{"t": 100}], [{"t": 200}]], [100, 50])
    with pytest.raises(sb.InvariantViolation) as info:
        p.run()
    message = str(info.value)
    assert "stamp" in message
    assert "'t'" in message
    assert "100" in message
    assert "50" in message


@pytest.mark.usefixtures("stamp")
def test_a_decreasing_datetime_watermark_is_caught_and_shown_as_datetimes() -> None:
    epochs = [[{"t": at(10, 0)}], [{"t": at(11, 0)}]]
    p, _ = stamped(epochs, [micros(at(10, 0)), micros(at(9, 0))])
    with pytest.raises(sb.InvariantViolation) as info:
        p.run()
    message = str(info.value)
    assert "stamp" in message
    assert mentions(message, at(10, 0))
    assert mentions(message, at(9, 0))


@pytest.mark.usefixtures("stamp")
def test_a_row_below_an_earlier_watermark_is_caught() -> None:
    p, _ = stamped([[{"t": 100, "k": "a"}], [{"t": 50, "k": "late"}]], [100])
    with pytest.raises(sb.InvariantViolation) as info:
        p.run()
    message = str(info.value)
    assert "stamp" in message
    assert "'t'" in message
    assert "100" in message
    assert "'late'" in message


@pytest.mark.usefixtures("stamp")
def test_a_row_equal_to_the_watermark_is_valid() -> None:
    p, out = stamped([[{"t": 100}], [{"t": 100}], [{"t": 101}]], [100, 100])
    result = p.run()
    assert result.collect(out) == [{"t": 100}, {"t": 100}, {"t": 101}]


@pytest.mark.usefixtures("stamp")
def test_test_only_operator_runs_without_the_check() -> None:
    p, out = stamped(
        [[{"t": 100}], [{"t": 50}]], [100, 50], sb.DirectRunner(check_invariants=False)
    )
    result = p.run()
    assert result.collect(out) == [{"t": 100}, {"t": 50}]
    assert result.watermarks(out) == [sb.Watermark("t", 100), sb.Watermark("t", 50)]


def test_the_test_only_operator_is_not_left_registered() -> None:
    assert Stamp not in direct_runner.OPERATORS
    p = sb.Pipeline()
    _ = p | sb.Create([{"t": 1}]) | Stamp("t", [1])
    with pytest.raises(sb.PipelineError, match="not supported"):
        p.run()
