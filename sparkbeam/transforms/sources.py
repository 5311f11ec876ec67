"""Inputs: `Create` (bounded, one epoch) and `TestStream` (unbounded, a list of epochs).

Sources carry no watermark: watermarks come from `WithWatermark`. End of a
bounded input is end of input for the whole stream (every watermark to +inf).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sparkbeam.errors import PipelineError
from sparkbeam.graph import EdgeInfo, PrimitiveTransform, init_fields
from sparkbeam.schema import Row, Schema, infer_schema

SchemaSpec = Schema | Mapping[str, Any] | Sequence[tuple[str, Any]]


def _schema_for(rows: Iterable[Mapping[str, Any]], schema: SchemaSpec | None, label: str) -> Schema:
    return infer_schema(rows, label) if schema is None else Schema.of(schema, label)


def _rows(rows: object, label: str) -> tuple[Row, ...]:
    if isinstance(rows, (str, bytes, Mapping)) or not isinstance(rows, Iterable):
        raise PipelineError(f"{label}: give rows as a list of dicts, got {type(rows).__name__}")
    return tuple(rows)


@dataclass(frozen=True, eq=False, init=False)
class Create(PrimitiveTransform):
    """Bounded input: the rows (dicts) arrive as one epoch.

    The schema is inferred from the rows (columns in order of first
    appearance) unless `schema` is given. Rows are checked against it when the
    pipeline runs (`DataError` names the row).

    Args:
        rows: The rows, each a dict of column name to value.
        schema: Column names and types (a dict such as `{"t": datetime, "v": int}`
            or a `Schema`); inferred from the rows when omitted.
    """

    rows: tuple[Row, ...]
    schema: Schema | None

    def __init__(self, rows: Iterable[Row], schema: SchemaSpec | None = None) -> None:
        schema = None if schema is None else Schema.of(schema, "Create")
        init_fields(self, _rows(rows, "Create"), None if schema is None else Schema.of(schema))

    def infer(self, inputs: Sequence[EdgeInfo], label: str) -> EdgeInfo:
        if inputs:
            raise PipelineError(f"{label}: Create is a source; apply it to the pipeline")
        return EdgeInfo(_schema_for(self.rows, self.schema, label), bounded=True)

    def parameters(self) -> tuple[tuple[str, str], ...]:
        return (("rows", str(len(self.rows))),)


class TestStream(PrimitiveTransform):
    """Unbounded input given as a list of epochs: `TestStream().add_epoch(rows)...`.

    A builder, as in Beam: `add_epoch` appends and returns the same object.
    Applying it takes a frozen snapshot (`TestStreamSource`), so epochs added
    afterwards do not change a pipeline already built.

    Args:
        schema: Column names and types (a dict or a `Schema`); inferred from the
            rows of the epochs when omitted.
    """

    __test__ = False  # not a pytest test class

    def __init__(self, schema: SchemaSpec | None = None) -> None:
        self.schema = None if schema is None else Schema.of(schema, "TestStream")
        self.epochs: list[tuple[Row, ...]] = []

    def add_epoch(self, rows: Iterable[Row]) -> TestStream:
        """Append one epoch (one micro-batch) of rows; an empty list is an epoch with no rows."""
        self.epochs.append(_rows(rows, "TestStream.add_epoch"))
        return self

    def snapshot(self) -> PrimitiveTransform:
        return TestStreamSource(tuple(self.epochs), self.schema)

    def infer(self, inputs: Sequence[EdgeInfo], label: str) -> EdgeInfo:
        return self.snapshot().infer(inputs, label)


@dataclass(frozen=True, eq=False)
class TestStreamSource(PrimitiveTransform):
    """The frozen form of a `TestStream`: its epochs as they were when applied."""

    __test__ = False

    epochs: tuple[tuple[Row, ...], ...]
    schema: Schema | None

    def default_label(self) -> str:
        return "TestStream"

    def public_name(self) -> str:
        return "TestStream"

    def parameters(self) -> tuple[tuple[str, str], ...]:
        return (("epochs", str(len(self.epochs))),)

    def infer(self, inputs: Sequence[EdgeInfo], label: str) -> EdgeInfo:
        if inputs:
            raise PipelineError(f"{label}: TestStream is a source; apply it to the pipeline")
        all_rows = [row for epoch in self.epochs for row in epoch]
        return EdgeInfo(_schema_for(all_rows, self.schema, label), bounded=False)
