"""`Sort` on unbounded input: an event-time sort in `transformWithState`.

Per key, the rows wait in list state with an event-time timer. A row may go
once the watermark passes it, which on Spark reads `J(v) <= W` (see
`streaming`): `W` is whole milliseconds, so the timer is `J(v)` rounded up to
the millisecond and fires exactly when `ceil_ms(J(v)) <= W`. When a timer
fires, every row it releases is emitted in (sort column, arrival) order:
RisingWave's Sort, within each key (one key, a constant, when there are none).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterator
from typing import Any

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.streaming.stateful_processor import (
    ExpiredTimerInfo,
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)

from sparkbeam.runners.spark.arrow import spark_schema
from sparkbeam.runners.spark.keyed_state import as_longs, as_times, grouped, in_micros, key_columns
from sparkbeam.schema import Schema

ORDER = "__sparkbeam_order"
RELEASE = "__sparkbeam_release_ms"
SEQUENCE = "__sparkbeam_seq"


class EventTimeSort(StatefulProcessor):
    """Holds rows per key until the watermark passes them, then emits them in order."""

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
        timers = set()
        for row in rows:
            held.append((*(row[n] for n in self.names), row[ORDER], row[RELEASE], arrivals))
            timers.add(row[RELEASE])
            arrivals += 1
        if held:
            self.rows.appendList(held)
            self.count.update((arrivals,))
            for timer in timers:
                self.handle.registerTimer(timer)
        return iter([])

    def handleExpiredTimer(
        self, key: Any, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
    ) -> Iterator[Row]:
        watermark = timerValues.getCurrentWatermarkInMs()
        held = list(self.rows.get()) if self.rows.exists() else []
        due = [row for row in held if row[self.release] <= watermark]
        if not due:
            return iter([])
        rest = [row for row in held if row[self.release] > watermark]
        if rest:
            self.rows.put(rest)
        else:
            self.rows.clear()
        due.sort(key=lambda row: (row[self.order], row[self.sequence]))
        return iter([Row(**dict(zip(self.names, row, strict=False))) for row in due])

    def close(self) -> None:
        pass


def sort_stream(
    frame: DataFrame, schema: Schema, column: str, keys: tuple[str, ...], judge: Any, label: str
) -> DataFrame:
    """`frame` sorted by `column` within `keys` as the watermark releases it.

    `frame` carries the judge column (with Spark's watermark metadata) named
    by `judge`.
    """
    kind = schema.type_of(column)
    longs = as_longs(schema)
    order = F.unix_micros(column) if kind is _dt.datetime else F.col(column)
    prepared = frame.select(
        *in_micros(schema),
        order.alias(ORDER),
        F.unix_micros(judge).alias("__sparkbeam_judge_us"),
        F.col(judge),
        *key_columns(keys),
    ).withColumn(RELEASE, F.expr("(__sparkbeam_judge_us + 999) div 1000"))
    state_schema = spark_schema(
        longs.with_columns((ORDER, int), (RELEASE, int), (SEQUENCE, int)), label
    )
    sorted_rows = grouped(prepared, keys).transformWithState(
        EventTimeSort(list(schema.names), state_schema),
        spark_schema(longs, label),
        "Append",
        "EventTime",
    )
    return sorted_rows.select(*as_times(schema))
