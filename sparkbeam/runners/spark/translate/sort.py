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
from pyspark.sql.streaming.stateful_processor import ExpiredTimerInfo, TimerValues

from sparkbeam.runners.spark.parts.arrow import spark_schema
from sparkbeam.runners.spark.parts.keyed_state import (
    ORDER,
    HeldRows,
    as_longs,
    as_times,
    grouped,
    held_schema,
    in_micros,
    key_columns,
    transform_with_state,
    with_release,
)
from sparkbeam.schema import Schema


class EventTimeSort(HeldRows):
    """Holds rows per key until the watermark passes them, then emits them in order."""

    def handleExpiredTimer(
        self, key: Any, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
    ) -> Iterator[Row]:
        watermark = timerValues.getCurrentWatermarkInMs()
        held = self.held()
        due = [row for row in held if row[self.release] <= watermark]
        if not due:
            return iter([])
        self.keep([row for row in held if row[self.release] > watermark])
        due.sort(key=lambda row: (row[self.order], row[self.sequence]))
        return iter([Row(**dict(zip(self.names, row, strict=False))) for row in due])


def sort_stream(
    frame: DataFrame, schema: Schema, column: str, keys: tuple[str, ...], judge: Any, label: str
) -> DataFrame:
    """`frame` sorted by `column` within `keys` as the watermark releases it.

    `frame` carries the judge column (with Spark's watermark metadata) named
    by `judge`.
    """
    kind = schema.type_of(column)
    order = F.unix_micros(column) if kind is _dt.datetime else F.col(column)
    prepared = frame.select(
        *in_micros(schema), order.alias(ORDER), F.col(judge), *key_columns(keys)
    )
    sorted_rows = transform_with_state(
        grouped(with_release(prepared, F.col(judge)), keys),
        EventTimeSort(list(schema.names), spark_schema(held_schema(schema), label)),
        spark_schema(as_longs(schema), label),
    )
    return sorted_rows.select(*as_times(schema))
