"""Beam's element-wise family beyond `Map`: `FlatMap` and `Partition`.

Watermark rules:
- `FlatMap` keeps the watermarks of the columns it declares in `keeps` (it
  promises each output row holds its input row's values there; the direct
  runner checks the promise through invariant W) and drops all others, as `Map`.
- `Partition` keeps every watermark on every output, as `Filter`: each output
  is the input with some rows removed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sparkbeam.errors import DataError, PipelineError, described
from sparkbeam.graph import PTransform, init_fields, input_node
from sparkbeam.schema import Row, Schema
from sparkbeam.transforms.elementwise import Filter, Map, RowFunction, Select

if TYPE_CHECKING:
    from sparkbeam.pipeline import PCollection


@dataclass(frozen=True, eq=False, init=False)
class FlatMap(RowFunction):
    """Apply `fn` to each row (a dict) to get zero or more output rows (an iterable of dicts).

    The output schema is `schema` when given, else the input's. `keeps` names
    the columns every output row copies from its input row; their watermarks
    pass through, all others are dropped.

    Args:
        fn: The function, from a row (a dict) to an iterable of rows.
        schema: The output's column names and types; the input's when omitted.
        keeps: Columns every output row copies from its input row: their
            watermarks are kept.
    """

    def __init__(
        self,
        fn: Callable[[Row], Iterable[Row]],
        schema: Schema | Mapping[str, Any] | None = None,
        keeps: Sequence[str] = (),
    ) -> None:
        super().__init__(fn, schema, keeps)


def flat_rows(fn: Callable[[Row], Iterable[Row]], row: Row, label: str) -> list[Row]:
    """The rows `fn` gives for `row`, as a list; `DataError` naming `label` and the row when
    `fn` raises or returns something that is not an iterable of rows."""
    try:
        out = fn(row)
    except Exception as exc:
        raise DataError(
            f"{label}: the function raised {described(exc)} on row {row!r}", row
        ) from exc
    if isinstance(out, (Mapping, str, bytes)) or not isinstance(out, Iterable):
        raise DataError(
            f"{label}: the function returned {out!r} for row {row!r}; return an iterable of "
            "row dicts (a list, or yield them), [] for none",
            row,
        )
    try:
        return list(out)
    except Exception as exc:  # a generator that raises part way
        raise DataError(
            f"{label}: the function raised {described(exc)} on row {row!r}", row
        ) from exc


PARTITION_COLUMN = "__sparkbeam_partition"
"""The hidden column `Partition` computes each row's output index into, once per row."""


@dataclass(frozen=True)
class PartitionIndex:
    """The row with its output index: `fn(row, n)`, checked to be an integer in `[0, n)`."""

    fn: Callable[[Row, int], int]
    n: int
    label: str

    def __call__(self, row: Row) -> Row:
        index = self.fn(row, self.n)
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < self.n:
            raise DataError(
                f"{self.label}: fn returned {index!r} for row {row!r}; it must return an "
                f"integer in [0, {self.n})",
                row,
            )
        return {**row, PARTITION_COLUMN: index}


@dataclass(frozen=True)
class InPartition:
    """Whether a row's output index (`PARTITION_COLUMN`) is `index`."""

    index: int

    def __call__(self, row: Row) -> bool:
        return bool(row[PARTITION_COLUMN] == self.index)


@dataclass(frozen=True, eq=False, init=False)
class Partition(PTransform):
    """Split rows among `n` outputs: `fn(row, n)` gives each row's output, in `[0, n)`.

    Applying it gives a tuple of `n` PCollections, each with the input's schema
    and every watermark of the input (removing rows never breaks a promise).
    `fn` is called once per row on the direct runner; Spark may call it again
    for each output it computes, so it should be deterministic.

    Args:
        fn: Called as `fn(row, n)`; returns the output (`0` to `n - 1`) of the row.
        n: How many outputs.
    """

    fn: Callable[[Row, int], int]
    n: int

    def __init__(self, fn: Callable[[Row, int], int], n: int) -> None:
        if not callable(fn):
            raise PipelineError(f"Partition: fn must be callable, got {fn!r}")
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise PipelineError(
                f"Partition: n={n!r}{' is a bool' if isinstance(n, bool) else ''}; n is the "
                "number of outputs, a whole number at least 1 (sb.Partition(fn, 2))"
            )
        init_fields(self, fn, n)

    def default_label(self) -> str:
        return f"Partition({getattr(self.fn, '__name__', 'fn')})"

    def expand(self, *inputs: PCollection) -> tuple[PCollection, ...]:  # type: ignore[override]
        """Each row's index once (a `Map` keeping every column), then one `Filter` and `Select`
        per output: composed of primitives, so every runner runs it as they run those."""
        if len(inputs) != 1:
            raise PipelineError(
                f"{self.default_label()}: applied to {len(inputs)} inputs; apply it to one "
                "PCollection: pcoll | sb.Partition(fn, n) (not to the pipeline)"
            )
        (source,) = inputs
        input_node(source, self.default_label())
        names = source.schema.names
        if PARTITION_COLUMN in names:
            raise PipelineError(
                f"{self.default_label()}: the input has a column named {PARTITION_COLUMN!r}, "
                "which Partition uses; rename it"
            )
        indexed = source | "index" >> Map(
            PartitionIndex(self.fn, self.n, self.default_label()),
            schema=source.schema.with_columns((PARTITION_COLUMN, int)),
            keeps=names,
        )
        return tuple(
            indexed
            | f"output {i}" >> Filter(InPartition(i))
            | f"output {i} columns" >> Select(*names)
            for i in range(self.n)
        )
