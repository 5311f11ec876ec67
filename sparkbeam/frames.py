"""Rows as frames: `result.to_arrow(pc)` and `result.to_pandas(pc)`.

Needs pyarrow and pandas (the `frames` extra; the `spark` extra brings them
too). Both keep `collect`'s rows in its order and the schema's columns in
order, typed by the schema, not by the values, so an empty result keeps its
columns and types:

| column type | Arrow | pandas |
|---|---|---|
| `datetime` | `timestamp("us")`, no time zone (naive UTC) | `datetime64[us]` (`None`: `NaT`) |
| `int` | `int64` | `int64`, or nullable `Int64` where a `None` occurs |
| `float` | `float64` | `float64` (`None` is `NaN`, as pandas has it) |
| `bool` | `bool` | `bool`, or nullable `boolean` where a `None` occurs |
| `str` | `string` | `object` (Python strings and `None`) |
| `bytes` | `binary` | `object` |
| `object` | what pyarrow infers from the values (`null` when empty) | `object` |
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from typing import Any

import pandas as pd
import pyarrow as pa

from sparkbeam.arrow import ARROW_TYPES
from sparkbeam.errors import DataError
from sparkbeam.schema import Row, Schema, list_element

FRAME_ARROW_TYPES: dict[type, pa.DataType] = {**ARROW_TYPES, _dt.datetime: pa.timestamp("us")}
"""Arrow types of the columns a user gets: naive timestamps, as `collect` gives them."""


def _frame_arrow_type(kind: type) -> pa.DataType | None:
    """A column type's Arrow type in a frame (a list column: a list of its element's)."""
    element = list_element(kind)
    if element is not None:
        return pa.list_(FRAME_ARROW_TYPES[element])
    return FRAME_ARROW_TYPES.get(kind)


_PANDAS_TYPES: dict[type, str] = {
    _dt.datetime: "datetime64[us]",
    int: "int64",
    float: "float64",
    bool: "bool",
}
_NULLABLE_PANDAS_TYPES: dict[type, str] = {int: "Int64", bool: "boolean"}


def rows_to_arrow(rows: Sequence[Row], schema: Schema, label: str) -> pa.Table:
    """An Arrow table of `rows` (as `collect` gives them), typed by `schema`."""
    arrays = []
    fields = []
    for name, kind in schema.fields:
        values = [row[name] for row in rows]
        try:
            array = pa.array(values, type=_frame_arrow_type(kind))
        except (OverflowError, TypeError, pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise DataError(
                f"{label}: column {name!r} holds a value Arrow cannot hold as "
                f"{_frame_arrow_type(kind) or 'one type'} ({exc}); give the column a "
                "schema type (int, float, str, bool, bytes, datetime) with Select or Map"
            ) from None
        arrays.append(array)
        fields.append(pa.field(name, array.type))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def rows_to_pandas(rows: Sequence[Row], schema: Schema) -> pd.DataFrame:
    """A pandas DataFrame of `rows` (as `collect` gives them), typed by `schema`."""
    columns: dict[str, Any] = {}
    for name, kind in schema.fields:
        values = [row[name] for row in rows]
        dtype = _PANDAS_TYPES.get(kind, "object")
        if kind in _NULLABLE_PANDAS_TYPES and any(value is None for value in values):
            dtype = _NULLABLE_PANDAS_TYPES[kind]
        columns[name] = pd.Series(values, dtype=dtype)
    return pd.DataFrame(columns, columns=list(schema.names))
