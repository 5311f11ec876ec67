"""Direct operator for `WithWatermark`: the watermark filter (rules in `transforms.watermark`)."""

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
    highest_of,
    lowest_of,
)
from sparkbeam.transforms.late import INVALID, LATE, LATE_WATERMARK
from sparkbeam.transforms.watermark import WithWatermark


class WatermarkFilter(Operator):
    """Drops rows below the watermark and rows with no event time; emits `W(column, wm)`.

    State: the watermark `wm` and the largest event time seen. Each chunk is
    filtered with the watermark from before it.

    With parallel units (`runners.direct.parallel`) the units of one filter
    meet at every barrier (`agree`) before any of them passes it on, as the
    tasks of a Spark micro-batch do:

    - `emit="periodic"`: each unit takes the largest event time seen by all
      of them, so every unit raises the same (global) watermark and filters
      the next epoch's rows with it: the same rows are late at any
      parallelism, and a unit that saw no row emits the global watermark too.
    - `emit="event"`: the watermark rises after every row, within a unit, so
      each unit keeps its own (local) watermark, as RisingWave's filter does
      per partition: a unit drops a subset of the rows parallelism 1 drops.
    - `idle_after`: an epoch is empty when no unit saw a row in it, so the
      units go idle together; a unit that saw none in an epoch some other
      unit saw rows in becomes active at the barrier.

    With `allowed_lateness`, `wm` is the watermark `W`; the estimate beside it
    on `column` is `W + allowed_lateness` (`estimate_of`).

    A checkpoint keeps each unit's `wm`, largest time, idleness and counters;
    fail-over gives every unit its own back (periodic: the global values); a
    rescale starts every new unit from the largest saved `wm` and largest
    time (periodic: the global ones; RisingWave takes the global maximum on
    scaling), so a new unit never judges rows against less than any old unit
    did, and the counters' totals go to unit 0. The barrier after a rescale
    announces the restored watermark.

    Dropped rows go out as `SideRows` when a `DroppedRows` node reads them:
    late rows with the watermark they were judged against (`late_watermark`),
    rows with no event time as they came.

    Idleness (`idle_after` epochs): an epoch that brings no row counts as
    empty (unless the executor held this filter's sources back for watermark
    alignment: `paused`); after `idle_after` empty epochs in a row the output
    goes `IDLE` at the barrier, and the next row makes it `ACTIVE` before it
    is passed on. Upstream idleness is then ignored (the filter decides from
    the rows it sees); without `idle_after` it is passed through.
    """

    def __init__(self, node: Node, inputs: Sequence[EdgeInfo]) -> None:
        super().__init__(node, inputs)
        transform = node.transform
        assert isinstance(transform, WithWatermark)
        self.column = transform.column
        self.function = transform.watermark_function(inputs[0].schema)
        self.lateness = transform.lateness_units(inputs[0].schema, node.label)
        self.per_event = transform.emit == "event"
        self.wm: int | None = None
        self.upstream: Any = None
        self.max_time: int | None = None
        self.late_count = 0
        self.invalid_count = 0
        self.idle_after = transform.idle_epochs(node.label)
        self.empty_epochs = 0
        self.saw_rows = False
        self.paused = False
        """Set by the executor for an epoch in which it held this filter's sources back."""

    def on_chunk(self, port: int, chunk: Chunk) -> list[Message]:
        out: list[Message] = []
        if self.idle_after is not None:
            self.saw_rows = True
            out += self.status(False)
        times = chunk.columns[self.column]
        if None in times:
            keep = [t is not None for t in times]
            kept = sum(keep)
            self.invalid_count += chunk.size - kept
            if INVALID in self.sides:
                dropped = chunk.compress([not k for k in keep], chunk.size - kept)
                out.append(SideRows(INVALID, dropped))
            chunk = chunk.compress(keep, kept)
            times = chunk.columns[self.column]
            if not kept:
                return out
        if self.per_event:
            return out + self._per_event(chunk, times)
        wm = self.wm
        if wm is not None and min(times) < wm:
            keep = [t >= wm for t in times]
            kept = sum(keep)
            late = chunk.size - kept
            self.late_count += late
            if LATE in self.sides:
                out.append(self._late(chunk.compress([not k for k in keep], late), [wm] * late))
            if not kept:
                return out
            chunk = chunk.compress(keep, kept)
            times = chunk.columns[self.column]
        top = max(times)
        if self.max_time is None or top > self.max_time:
            self.max_time = top
        out.append(chunk)
        return out

    @staticmethod
    def _late(rows: Chunk, marks: list[Any]) -> SideRows:
        rows.columns[LATE_WATERMARK] = marks
        return SideRows(LATE, rows)

    def _per_event(self, chunk: Chunk, times: list[int]) -> list[Message]:
        out: list[Message] = []
        wm, function = self.wm, self.function
        kept: list[int] = []
        late: list[int] = []
        marks: list[int] = []
        for index, t in enumerate(times):
            if wm is not None and t < wm:
                self.late_count += 1
                if LATE in self.sides:
                    late.append(index)
                    marks.append(wm)
                continue
            kept.append(index)
            candidate = function(t)
            if wm is None or candidate > wm:
                out.append(chunk.take(kept))
                kept = []
                wm = candidate
                out.extend(self._raise(wm))
        if kept:
            out.append(chunk.take(kept))
        if late:
            out.append(self._late(chunk.take(late), marks))
        self.wm = wm
        return out

    def _raise(self, wm: int) -> list[Message]:
        self.wm = wm
        upstream = self.upstream
        return self.watermarks([(self.column, wm if upstream is None else max(wm, upstream))])

    def on_barrier(self, epoch: int) -> list[Message]:
        out = self._idleness() if self.idle_after is not None else []
        if self.max_time is None:
            return out
        wm = self.wm
        if not self.per_event:
            candidate = self.function(self.max_time)
            if wm is None or candidate > wm:
                wm = candidate
        if wm is None:
            return out
        return self._raise(wm) + out  # emits only what raises the output (after a rescale, the wm)

    @staticmethod
    def agree(units: Sequence[WatermarkFilter]) -> None:
        """The units of one filter at a barrier, before any of them runs `on_barrier`.

        Every unit takes what all of them saw in the epoch: whether any saw a
        row (for `idle_after`) and, with `emit="periodic"`, the largest event
        time (so all raise the same watermark; with `emit="event"` each keeps
        its own).
        """
        saw = any(unit.saw_rows for unit in units)
        top = highest_of(unit.max_time for unit in units)
        for unit in units:
            unit.saw_rows = saw
            if not unit.per_event:
                unit.max_time = top

    def _idleness(self) -> list[Message]:
        """Count this epoch as empty or not; `IDLE` once `idle_after` empty epochs ran.

        An epoch with rows makes the output `ACTIVE` (with units: one that saw
        no row itself, while another unit of the filter did).
        """
        assert self.idle_after is not None
        saw, self.saw_rows = self.saw_rows, False
        if saw:
            self.empty_epochs = 0
            return self.status(False)
        if not self.paused:
            self.empty_epochs += 1
        if self.empty_epochs >= self.idle_after:
            return self.status(True)
        return []

    def on_status(self, port: int, status: Idleness) -> list[Message]:
        return [] if self.idle_after is not None else super().on_status(port, status)

    def estimate_of(self, column: str, value: Any) -> Any:
        """On `column`: the filter's estimate `wm + allowed_lateness` (`E = floor_to_ms(max) -
        delay`), or the upstream one where larger; other columns pass theirs through."""
        if column != self.column:
            return super().estimate_of(column, value)
        own = None if self.wm is None else self.wm + self.lateness
        upstream = self._estimates_in.get((0, column))
        present = [mark for mark in (own, upstream, value) if mark is not None]
        return max(present)

    def on_watermark(self, port: int, watermark: Watermark) -> list[Message]:
        if watermark.column != self.column:
            return self.watermarks(self.derive(watermark.column, watermark.value))
        self.upstream = watermark.value
        own = self.wm
        return self.watermarks(
            [(self.column, self.upstream if own is None else max(own, self.upstream))]
        )

    def snapshot(self) -> tuple[Any, ...]:
        return (
            self.wm,
            self.upstream,
            self.max_time,
            self.late_count,
            self.invalid_count,
            self.empty_epochs,
        )

    def restore(self, state: tuple[Any, ...]) -> None:
        (
            self.wm,
            self.upstream,
            self.max_time,
            self.late_count,
            self.invalid_count,
            self.empty_epochs,
        ) = state

    def rescale(self, states: Sequence[Any], units: int, owner: Owner) -> list[Any]:
        wm = highest_of(state[0] for state in states)
        upstream = lowest_of(state[1] for state in states)
        max_time = highest_of(state[2] for state in states)
        late = sum(state[3] for state in states)
        invalid = sum(state[4] for state in states)
        empty = min(state[5] for state in states)  # the same in every unit (`agree`)
        return [
            (wm, upstream, max_time, late if unit == 0 else 0, invalid if unit == 0 else 0, empty)
            for unit in range(units)
        ]
