"""User Python on Spark: `Map`, `FlatMap`, `Filter` and user `CombineFn`s, vectorised through Arrow.

Rows cross into the Python worker as Arrow record batches (`mapInArrow`,
`applyInArrow`), become the same dicts the direct runner gives the user's
function (datetimes as naive UTC), and go back as Arrow. The cost is the
Python call per row plus the dict conversion: about what the direct runner
pays, spread over Spark's executors.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql import Column
from pyspark.sql import functions as F

from sparkbeam.arrow import batch_of, from_arrow
from sparkbeam.errors import DataError, PipelineError, described, unexpected
from sparkbeam.runners.shared.accumulators import accumulators_for
from sparkbeam.runners.spark.session.engine_errors import DATA_ERROR_MARK, PIPELINE_ERROR_MARK
from sparkbeam.schema import Columns, Row, Schema, columns_to_rows, rows_to_columns
from sparkbeam.transforms.elementwise import broken_keeps
from sparkbeam.transforms.flat import flat_rows


def fail_when(condition: Column, value: Column, label: str, schema: Schema, message: str) -> Column:
    """`value`, or where `condition` holds a `DataError` raised in the job, marked for the
    driver (`DATA_ERROR_MARK`): "`label`: `message`. The row: " and the row as JSON."""
    row = F.to_json(F.struct(*[F.col(name) for name in schema.names]))
    text = F.concat(F.lit(f"{DATA_ERROR_MARK}{label}: {message}. The row: "), row)
    return F.when(condition, F.raise_error(text)).otherwise(value)


@contextlib.contextmanager
def guarded(label: str) -> Iterator[None]:
    """In a Python worker: an exception that is not a `DataError` (sparkbeam's own code
    failing, not the user's function, whose errors `_call` makes `DataError`s) marked as a
    `PipelineError` naming the transform, for the driver to find (`engine_errors`)."""
    try:
        yield
    except DataError as exc:
        if str(exc).startswith(DATA_ERROR_MARK):
            raise
        raise DataError(f"{DATA_ERROR_MARK}{exc}", exc.row) from exc
    except Exception as exc:
        raise PipelineError(f"{PIPELINE_ERROR_MARK}{unexpected(label, exc)}") from exc


def _call(fn: Callable[[Row], Any], row: Row, label: str) -> Any:
    try:
        return fn(row)
    except Exception as exc:
        raise DataError(
            f"{DATA_ERROR_MARK}{label}: the function raised {described(exc)} on row {row!r}"
        ) from exc


def _rows(batch: pa.RecordBatch, schema: Schema) -> list[Row]:
    return columns_to_rows(from_arrow(batch, schema), schema)


def _check_keeps(
    label: str,
    keeps: tuple[str, ...],
    before: Columns,
    after: Columns,
    schemas: tuple[Schema, Schema],
    sources: list[int] | None = None,
) -> None:
    error = broken_keeps(label, keeps, before, after, schemas, sources)
    if error is not None:
        raise DataError(f"{DATA_ERROR_MARK}{error}", error.row)


def map_batches(
    fn: Callable[[Row], Row],
    in_schema: Schema,
    out_schema: Schema,
    label: str,
    keeps: tuple[str, ...] = (),
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """`fn` on every row; a broken `keeps` promise is a `DataError`, as on the direct runner."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            with guarded(label):
                before = from_arrow(batch, in_schema)
                rows = [_call(fn, row, label) for row in columns_to_rows(before, in_schema)]
                try:
                    columns = rows_to_columns(rows, out_schema, f"{label} output")
                except DataError as exc:
                    raise DataError(f"{DATA_ERROR_MARK}{exc}") from None
                _check_keeps(label, keeps, before, columns, (in_schema, out_schema))
                out = batch_of(columns, out_schema, label)
            yield out

    return run


def flat_map_batches(
    fn: Callable[[Row], Any],
    in_schema: Schema,
    out_schema: Schema,
    label: str,
    keeps: tuple[str, ...] = (),
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            with guarded(label):
                before = from_arrow(batch, in_schema)
                rows: list[Row] = []
                sources: list[int] = []
                try:
                    for i, row in enumerate(columns_to_rows(before, in_schema)):
                        out = flat_rows(fn, row, label)
                        rows += out
                        sources += [i] * len(out)
                    columns = rows_to_columns(rows, out_schema, f"{label} output")
                except DataError as exc:
                    raise DataError(f"{DATA_ERROR_MARK}{exc}") from None
                _check_keeps(label, keeps, before, columns, (in_schema, out_schema), sources)
                made = batch_of(columns, out_schema, label)
            yield made

    return run


def filter_batches(
    predicate: Callable[[Row], bool], schema: Schema, label: str
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            with guarded(label):
                keep = [bool(_call(predicate, row, label)) for row in _rows(batch, schema)]
                kept = batch.filter(pa.array(keep, type=pa.bool_()))
            yield kept

    return run


def combine_groups(
    keys: tuple[str, ...],
    aggregates: tuple[tuple[str, Any], ...],
    in_schema: Schema,
    out_schema: Schema,
    label: str,
) -> Callable[[pa.Table], pa.Table]:
    """One group's output row, every aggregate computed in Python.

    Used when a `CombinePerKey` has a user `CombineFn`; its built-in
    aggregates then use the direct runner's accumulators, so both runners
    compute them alike.
    """

    def run(table: pa.Table) -> pa.Table:
        columns = from_arrow(table, in_schema)
        group = [0] * table.num_rows
        out: Columns = {key: columns[key][:1] for key in keys}
        for name, aggregate in aggregates:
            where = f"{label} {name}"
            accumulators = accumulators_for(aggregate, in_schema, out_schema.type_of(name), where)
            try:
                accumulators.add(group, columns)
                out[name] = [accumulators.pop(0)]
            except DataError as exc:
                raise DataError(f"{DATA_ERROR_MARK}{exc}") from exc
            except Exception as exc:
                raise DataError(
                    f"{DATA_ERROR_MARK}{label}: aggregate {name} raised {exc!r}"
                ) from exc
        try:
            return pa.Table.from_batches([batch_of(out, out_schema, label)])
        except DataError as exc:
            raise DataError(f"{DATA_ERROR_MARK}{exc}") from None

    return run
