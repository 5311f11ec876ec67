"""Direct operator for `Sort` (rules in `transforms.sort`)."""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from itertools import count
from typing import Any

from sparkbeam.graph import EdgeInfo, Node
from sparkbeam.messages import Watermark
from sparkbeam.runners.direct.operator import Chunk, Message, Operator
from sparkbeam.transforms.sort import Sort


class SortOperator(Operator):
    """State: a heap of `(time, arrival, row)`; a watermark pops the rows below it, in order.

    One heap over all keys gives the global order, which is also the order
    within each key.
    """

    def __init__(self, node: Node, inputs: Sequence[EdgeInfo]) -> None:
        super().__init__(node, inputs)
        assert isinstance(node.transform, Sort)
        self.transform = node.transform
        self.names = list(inputs[0].schema.names)
        self.position = self.names.index(node.transform.column)
        self.heap: list[tuple[Any, int, tuple[Any, ...]]] = []
        self.arrivals = count()

    def on_chunk(self, port: int, chunk: Chunk) -> list[Message]:
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
