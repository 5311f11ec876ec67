"""Column types on Spark: `datetime` is `TIMESTAMP` (what Spark's watermarks need),
`int` is `LONG`. Rows cross into and out of Spark as Arrow (`sparkbeam.arrow`)."""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import types as T

from sparkbeam.paths import Paths
from sparkbeam.runners.spark import limits
from sparkbeam.schema import Schema, list_element, type_name
from sparkbeam.transforms.combine import AggregateFn, CombinePerKey
from sparkbeam.transforms.elementwise import RowFunction

_SPARK_TYPES: dict[type, T.DataType] = {
    _dt.datetime: T.TimestampType(),
    int: T.LongType(),
    float: T.DoubleType(),
    str: T.StringType(),
    bool: T.BooleanType(),
    bytes: T.BinaryType(),
}


def _spark_type(kind: type) -> T.DataType | None:
    """A column type's Spark type (a list column is an array); None for `object`."""
    element = list_element(kind)
    if element is not None:
        return T.ArrayType(_SPARK_TYPES[element], containsNull=True)
    return _SPARK_TYPES.get(kind)


def require_spark_types(schema: Schema, label: str, transform: object = None) -> None:
    """Refuse columns Spark cannot hold (type `object`), saying where `transform` (the node's
    that made the column, when known) takes its type."""
    for name, kind in schema.fields:
        if _spark_type(kind) is None:
            raise limits.OBJECT_COLUMN.error(
                label, column=name, kind=type_name(kind), declaration=_declaration(transform, name)
            )


def _declaration(transform: object, column: str) -> str:
    """Where the user gives `column` of `transform` its type, as what to write."""
    if isinstance(transform, CombinePerKey):
        aggregate = dict(transform.aggregates).get(column)
        if aggregate is not None and not isinstance(aggregate, AggregateFn):
            name = type(aggregate).__name__
            return (
                f"set output_type on the CombineFn {name} (class {name}(sb.CombineFn): "
                "output_type = int)"
            )
    if isinstance(transform, RowFunction):
        return (
            f"declare it in the schema= of the {type(transform).__name__} "
            f"(schema={{..., {column!r}: str}})"
        )
    return f"declare its type where it is made (schema={{..., {column!r}: str}})"


def spark_schema(schema: Schema, label: str) -> T.StructType:
    require_spark_types(schema, label)
    fields = []
    for name, kind in schema.fields:
        spark_type = _spark_type(kind)
        assert spark_type is not None
        fields.append(T.StructField(name, spark_type, nullable=True))
    return T.StructType(fields)


def refuse_unreadable_parquet(
    files: Sequence[str], schema: Schema, label: str, paths: Paths
) -> None:
    """Refuse parquet files whose columns of `schema` hold a type Spark's reader fails on
    (64-bit integers of nanosecond timestamps, unsigned 64-bit integers), naming the column and
    the file: Spark itself fails on them deep in a task, naming neither. Judged by the columns'
    parquet types (pyarrow shows Spark's own INT96 timestamps as nanoseconds too)."""
    for file in files:
        with paths.open_input(file) as handle:
            try:
                columns = pq.read_metadata(handle).schema
            except (pa.ArrowException, OSError):
                continue  # the read names the file (`files.unreadable_parquet`)
        for index in range(len(columns)):
            column = columns.column(index)
            if column.path not in schema or column.physical_type != "INT64":
                continue
            logical = json.loads(column.logical_type.to_json())
            if logical.get("Type") == "Timestamp" and logical.get("timeUnit") == "nanoseconds":
                kind = "timestamp[ns]"
                written = "timestamps in microseconds (pyarrow's coerce_timestamps='us')"
            elif logical.get("Type") == "Int" and logical.get("isSigned") is False:
                kind = "uint64"
                written = "signed 64-bit integers (int64)"
            else:
                continue
            raise limits.PARQUET_TYPE.error(
                label, column=column.path, file=file, kind=kind, written=written
            )
