"""What `Sort` and `Session` on unbounded input share: rows into and out of `transformWithState`.

Timestamps cross into the Python processor as microseconds, never as
`datetime`s (Spark would convert those in the local time zone), and come
back as timestamps. Rows are grouped by the transform's keys, or all by one
constant key when it has none (one ordered stream).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, GroupedData
from pyspark.sql import functions as F

from sparkbeam.schema import Schema

KEY = "__sparkbeam_state_key"


def as_longs(schema: Schema) -> Schema:
    """`schema` with its datetime columns as integer microseconds."""
    return Schema(
        tuple((name, int if kind is _dt.datetime else kind) for name, kind in schema.fields)
    )


def in_micros(schema: Schema) -> list[Column]:
    """The columns of `schema`, datetimes as microseconds."""
    return [
        F.unix_micros(name).alias(name) if kind is _dt.datetime else F.col(name)
        for name, kind in schema.fields
    ]


def as_times(schema: Schema) -> list[Column]:
    """The columns of `schema` back from microseconds, where `schema` says datetime."""
    return [
        F.timestamp_micros(name).alias(name) if kind is _dt.datetime else F.col(name)
        for name, kind in schema.fields
    ]


def key_columns(keys: Sequence[str]) -> list[Column]:
    """The grouping keys as hidden copies, so the rows keep their own columns."""
    return [F.col(key).alias(f"{KEY}_{i}") for i, key in enumerate(keys)]


def grouped(frame: DataFrame, keys: Sequence[str]) -> GroupedData:
    """`frame` (with `key_columns(keys)`) grouped by the keys, or by one constant key."""
    if keys:
        return frame.groupBy(*(f"{KEY}_{i}" for i in range(len(keys))))
    return frame.withColumn(KEY, F.lit(0)).groupBy(KEY)
