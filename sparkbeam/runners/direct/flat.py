"""Direct operator for `FlatMap` (rules in `transforms.flat`; `Partition` is composed of
`Map`, `Filter` and `Select`)."""

from __future__ import annotations

from collections.abc import Sequence

from sparkbeam.graph import EdgeInfo, Node
from sparkbeam.runners.direct.operator import Chunk, Message, Operator
from sparkbeam.schema import Row, columns_to_rows, rows_to_columns
from sparkbeam.transforms.elementwise import broken_keeps
from sparkbeam.transforms.flat import FlatMap, flat_rows


class FlatMapOperator(Operator):
    def __init__(self, node: Node, inputs: Sequence[EdgeInfo]) -> None:
        super().__init__(node, inputs)
        assert isinstance(node.transform, FlatMap)
        self.fn = node.transform.fn
        self.keeps = node.transform.keeps
        self.in_schema = inputs[0].schema
        self.out_schema = node.info.schema

    def on_chunk(self, port: int, chunk: Chunk) -> list[Message]:
        fn, label = self.fn, self.label
        rows: list[Row] = []
        sources: list[int] = []
        for i, row in enumerate(columns_to_rows(chunk.columns, self.in_schema)):
            out = flat_rows(fn, row, label)
            rows += out
            sources += [i] * len(out)
        if not rows:
            return []
        columns = rows_to_columns(rows, self.out_schema, f"{label} output")
        schemas = (self.in_schema, self.out_schema)
        error = broken_keeps(label, self.keeps, chunk.columns, columns, schemas, sources)
        if error is not None:
            raise error
        return [Chunk(columns, len(rows))]
