"""What the `transformWithState` operators on unbounded input share (`translate.sort`,
`translate.session`, `translate.python_combine`, `exact.late_filter`): rows into and out of
the processor, and the one function that builds the operator (`transform_with_state`). Each
streaming translator declares when it builds one (`translate.context.streaming(kind,
state_store=...)`): its query then starts with the RocksDB state store.

Timestamps cross into the Python processor as microseconds, never as
`datetime`s (Spark would convert those in the local time zone), and come
back as timestamps. Rows are grouped by the transform's keys, or all by one
constant key when it has none (one ordered stream).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql import Column, DataFrame, GroupedData, Row
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.streaming.stateful_processor import (
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)

from sparkbeam.runners.spark.session.shipping import use_shipped_protobuf
from sparkbeam.schema import Schema, list_element, list_of

use_shipped_protobuf()  # a vanilla worker's Python may lack what transformWithState needs

KEY = "__sparkbeam_state_key"
ORDER = "__sparkbeam_order"
RELEASE = "__sparkbeam_release_ms"
SEQUENCE = "__sparkbeam_seq"


def transform_with_state(
    groups: GroupedData, processor: StatefulProcessor, output: T.StructType
) -> DataFrame:
    """`groups` through `processor` in event time, appending what it emits: the runner's only
    way to build a `transformWithState` (which needs the RocksDB state store)."""
    return groups.transformWithState(processor, output, "Append", "EventTime")


def with_release(frame: DataFrame, judge: Column) -> DataFrame:
    """`frame` with `RELEASE`: the judge rounded up to the millisecond, the event-time timer
    that fires exactly when `judge <= W` (`W` is whole milliseconds)."""
    micros = frame.withColumn("__sparkbeam_judge_us", F.unix_micros(judge))
    release = F.expr("(__sparkbeam_judge_us + 999) div 1000")
    return micros.withColumn(RELEASE, release).drop("__sparkbeam_judge_us")


def held_schema(schema: Schema) -> Schema:
    """A held row: the row (datetimes as microseconds), its order, release and arrival."""
    return as_longs(schema).with_columns((ORDER, int), (RELEASE, int), (SEQUENCE, int))


class HeldRows(StatefulProcessor):
    """Per key, rows in list state as `(values..., order, release ms, arrival)`, with an
    event-time timer per release millisecond. Subclasses say what a timer releases."""

    def __init__(self, names: list[str], state_schema: T.StructType) -> None:
        self.names = names
        self.state_schema = state_schema
        self.order = len(names)
        self.release = len(names) + 1
        self.sequence = len(names) + 2

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.rows = handle.getListState("rows", self.state_schema)
        self.count = handle.getValueState("count", "count LONG")

    def handleInputRows(
        self, key: Any, rows: Iterator[Row], timerValues: TimerValues
    ) -> Iterator[Row]:
        stored = self.count.get()
        arrivals = stored[0] if stored else 0
        held = []
        for row in rows:
            held.append((*(row[n] for n in self.names), row[ORDER], row[RELEASE], arrivals))
            arrivals += 1
        if held:
            self.rows.appendList(held)
            self.count.update((arrivals,))
            for timer in {row[self.release] for row in held}:
                self.handle.registerTimer(timer)
        return iter([])

    def held(self) -> list[tuple[Any, ...]]:
        return list(self.rows.get()) if self.rows.exists() else []

    def keep(self, rows: list[tuple[Any, ...]]) -> None:
        """Hold only `rows` from now on."""
        if rows:
            self.rows.put(rows)
        else:
            self.rows.clear()

    def close(self) -> None:
        pass


def _as_long(kind: type) -> type:
    if kind is _dt.datetime:
        return int
    return list_of(int) if list_element(kind) is _dt.datetime else kind


def as_longs(schema: Schema) -> Schema:
    """`schema` with its datetime columns (and lists of datetimes) as integer microseconds."""
    return Schema(tuple((name, _as_long(kind)) for name, kind in schema.fields))


def in_micros(schema: Schema) -> list[Column]:
    """The columns of `schema`, datetimes as microseconds."""
    return [
        F.unix_micros(name).alias(name)
        if kind is _dt.datetime
        else F.transform(name, F.unix_micros).alias(name)
        if list_element(kind) is _dt.datetime
        else F.col(name)
        for name, kind in schema.fields
    ]


def as_times(schema: Schema) -> list[Column]:
    """The columns of `schema` back from microseconds, where `schema` says datetime."""
    return [
        F.timestamp_micros(name).alias(name)
        if kind is _dt.datetime
        else F.transform(name, F.timestamp_micros).alias(name)
        if list_element(kind) is _dt.datetime
        else F.col(name)
        for name, kind in schema.fields
    ]


def key_columns(keys: Sequence[str]) -> list[Column]:
    """The grouping keys as hidden copies, so the rows keep their own columns."""
    return [F.col(key).alias(f"{KEY}_{i}") for i, key in enumerate(keys)]


def key_copies(keys: Sequence[str], schema: Schema) -> list[Column]:
    """The grouping keys as hidden copies, datetimes as microseconds (the processor takes a
    group's key values from its grouping key)."""
    return [
        in_micros(Schema(((key, schema.type_of(key)),)))[0].alias(f"{KEY}_{i}")
        for i, key in enumerate(keys)
    ]


def grouped(frame: DataFrame, keys: Sequence[str]) -> GroupedData:
    """`frame` (with `key_columns(keys)`) grouped by the keys, or by one constant key."""
    if keys:
        return frame.groupBy(*(f"{KEY}_{i}" for i in range(len(keys))))
    return frame.withColumn(KEY, F.lit(0)).groupBy(KEY)
