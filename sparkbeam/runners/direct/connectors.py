"""Direct operator for `ForEachBatch` (rules in `transforms.connectors`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sparkbeam.graph import EdgeInfo, Node
from sparkbeam.runners.direct.operator import Chunk, Message, Operator, Owner
from sparkbeam.schema import columns_to_rows
from sparkbeam.transforms.connectors import ForEachBatch, call_batch


class ForEachBatchOperator(Operator):
    """Calls the function with the rows of each epoch (batch id = epoch), then of the flush.

    With parallel units it runs as one unit behind an exchange that gathers
    every row, so each batch is one call. Checkpoint: the rows of the epoch
    under way and the next batch id.
    """

    def __init__(self, node: Node, inputs: Sequence[EdgeInfo]) -> None:
        super().__init__(node, inputs)
        transform = node.transform
        assert isinstance(transform, ForEachBatch)
        self.fn = transform.fn
        self.chunks: list[Chunk] = []
        self.next_batch = 0

    def on_chunk(self, port: int, chunk: Chunk) -> list[Message]:
        self.chunks.append(chunk)
        return [chunk]

    def on_barrier(self, epoch: int) -> list[Message]:
        self._call(epoch)
        return []

    def on_end(self) -> list[Message]:
        self._call(self.next_batch)
        return []

    def _call(self, batch_id: int) -> None:
        chunks, self.chunks = self.chunks, []
        self.next_batch = batch_id + 1
        schema = self.node.info.schema
        rows = [row for chunk in chunks for row in columns_to_rows(chunk.columns, schema)]
        if rows:
            call_batch(self.fn, rows, batch_id, self.label)

    def snapshot(self) -> tuple[list[Chunk], int]:
        return list(self.chunks), self.next_batch

    def restore(self, state: tuple[list[Chunk], int]) -> None:
        self.chunks, self.next_batch = list(state[0]), state[1]

    def rescale(self, states: Sequence[Any], units: int, owner: Owner) -> list[Any]:
        kept = [chunk for state in states for chunk in state[0]]
        batch = max(state[1] for state in states)
        return [(kept, batch)] + [([], batch) for _ in range(units - 1)]
