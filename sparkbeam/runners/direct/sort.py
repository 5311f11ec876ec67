"""Direct operator for `Sort` (rules in `transforms.sort`)."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from itertools import chain
from operator import itemgetter
from typing import Any

from sparkbeam.graph import EdgeInfo, Node
from sparkbeam.messages import Watermark
from sparkbeam.runners.direct.operator import Chunk, Message, Operator, Owner
from sparkbeam.runners.direct.windows import require_times
from sparkbeam.transforms.sort import Sort

Row = tuple[Any, ...]


class Run:
    """The held rows of one chunk, by time (ties in arrival order), from `start` on."""

    __slots__ = ("rows", "start", "times")

    def __init__(self, rows: list[Row], times: list[Any]) -> None:
        self.rows = rows
        self.times = times
        self.start = 0

    def __len__(self) -> int:
        return len(self.rows) - self.start

    def release(self, mark: Any) -> list[Row]:
        """The rows with time `< mark`, forgotten here."""
        start = self.start
        stop = bisect_left(self.times, mark, start)
        if stop == start:
            return []
        released = self.rows[start:stop]
        if 2 * stop > len(self.rows):  # drop what was released, now and then
            del self.rows[:stop], self.times[:stop]
            stop = 0
        self.start = stop
        return released


class SortOperator(Operator):
    """State: the held rows as runs, one per chunk, each sorted by time in arrival order.

    `W(col, wm)` releases the rows below `wm` of every run and merges them by
    time (a stable sort, with the runs in arrival order: ties keep their
    arrival order). One order over all keys gives the global order, which is
    also the order within each key. Each row is sorted about twice (into its
    run, then in the merge of the released parts, which Python's sort merges
    as the sorted runs they are), so a watermark costs what it releases plus a
    binary search per run.

    Checkpoint: the held rows in `(time, arrival)` order, numbered. Rescale
    (a `Sort` with keys): each row goes to the unit that owns its key; rows
    merged from several old units are renumbered in `(time, old unit,
    arrival)` order (ties across units have no arrival order to keep). A
    `Sort` without keys runs as one unit and is never split.
    """

    def __init__(self, node: Node, inputs: Sequence[EdgeInfo]) -> None:
        super().__init__(node, inputs)
        assert isinstance(node.transform, Sort)
        self.transform = node.transform
        self.names = list(inputs[0].schema.names)
        self.position = self.names.index(node.transform.column)
        self.time_of = itemgetter(self.position)
        self.key_positions = [self.names.index(key) for key in node.transform.keys]
        self.runs: list[Run] = []

    def on_chunk(self, port: int, chunk: Chunk) -> list[Message]:
        require_times(self, chunk, self.transform.column)
        rows = sorted(
            zip(*(chunk.columns[name] for name in self.names), strict=True), key=self.time_of
        )
        self.runs.append(Run(rows, list(map(self.time_of, rows))))
        return []

    def on_watermark(self, port: int, watermark: Watermark) -> list[Message]:
        out: list[Message] = []
        if watermark.column == self.transform.column:
            rows = self._release(watermark.value)
            if rows:
                out.append(self._chunk(rows))
        return out + self.watermarks(self.derive(watermark.column, watermark.value))

    def _release(self, mark: Any) -> list[Row]:
        """The held rows with time `< mark` (all of them for None), in order."""
        parts = [run.rows[run.start :] if mark is None else run.release(mark) for run in self.runs]
        parts = [part for part in parts if part]
        self.runs = [] if mark is None else [run for run in self.runs if len(run)]
        if len(parts) == 1:
            return parts[0]
        return sorted(chain.from_iterable(parts), key=self.time_of)

    def on_end(self) -> list[Message]:
        rows = self._release(None)
        return [self._chunk(rows)] if rows else []

    def _chunk(self, rows: list[Row]) -> Chunk:
        return Chunk(
            {name: list(map(itemgetter(i), rows)) for i, name in enumerate(self.names)}, len(rows)
        )

    def state_size(self) -> int:
        return sum(len(run) for run in self.runs)

    def snapshot(self) -> list[tuple[Any, int, Row]]:
        held = sorted(
            chain.from_iterable(run.rows[run.start :] for run in self.runs), key=self.time_of
        )
        return [(row[self.position], arrival, row) for arrival, row in enumerate(held)]

    def restore(self, state: list[tuple[Any, int, Row]]) -> None:
        rows = [row for _, _, row in sorted(state, key=_time_and_arrival)]
        self.runs = [Run(rows, list(map(self.time_of, rows)))] if rows else []

    def rescale(self, states: Sequence[Any], units: int, owner: Owner) -> list[Any]:
        moved: list[list[tuple[Any, int, int, Row]]] = [[] for _ in range(units)]
        positions = self.key_positions
        for old, state in enumerate(states):
            for t, arrival, row in state:
                moved[owner(tuple(row[i] for i in positions))].append((t, old, arrival, row))
        return [
            [(t, number, row) for number, (t, _, _, row) in enumerate(sorted(rows, key=_order))]
            for rows in moved
        ]


def _time_and_arrival(entry: tuple[Any, int, Row]) -> tuple[Any, int]:
    return entry[0], entry[1]


def _order(entry: tuple[Any, int, int, Row]) -> tuple[Any, int, int]:
    return entry[0], entry[1], entry[2]
