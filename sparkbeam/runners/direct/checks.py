"""The invariant checked on every edge of the direct runner.

Invariant W (SPEC section 2): after `Watermark(c, t)` on an edge, every later
row `d` on that edge has `d[c] >= t`, and watermark values on one column of
one edge never decrease. A violation raises `InvariantViolation` naming the
transform that produced the edge, the column, the watermark and the row.
"""

from __future__ import annotations

from typing import Any

from sparkbeam.errors import InvariantViolation
from sparkbeam.messages import Watermark
from sparkbeam.runners.direct.operator import Chunk
from sparkbeam.schema import Schema, to_external


class EdgeCheck:
    """Invariant W on one edge."""

    __slots__ = ("label", "schema", "watermarks")

    def __init__(self, label: str, schema: Schema) -> None:
        self.label = label
        self.schema = schema
        self.watermarks: dict[str, Any] = {}

    def _show(self, column: str, value: Any) -> Any:
        convert = to_external(self.schema.type_of(column))
        return convert([value])[0] if convert else value

    def watermark(self, watermark: Watermark) -> None:
        column, value = watermark.column, watermark.value
        last = self.watermarks.get(column)
        if last is not None and value < last:
            raise InvariantViolation(
                f"invariant W broken on the output of {self.label}: the watermark on "
                f"{column!r} went back from {self._show(column, last)!r} to "
                f"{self._show(column, value)!r}"
            )
        self.watermarks[column] = value

    def chunk(self, chunk: Chunk) -> None:
        for column, mark in self.watermarks.items():
            values = chunk.columns[column]
            try:
                if min(values) >= mark:
                    continue
            except TypeError:  # a None among the values
                pass
            for index, value in enumerate(values):
                if value is None or value < mark:
                    row = {name: self._show(name, v) for name, v in chunk.row(index).items()}
                    raise InvariantViolation(
                        f"invariant W broken on the output of {self.label}: row {row!r} has "
                        f"{column} = {self._show(column, value)!r}, below the watermark "
                        f"Watermark({column!r}, {self._show(column, mark)!r}) before it"
                    )
