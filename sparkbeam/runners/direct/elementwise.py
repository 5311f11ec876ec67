"""Direct operators for `Map`, `Filter` and `Select` (rules in `transforms.elementwise`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sparkbeam.errors import DataError, described
from sparkbeam.graph import EdgeInfo, Node
from sparkbeam.runners.direct.operator import Chunk, Message, Operator
from sparkbeam.schema import Row, Schema, columns_to_rows, rows_to_columns
from sparkbeam.transforms.elementwise import Filter, Map, Select, broken_keeps
from sparkbeam.transforms.expressions import BoundExpr, RowError, take


def _call(fn: Callable[[Row], Any], row: Row, label: str) -> Any:
    try:
        return fn(row)
    except Exception as exc:
        raise DataError(
            f"{label}: the function raised {described(exc)} on row {row!r}", row
        ) from exc


class MapOperator(Operator):
    def __init__(self, node: Node, inputs: Sequence[EdgeInfo]) -> None:
        super().__init__(node, inputs)
        assert isinstance(node.transform, Map)
        self.transform = node.transform
        self.in_schema = inputs[0].schema
        self.out_schema = node.info.schema

    def on_chunk(self, port: int, chunk: Chunk) -> list[Message]:
        fn, label = self.transform.fn, self.label
        rows = [_call(fn, row, label) for row in columns_to_rows(chunk.columns, self.in_schema)]
        columns = rows_to_columns(rows, self.out_schema, f"{label} output")
        schemas = (self.in_schema, self.out_schema)
        error = broken_keeps(label, self.transform.keeps, chunk.columns, columns, schemas)
        if error is not None:
            raise error
        return [Chunk(columns, len(rows))]


def evaluate(bound: BoundExpr, chunk: Chunk, schema: Schema, label: str) -> list[Any]:
    """`bound`'s values for a chunk; a value that cannot be computed is a `DataError` naming
    the transform and the row."""
    try:
        return bound.evaluate(chunk.columns, chunk.size)
    except RowError as error:
        row = columns_to_rows(take(chunk.columns, [error.index]), schema)[0]
        raise DataError(f"{label}: {error.message}. The row: {row!r}", row) from None


class FilterOperator(Operator):
    def __init__(self, node: Node, inputs: Sequence[EdgeInfo]) -> None:
        super().__init__(node, inputs)
        assert isinstance(node.transform, Filter)
        self.predicate = node.transform.predicate
        self.schema = inputs[0].schema
        self.bound = node.transform.bind(self.schema, node.label)

    def on_chunk(self, port: int, chunk: Chunk) -> list[Message]:
        predicate, label = self.predicate, self.label
        if self.bound is not None:
            keep = [v is True for v in evaluate(self.bound, chunk, self.schema, label)]
        else:
            assert callable(predicate)
            keep = [
                bool(_call(predicate, row, label))
                for row in columns_to_rows(chunk.columns, self.schema)
            ]
        kept = sum(keep)
        if kept == chunk.size:
            return [chunk]
        return [chunk.compress(keep, kept)] if kept else []


class SelectOperator(Operator):
    def __init__(self, node: Node, inputs: Sequence[EdgeInfo]) -> None:
        super().__init__(node, inputs)
        assert isinstance(node.transform, Select)
        self.transform = node.transform
        self.schema = inputs[0].schema
        self.bound = node.transform.bind(self.schema, node.label)

    def on_chunk(self, port: int, chunk: Chunk) -> list[Message]:
        schema, label = self.schema, self.label
        columns = {name: evaluate(expr, chunk, schema, label) for name, expr in self.bound}
        return [Chunk(columns, chunk.size)]
