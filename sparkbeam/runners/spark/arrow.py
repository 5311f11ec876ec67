"""Column types on Spark: `datetime` is `TIMESTAMP` (what Spark's watermarks need),
`int` is `LONG`. Rows cross into and out of Spark as Arrow (`sparkbeam.arrow`)."""

from __future__ import annotations

import datetime as _dt

from pyspark.sql import types as T

from sparkbeam.runners.spark import limits
from sparkbeam.schema import Schema, type_name

_SPARK_TYPES: dict[type, T.DataType] = {
    _dt.datetime: T.TimestampType(),
    int: T.LongType(),
    float: T.DoubleType(),
    str: T.StringType(),
    bool: T.BooleanType(),
    bytes: T.BinaryType(),
}


def require_spark_types(schema: Schema, label: str) -> None:
    """Refuse columns Spark cannot hold (type `object`)."""
    for name, kind in schema.fields:
        if kind not in _SPARK_TYPES:
            raise limits.OBJECT_COLUMN.error(label, column=name, kind=type_name(kind))


def spark_schema(schema: Schema, label: str) -> T.StructType:
    require_spark_types(schema, label)
    return T.StructType(
        [T.StructField(name, _SPARK_TYPES[kind], nullable=True) for name, kind in schema.fields]
    )
