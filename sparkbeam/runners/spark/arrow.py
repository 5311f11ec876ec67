"""Column types on Spark: `datetime` is `TIMESTAMP` (what Spark's watermarks need),
`int` is `LONG`. Rows cross into and out of Spark as Arrow (`sparkbeam.arrow`)."""

from __future__ import annotations

import datetime as _dt

from pyspark.sql import types as T

from sparkbeam.runners.spark import limits
from sparkbeam.schema import Schema, list_element, type_name

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


def require_spark_types(schema: Schema, label: str) -> None:
    """Refuse columns Spark cannot hold (type `object`)."""
    for name, kind in schema.fields:
        if _spark_type(kind) is None:
            raise limits.OBJECT_COLUMN.error(label, column=name, kind=type_name(kind))


def spark_schema(schema: Schema, label: str) -> T.StructType:
    require_spark_types(schema, label)
    fields = []
    for name, kind in schema.fields:
        spark_type = _spark_type(kind)
        assert spark_type is not None
        fields.append(T.StructField(name, spark_type, nullable=True))
    return T.StructType(fields)
