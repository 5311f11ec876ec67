"""Column types on Spark and the Arrow conversions at the runner's edges.

`datetime` columns are Spark `TIMESTAMP`s (the type Spark's watermarks need)
and cross into and out of Spark as Arrow `timestamp[us, UTC]`, so no local
time zone ever touches them. Integers are 64-bit (`LONG`).
"""

from __future__ import annotations

import datetime as _dt

import pyarrow as pa
from pyspark.sql import types as T

from sparkbeam.errors import DataError, PipelineError
from sparkbeam.schema import Columns, Schema, type_name

ARROW_TIMESTAMP = pa.timestamp("us", tz="UTC")

_SPARK_TYPES: dict[type, T.DataType] = {
    _dt.datetime: T.TimestampType(),
    int: T.LongType(),
    float: T.DoubleType(),
    str: T.StringType(),
    bool: T.BooleanType(),
    bytes: T.BinaryType(),
}
_ARROW_TYPES: dict[type, pa.DataType] = {
    _dt.datetime: ARROW_TIMESTAMP,
    int: pa.int64(),
    float: pa.float64(),
    str: pa.string(),
    bool: pa.bool_(),
    bytes: pa.binary(),
}


def require_spark_types(schema: Schema, label: str) -> None:
    """Refuse columns Spark cannot hold (type `object`)."""
    for name, kind in schema.fields:
        if kind not in _SPARK_TYPES:
            raise PipelineError(
                f"{label}: column {name!r} has type {type_name(kind)}, which Spark cannot hold; "
                "give it a concrete type (datetime, int, float, str, bool or bytes)"
            )


def spark_schema(schema: Schema, label: str) -> T.StructType:
    require_spark_types(schema, label)
    return T.StructType(
        [T.StructField(name, _SPARK_TYPES[kind], nullable=True) for name, kind in schema.fields]
    )


def arrow_schema(schema: Schema) -> pa.Schema:
    return pa.schema([(name, _ARROW_TYPES[kind]) for name, kind in schema.fields])


def to_arrow(columns: Columns, schema: Schema, label: str) -> pa.Table:
    """An Arrow table of internal columns (datetimes as microseconds)."""
    arrays = []
    for name, kind in schema.fields:
        try:
            arrays.append(pa.array(columns[name], type=_ARROW_TYPES[kind]))
        except (OverflowError, TypeError, pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise DataError(
                f"{label}: column {name!r} holds a value Spark cannot hold ({exc}); integers "
                "on Spark are 64-bit"
            ) from None
    return pa.Table.from_arrays(arrays, schema=arrow_schema(schema))


def from_arrow(data: pa.Table | pa.RecordBatch, schema: Schema) -> Columns:
    """Internal columns (datetimes as microseconds) of an Arrow table or batch."""
    columns: Columns = {}
    for name, kind in schema.fields:
        array = data.column(name)
        if kind is _dt.datetime:
            array = array.cast(pa.int64())
        columns[name] = array.to_pylist()
    return columns


def batch_of(columns: Columns, schema: Schema, label: str) -> pa.RecordBatch:
    table = to_arrow(columns, schema, label)
    return pa.RecordBatch.from_arrays(
        [table.column(i).combine_chunks() for i in range(table.num_columns)],
        schema=table.schema,
    )
