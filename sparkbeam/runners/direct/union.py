"""Direct operator for `Union` (rules in `transforms.union`): the watermark merger."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sparkbeam.graph import EdgeInfo, Node
from sparkbeam.messages import Watermark
from sparkbeam.runners.direct.operator import (
    Chunk,
    Idleness,
    Message,
    Operator,
    Owner,
    SideRows,
    lowest_of,
)
from sparkbeam.transforms.late import LATE, LATE_WATERMARK
from sparkbeam.transforms.union import Union


class WatermarkMerger:
    """The latest watermark of each input per column; the output is their minimum (or maximum).

    `policy="min"`: a column has an output watermark only once every input
    that is not idle has given one. `policy="max"`: as soon as one has. Idle
    inputs are left out either way; with all inputs idle there is no value.

    An input that goes idle is left out from the end of the epoch (`going`,
    then `settle` when the operator's barrier is aligned), all such inputs at
    once: so the output watermark after an epoch does not depend on the order
    in which its inputs ended it (two inputs going idle together would
    otherwise raise it to the latest of whichever went first). An input that
    brings rows again counts again at once, for the next watermark, but its
    return raises nothing by itself (with every input idle, the first back
    would otherwise raise the output to its own latest watermark before the
    others' rows came: late rows would depend on the order inputs return in).
    """

    def __init__(self, inputs: int, columns: frozenset[str], policy: str = "min") -> None:
        self.latest: dict[str, list[Any]] = {column: [None] * inputs for column in columns}
        self.idle = [False] * inputs
        self.going_idle: set[int] = set()
        """Inputs that went idle in this epoch, left out at its end (`settle`)."""
        self.highest = policy == "max"

    def merged(self, column: str) -> Any:
        """The output value of `column` from the inputs' latest values (or None)."""
        values = self.latest[column]
        if any(self.idle):
            values = [value for value, idle in zip(values, self.idle, strict=True) if not idle]
        if self.highest:
            present = [value for value in values if value is not None]
            return max(present) if present else None
        if not values or any(value is None for value in values):
            return None
        return min(values)

    def update(self, port: int, watermark: Watermark) -> Any:
        """The merged value of the watermark's column after this input's new one (or None)."""
        values = self.latest.get(watermark.column)
        if values is None:
            return None
        values[port] = watermark.value
        return self.merged(watermark.column)

    def going(self, port: int, idle: bool) -> None:
        """Input `port`'s new status: active at once, idle from the end of the epoch."""
        if idle:
            self.going_idle.add(port)
            return
        self.going_idle.discard(port)
        self.idle[port] = False

    def settle(self) -> tuple[list[int], list[tuple[str, Any]]]:
        """At the end of the epoch: leave out, together, the inputs that went idle in it;
        those inputs and the merged values (nothing when none went idle)."""
        ports = sorted(self.going_idle)
        if not ports:
            return [], []
        self.going_idle.clear()
        for port in ports:
            self.idle[port] = True
        return ports, self._all_merged()

    def _all_merged(self) -> list[tuple[str, Any]]:
        merged = ((column, self.merged(column)) for column in sorted(self.latest))
        return [(column, value) for column, value in merged if value is not None]

    def behind(self, port: int, emitted: dict[str, Any]) -> list[tuple[str, Any]]:
        """`(column, output watermark)` where input `port`'s latest is below what was emitted.

        Only then can a row of that input be late: under `min` with no idle
        input there is never one.
        """
        marks = []
        for column, values in self.latest.items():
            out = emitted.get(column)
            if out is not None and (values[port] is None or values[port] < out):
                marks.append((column, out))
        return marks


def late_positions(
    columns: dict[str, list[Any]], marks: Sequence[tuple[str, Any]], size: int
) -> tuple[list[bool], list[int], list[Any]]:
    """Judge rows against output watermarks: `(keep, late indices, the mark each was below)`.

    A row is late when a watermarked column holds a value below that column's
    mark (a `None` is not judged); its mark is the first such, in `marks` order.
    """
    keep = [True] * size
    late: list[int] = []
    below: list[Any] = []
    for index in range(size):
        for column, mark in marks:
            value = columns[column][index]
            if value is not None and value < mark:
                keep[index] = False
                late.append(index)
                below.append(mark)
                break
    return keep, late, below


class UnionOperator(Operator):
    """Rows pass at once; watermarks through the merger, at the end of each epoch.

    A row of an input whose watermark is behind the output watermark (an
    input slower than the fastest under `policy="max"`, or one back from
    idle) is judged against it and dropped when below: a late row, counted
    and sent to `late_rows()` with the mark it was below. The inputs'
    watermarks of an epoch are applied when it ends (`on_barrier`), so every
    row of an epoch is judged against the output watermark of the epoch
    before (Spark's micro-batch: the watermark of batch N is computed at the
    end of batch N-1), whatever the order in which inputs end the epoch:
    rows a stateful transform upstream releases at an epoch's end would
    otherwise be judged against whichever inputs' watermarks came first.

    Checkpoint: the merger's latest watermark of each input, which inputs are
    idle, and the late count. Rescale: each value becomes the minimum over the
    old units (None if one had none), an input is idle if it was in every old
    unit; the late counts go to unit 0.
    """

    def __init__(self, node: Node, inputs: Sequence[EdgeInfo]) -> None:
        super().__init__(node, inputs)
        transform = node.transform
        assert isinstance(transform, Union)
        self.merger = WatermarkMerger(len(inputs), node.info.watermarked, transform.policy)
        self.order = [name for name in node.info.schema.names if name in node.info.watermarked]
        self.late_count = 0
        self.arrived: list[tuple[int, Watermark]] = []
        """The inputs' watermarks of this epoch, applied at its end (`on_barrier`)."""

    def on_chunk(self, port: int, chunk: Chunk) -> list[Message]:
        if not self._emitted:
            return [chunk]
        marks = self.merger.behind(port, self._emitted)
        if not marks:
            return [chunk]
        marks.sort(key=lambda pair: self.order.index(pair[0]))
        keep, late, below = late_positions(chunk.columns, marks, chunk.size)
        if not late:
            return [chunk]
        self.late_count += len(late)
        out: list[Message] = []
        if LATE in self.sides:
            rows = chunk.take(late)
            rows.columns[LATE_WATERMARK] = below
            out.append(SideRows(LATE, rows))
        kept = chunk.size - len(late)
        if kept:
            out.append(chunk.compress(keep, kept))
        return out

    holds_watermarks = True

    def estimate_inputs(self) -> tuple[list[bool], bool]:
        return self.merger.idle, self.merger.highest

    def on_watermark(self, port: int, watermark: Watermark) -> list[Message]:
        self.arrived.append((port, watermark))
        return []

    def on_status(self, port: int, status: Idleness) -> list[Message]:
        self.merger.going(port, status.idle)
        return [] if status.idle else super().on_status(port, status)

    def on_barrier(self, epoch: int) -> list[Message]:
        out: list[Message] = []
        arrived, self.arrived = self.arrived, []
        for port, watermark in arrived:
            self.note_estimate(port, watermark)
            merged = self.merger.update(port, watermark)
            if merged is not None:
                out += self.watermarks([(watermark.column, merged)])
        ports, merged_all = self.merger.settle()
        return out + self.watermarks(merged_all) + self.inputs_idle(ports)

    def snapshot(self) -> dict[str, Any]:
        return {
            "latest": {column: list(values) for column, values in self.merger.latest.items()},
            "idle": list(self.merger.idle),
            "late": self.late_count,
        }

    def restore(self, state: dict[str, Any]) -> None:
        self.merger.latest = {column: list(values) for column, values in state["latest"].items()}
        self.merger.idle = list(state["idle"])
        self.late_count = state["late"]

    def rescale(self, states: Sequence[Any], units: int, owner: Owner) -> list[Any]:
        inputs = len(self.inputs)
        merged = {
            column: [
                lowest_of(state["latest"][column][port] for state in states)
                for port in range(inputs)
            ]
            for column in self.merger.latest
        }
        late = sum(state["late"] for state in states)
        idle = [all(state["idle"][port] for state in states) for port in range(inputs)]
        return [
            {
                "latest": {column: list(values) for column, values in merged.items()},
                "idle": list(idle),
                "late": late if unit == 0 else 0,
            }
            for unit in range(units)
        ]
