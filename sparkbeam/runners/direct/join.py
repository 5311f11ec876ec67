"""Direct operator for `Join` (rules in `transforms.join`).

State: for each side, the rows held per key (`held[side][key][row_id]`),
each with a flag saying whether it has matched; and heaps that say when a
held row can get no new match: by the value of a window key (against the
minimum of both sides' watermarks) and, for an interval join, by its time
(against the other side's watermark).

Late rows: a row whose window key is below the output watermark on it (a
side slower than the other under `policy="max"`, or back from idle) can
match nothing without breaking invariant W: it is dropped, counted and sent
to `late_rows()` laid out as an unmatched row.

Watermarks: the sides' watermarks of an epoch are applied when it ends
(`on_barrier`), as `union.UnionOperator` does: every row of an epoch meets
the state (held rows, watermarks) of the epoch before, whatever the order
in which the sides end the epoch. Idle sides are left out of the
merged watermark (`union.WatermarkMerger`); interval conditions keep using
each side's own watermark.

Checkpoint: the held rows of each side (key, row, matched), in arrival
order, the latest watermark of each side per window key and on its interval
time column, which sides are idle, and the late count; the heaps are rebuilt
on restore. Rescale: held rows go to the unit that owns their key; the
watermarks, the same in every unit behind the exchange, are taken as their
minimum, a side is idle if it was in every old unit; the late counts go to
unit 0.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from itertools import count
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
from sparkbeam.runners.direct.union import WatermarkMerger
from sparkbeam.schema import one_nan_in
from sparkbeam.transforms.join import Join
from sparkbeam.transforms.late import LATE, LATE_WATERMARK

Row = tuple[Any, ...]
Key = tuple[Any, ...]


class HeldRow:
    __slots__ = ("key", "matched", "row")

    def __init__(self, key: Key, row: Row) -> None:
        self.key = key
        self.row = row
        self.matched = False


class JoinOperator(Operator):
    def __init__(self, node: Node, inputs: Sequence[EdgeInfo]) -> None:
        super().__init__(node, inputs)
        transform = node.transform
        assert isinstance(transform, Join)
        self.transform = transform
        left, right = inputs
        self.names = (list(left.schema.names), list(right.schema.names))
        self.key_positions = tuple(
            [names.index(key) for key in transform.on] for names in self.names
        )
        self.float_keys = tuple(
            [key for key in transform.on if side.schema.type_of(key) is float]
            for side in (left, right)
        )
        self.keep_unmatched = (
            transform.how in ("left", "full"),
            transform.how in ("right", "full"),
        )
        layout = transform.layout(left.schema, right.schema, node.label)
        self.output_names = [name for name, _, _ in layout.sources]
        self.output_sources = [
            (side, transform.on.index(column) if side < 0 else self.names[side].index(column))
            for _, side, column in layout.sources
        ]
        bounds = transform.interval_bounds(left.schema, right.schema, node.label)
        self.interval = bounds
        self.time_positions = (
            None
            if transform.times is None
            else (self.names[0].index(transform.times[0]), self.names[1].index(transform.times[1]))
        )
        self.window_keys = transform.window_keys(left, right)
        self.merger = WatermarkMerger(2, frozenset(self.window_keys), transform.policy)
        self.late_count = 0
        self.held: tuple[dict[Key, dict[int, HeldRow]], ...] = ({}, {})
        self.ids = count()
        self.by_key: tuple[dict[str, list[tuple[Any, int, Key]]], ...] = tuple(
            {column: [] for column in self.window_keys} for _ in range(2)
        )
        self.by_time: tuple[list[tuple[Any, int, Key]], ...] = ([], [])
        self.size = 0
        self.time_marks: list[Any] = [None, None]
        """The latest watermark of each side on its interval time column."""
        self.arrived: list[tuple[int, Watermark]] = []
        """The sides' watermarks of this epoch, applied at its end (`on_barrier`)."""

    # rows

    def on_chunk(self, port: int, chunk: Chunk) -> list[Message]:
        other = 1 - port
        names, positions = self.names[port], self.key_positions[port]
        out_rows: list[list[Any]] = []
        marks = self._late_marks(port)
        late_rows: list[list[Any]] = []
        columns = one_nan_in(chunk.columns, self.float_keys[port])
        for row in zip(*(columns[name] for name in names), strict=True):
            key = tuple(row[i] for i in positions)
            if marks:
                below = _below(key, marks)
                if below is not None:
                    self.late_count += 1
                    if LATE in self.sides:
                        late_rows.append([*self._output(port, row, None), below])
                    continue
            if any(value is None for value in key):
                if self.keep_unmatched[port]:
                    out_rows.append(self._output(port, row, None))
                continue
            entry = HeldRow(key, row)
            for candidate in self.held[other].get(key, {}).values():
                pair = (row, candidate.row) if port == 0 else (candidate.row, row)
                if self._within(*pair):
                    out_rows.append(self._output(0, pair[0], pair[1]))
                    candidate.matched = True
                    entry.matched = True
            if self._can_match_later(port, entry):
                self._hold(port, entry)
            elif not entry.matched and self.keep_unmatched[port]:
                out_rows.append(self._output(port, row, None))
        out: list[Message] = [self._chunk(out_rows)] if out_rows else []
        if late_rows:
            names = [*self.output_names, LATE_WATERMARK]
            out.append(SideRows(LATE, Chunk.from_rows(names, late_rows)))
        return out

    def _late_marks(self, port: int) -> list[tuple[int, Any]]:
        """`(position in the key, output watermark)` of the window keys this side is behind."""
        if not self._emitted or not self.window_keys:
            return []
        marks = self.merger.behind(port, self._emitted)
        marks.sort(key=lambda pair: self.window_keys.index(pair[0]))
        return [(self.transform.on.index(column), mark) for column, mark in marks]

    def _within(self, left: Row, right: Row) -> bool:
        if self.interval is None or self.time_positions is None:
            return True
        lt, rt = left[self.time_positions[0]], right[self.time_positions[1]]
        if lt is None or rt is None:
            return False
        lower, upper = self.interval
        return bool(lt + lower <= rt <= lt + upper)

    def _can_match_later(self, side: int, entry: HeldRow) -> bool:
        """False when the other side's watermark already rules out any further match."""
        other_mark = self.time_marks[1 - side]
        if self.interval is None or self.time_positions is None or other_mark is None:
            return True
        t = entry.row[self.time_positions[side]]
        if t is None:
            return False
        lower, upper = self.interval
        return bool((t + upper if side == 0 else t - lower) >= other_mark)

    def _hold(self, side: int, entry: HeldRow) -> None:
        row_id = next(self.ids)
        self.held[side].setdefault(entry.key, {})[row_id] = entry
        self.size += 1
        for key_column, heap in self.by_key[side].items():
            value = entry.key[self.transform.on.index(key_column)]
            heapq.heappush(heap, (value, row_id, entry.key))
        if self.interval is not None and self.time_positions is not None:
            t = entry.row[self.time_positions[side]]
            if t is not None:
                lower, upper = self.interval
                expiry = t + upper if side == 0 else t - lower
                heapq.heappush(self.by_time[side], (expiry, row_id, entry.key))

    def _output(self, side: int, left: Row | None, right: Row | None) -> list[Any]:
        """One output row; for an unmatched row, `side` says which of `left`/`right` it is."""
        if side == 1:
            left, right = None, left
        sides = (left, right)
        row: list[Any] = []
        for source, position in self.output_sources:
            if source < 0:
                present = 0 if left is not None else 1
                held = sides[present]
                assert held is not None
                row.append(held[self.key_positions[present][position]])
            else:
                values = sides[source]
                row.append(None if values is None else values[position])
        return row

    def _chunk(self, rows: list[list[Any]]) -> Chunk:
        return Chunk.from_rows(self.output_names, rows)

    # watermarks

    holds_watermarks = True

    def estimate_inputs(self) -> tuple[list[bool], bool]:
        return self.merger.idle, self.merger.highest

    def on_watermark(self, port: int, watermark: Watermark) -> list[Message]:
        self.arrived.append((port, watermark))
        return []

    def _apply(self, port: int, watermark: Watermark) -> list[Message]:
        out_rows: list[list[Any]] = []
        column, value = watermark.column, watermark.value
        self.note_estimate(port, watermark)
        merged = self.merger.update(port, watermark)
        if merged is not None:
            for side in (0, 1):
                self._expire(side, self.by_key[side][column], merged, out_rows)
        times = self.transform.times
        if times is not None and column == times[port]:
            self.time_marks[port] = value
            other = 1 - port
            self._expire(other, self.by_time[other], value, out_rows)
        out: list[Message] = [self._chunk(out_rows)] if out_rows else []
        if merged is not None:
            out += self.watermarks(self.derive(column, merged))
        return out

    def on_status(self, port: int, status: Idleness) -> list[Message]:
        """Active at once; idle from the end of the epoch (`union.WatermarkMerger.going`)."""
        self.merger.going(port, status.idle)
        return [] if status.idle else super().on_status(port, status)

    def on_barrier(self, epoch: int) -> list[Message]:
        """The epoch's watermarks, in arrival order; then the inputs that went idle."""
        out: list[Message] = []
        arrived, self.arrived = self.arrived, []
        for port, watermark in arrived:
            out += self._apply(port, watermark)
        ports, merged = self.merger.settle()
        return out + self._merged(merged) + self.inputs_idle(ports)

    def _merged(self, merged: list[tuple[str, Any]]) -> list[Message]:
        """Expire held rows below new merged window-key watermarks; those watermarks."""
        out_rows: list[list[Any]] = []
        for column, value in merged:
            for side in (0, 1):
                self._expire(side, self.by_key[side][column], value, out_rows)
        out: list[Message] = [self._chunk(out_rows)] if out_rows else []
        for column, value in merged:
            out += self.watermarks(self.derive(column, value))
        return out

    def _expire(
        self, side: int, heap: list[tuple[Any, int, Key]], mark: Any, out: list[list[Any]]
    ) -> None:
        held = self.held[side]
        while heap and heap[0][0] < mark:
            _, row_id, key = heapq.heappop(heap)
            rows = held.get(key)
            if rows is None or row_id not in rows:
                continue
            entry = rows.pop(row_id)
            if not rows:
                del held[key]
            self.size -= 1
            if not entry.matched and self.keep_unmatched[side]:
                out.append(self._output(side, entry.row, None))

    def on_end(self) -> list[Message]:
        out_rows = []
        for side in (0, 1):
            for rows in self.held[side].values():
                for entry in rows.values():
                    if not entry.matched and self.keep_unmatched[side]:
                        out_rows.append(self._output(side, entry.row, None))
            self.held[side].clear()
            for heap in self.by_key[side].values():
                heap.clear()
            self.by_time[side].clear()
        self.size = 0
        return [self._chunk(out_rows)] if out_rows else []

    def state_size(self) -> int:
        return self.size

    # checkpoints

    def snapshot(self) -> dict[str, Any]:
        return {
            "held": [
                [(entry.key, entry.row, entry.matched) for entry in _arrival_order(self.held[side])]
                for side in (0, 1)
            ],
            "time_marks": list(self.time_marks),
            "latest": {column: list(values) for column, values in self.merger.latest.items()},
            "idle": list(self.merger.idle),
            "late": self.late_count,
        }

    def restore(self, state: dict[str, Any]) -> None:
        self.late_count = state["late"]
        self.time_marks = list(state["time_marks"])
        self.merger.latest = {column: list(values) for column, values in state["latest"].items()}
        self.merger.idle = list(state["idle"])
        for side in (0, 1):
            for key, row, matched in state["held"][side]:
                entry = HeldRow(key, row)
                entry.matched = matched
                self._hold(side, entry)

    def rescale(self, states: Sequence[Any], units: int, owner: Owner) -> list[Any]:
        time_marks = [lowest_of(state["time_marks"][side] for state in states) for side in (0, 1)]
        latest = {
            column: [
                lowest_of(state["latest"][column][side] for state in states) for side in (0, 1)
            ]
            for column in self.merger.latest
        }
        late = sum(state["late"] for state in states)
        idle = [all(state["idle"][side] for state in states) for side in (0, 1)]
        moved: list[dict[str, Any]] = [
            {
                "held": [[], []],
                "time_marks": list(time_marks),
                "latest": latest,
                "idle": list(idle),
                "late": late if unit == 0 else 0,
            }
            for unit in range(units)
        ]
        for state in states:
            for side in (0, 1):
                for held in state["held"][side]:
                    moved[owner(held[0])]["held"][side].append(held)
        return moved


def _below(key: Key, marks: list[tuple[int, Any]]) -> Any:
    """The first mark a key value is below (None: the row is not late)."""
    for position, mark in marks:
        value = key[position]
        if value is not None and value < mark:
            return mark
    return None


def _arrival_order(held: dict[Key, dict[int, HeldRow]]) -> list[HeldRow]:
    entries = [(row_id, entry) for rows in held.values() for row_id, entry in rows.items()]
    return [entry for _, entry in sorted(entries, key=lambda pair: pair[0])]
