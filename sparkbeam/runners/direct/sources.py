"""Direct operators for `Create` and `TestStream`: rows are checked and turned into chunks."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sparkbeam.graph import EdgeInfo, Node
from sparkbeam.runners.direct.operator import Chunk, SourceOperator
from sparkbeam.schema import Row, rows_to_columns
from sparkbeam.transforms.sources import Create, TestStreamSource

CHUNK_ROWS = 8192
"""Rows per chunk a source emits: bounds the memory of converting a large input."""


def _chunks(rows: Sequence[Row], node: Node) -> Iterable[Chunk]:
    schema = node.info.schema
    for start in range(0, len(rows), CHUNK_ROWS):
        part = rows[start : start + CHUNK_ROWS]
        yield Chunk(rows_to_columns(part, schema, node.label), len(part))


class CreateOperator(SourceOperator):
    """`Create`: all rows in epoch 0."""

    def __init__(self, node: Node, inputs: Sequence[EdgeInfo]) -> None:
        super().__init__(node, inputs)
        assert isinstance(node.transform, Create)
        self.rows = node.transform.rows

    def epoch(self, epoch: int) -> Iterable[Chunk]:
        return _chunks(self.rows, self.node) if epoch == 0 else ()


class TestStreamOperator(SourceOperator):
    """`TestStream`: epoch `i` of the stream in the pipeline's epoch `i`, then idle.

    Every epoch's rows are checked when the operator is made, as the pipeline
    starts: a bad row in the last epoch is a `DataError` before the first
    epoch runs (as on Spark).
    """

    __test__ = False

    def __init__(self, node: Node, inputs: Sequence[EdgeInfo]) -> None:
        super().__init__(node, inputs)
        assert isinstance(node.transform, TestStreamSource)
        self.epochs = node.transform.epochs
        self.epoch_count = len(self.epochs)
        for rows in self.epochs:
            rows_to_columns(rows, node.info.schema, node.label)

    def epoch(self, epoch: int) -> Iterable[Chunk]:
        return _chunks(self.epochs[epoch], self.node) if epoch < len(self.epochs) else ()
