"""Internal columns to and from Arrow (needs pyarrow, which comes with the spark extra).

`datetime` columns are Arrow `timestamp[us, UTC]`: the instant, with no local
time zone in the way. Integers are 64-bit.
"""

from __future__ import annotations

import datetime as _dt

import pyarrow as pa

from sparkbeam.errors import DataError
from sparkbeam.schema import Columns, Schema, list_element

ARROW_TIMESTAMP = pa.timestamp("us", tz="UTC")

ARROW_TYPES: dict[type, pa.DataType] = {
    _dt.datetime: ARROW_TIMESTAMP,
    int: pa.int64(),
    float: pa.float64(),
    str: pa.string(),
    bool: pa.bool_(),
    bytes: pa.binary(),
}


def arrow_type(kind: type) -> pa.DataType:
    """A column type's Arrow type; a list column is an Arrow list of its element's type."""
    element = list_element(kind)
    return ARROW_TYPES[kind] if element is None else pa.list_(ARROW_TYPES[element])


def arrow_schema(schema: Schema) -> pa.Schema:
    return pa.schema([(name, arrow_type(kind)) for name, kind in schema.fields])


def to_arrow(columns: Columns, schema: Schema, label: str) -> pa.Table:
    """An Arrow table of internal columns (datetimes as microseconds)."""
    arrays = []
    for name, kind in schema.fields:
        try:
            arrays.append(pa.array(columns[name], type=arrow_type(kind)))
        except (OverflowError, TypeError, pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise DataError(
                f"{label}: column {name!r} holds a value that does not fit {kind.__name__} in "
                f"Arrow ({exc}); integers are 64-bit"
            ) from None
    return pa.Table.from_arrays(arrays, schema=arrow_schema(schema))


def from_arrow(data: pa.Table | pa.RecordBatch, schema: Schema) -> Columns:
    """Internal columns (datetimes as microseconds) of an Arrow table or batch."""
    columns: Columns = {}
    for name, kind in schema.fields:
        array = data.column(name)
        if kind is _dt.datetime:
            found = array.type
            if isinstance(array, pa.Array) and pa.types.is_timestamp(found) and found.unit == "us":
                array = array.view(pa.int64())  # the same microseconds (UTC), with no copy
            else:
                array = array.cast(pa.timestamp("us")).cast(pa.int64())
        elif list_element(kind) is _dt.datetime:
            array = array.cast(pa.list_(pa.timestamp("us"))).cast(pa.list_(pa.int64()))
        columns[name] = array.to_pylist()
    return columns


def batch_of(columns: Columns, schema: Schema, label: str) -> pa.RecordBatch:
    table = to_arrow(columns, schema, label)
    return pa.RecordBatch.from_arrays(
        [table.column(i).combine_chunks() for i in range(table.num_columns)],
        schema=table.schema,
    )
