"""Time columns as the integers Spark compares: microseconds for timestamps, the value itself
for integer event times."""

from __future__ import annotations

import datetime as _dt

from pyspark.sql import Column
from pyspark.sql import functions as F


def long_literal(value: int) -> Column:
    """`value` as a Spark `long` literal."""
    return F.lit(value).cast("long")


def units(column: Column, kind: type) -> Column:
    """A time column as integers: microseconds for timestamps."""
    return F.unix_micros(column) if kind is _dt.datetime else column


def from_units(value: Column, kind: type) -> Column:
    """The inverse of `units`: integers as the time column of `kind`."""
    return F.timestamp_micros(value) if kind is _dt.datetime else value
