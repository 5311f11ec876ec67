"""Direct operator for `Sort` (rules in `transforms.sort`)."""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from itertools import count
from typing import Any

from sparkbeam.graph import EdgeInfo, Node
from sparkbeam.messages import Watermark
from sparkbeam.runners.direct.operator import Chunk, Message, Operator, Owner
from sparkbeam.runners.direct.windows import require_times
from sparkbeam.transforms.sort import Sort


class SortOperator(Operator):
    """State: a heap of `(time, arrival, row)`; a watermark pops the rows below it, in order.

    One heap over all keys gives the global order, which is also the order
    within each key.

    Checkpoint: the held rows with their arrival numbers. Rescale (a `Sort`
    with keys): each row goes to the unit that owns its key; rows merged from
    several old units are renumbered in `(time, old unit, arrival)` order (ties
    across units have no arrival order to keep). A `Sort` without keys runs
    as one unit and is never split.
    """

    def __init__(self, node: Node, inputs: Sequence[EdgeInfo]) -> None:
        super().__init__(node, inputs)
        assert isinstance(node.transform, Sort)
        self.transform = node.transform
        self.names = list(inputs[0].schema.names)
        self.position = self.names.index(node.transform.column)
        self.key_positions = [self.names.index(key) for key in node.transform.keys]
        self.heap: list[tuple[Any, int, tuple[Any, ...]]] = []
        self.arrivals = count()

    def on_chunk(self, port: int, chunk: Chunk) -> list[Message]:
        require_times(self, chunk, self.transform.column)
        heap, arrivals, position = self.heap, self.arrivals, self.position
        for row in zip(*(chunk.columns[name] for name in self.names), strict=True):
            heapq.heappush(heap, (row[position], next(arrivals), row))
        return []

    def on_watermark(self, port: int, watermark: Watermark) -> list[Message]:
        out: list[Message] = []
        if watermark.column == self.transform.column:
            heap, rows = self.heap, []
            while heap and heap[0][0] < watermark.value:
                rows.append(heapq.heappop(heap)[2])
            if rows:
                out.append(self._chunk(rows))
        return out + self.watermarks(self.transform.derive(watermark.column, watermark.value))

    def on_end(self) -> list[Message]:
        rows = [entry[2] for entry in sorted(self.heap)]
        self.heap.clear()
        return [self._chunk(rows)] if rows else []

    def _chunk(self, rows: list[tuple[Any, ...]]) -> Chunk:
        return Chunk.from_rows(self.names, rows)

    def state_size(self) -> int:
        return len(self.heap)

    def snapshot(self) -> list[tuple[Any, int, tuple[Any, ...]]]:
        return sorted(self.heap)

    def restore(self, state: list[tuple[Any, int, tuple[Any, ...]]]) -> None:
        self.heap = list(state)  # a sorted list is a heap
        self.arrivals = count(1 + max((entry[1] for entry in state), default=-1))

    def rescale(self, states: Sequence[Any], units: int, owner: Owner) -> list[Any]:
        moved: list[list[tuple[Any, int, int, tuple[Any, ...]]]] = [[] for _ in range(units)]
        positions = self.key_positions
        for old, state in enumerate(states):
            for t, arrival, row in state:
                moved[owner(tuple(row[i] for i in positions))].append((t, old, arrival, row))
        return [
            [(t, number, row) for number, (t, _, _, row) in enumerate(sorted(rows, key=_order))]
            for rows in moved
        ]


def _order(entry: tuple[Any, int, int, tuple[Any, ...]]) -> tuple[Any, int, int]:
    return entry[0], entry[1], entry[2]
