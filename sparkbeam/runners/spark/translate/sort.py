"""`Sort`: on bounded input Spark's sort (within partitions by key); on unbounded input an
event-time sort in `transformWithState`.

Per key, the rows wait in list state with an event-time timer. A row may go
once the watermark passes it, which on Spark reads `J(v) <= W` (see
`exact.judges`): `W` is whole milliseconds, so the timer is `J(v)` rounded up to
the millisecond and fires exactly when `ceil_ms(J(v)) <= W`. When a timer
fires, every row it releases is emitted in (sort column, arrival) order:
RisingWave's Sort, within each key (one key, a constant, when there are none).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql.streaming.stateful_processor import ExpiredTimerInfo, TimerValues

from sparkbeam.graph import Node
from sparkbeam.runners.spark.exact.judges import (
    JUDGE,
    stateful,
)
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
from sparkbeam.runners.spark.translate.context import (
    Made,
    Translation,
    always,
    as_streaming,
    require_time,
    streaming,
    translates,
)
from sparkbeam.schema import Schema
from sparkbeam.transforms.sort import Sort


@translates(Sort)
def sort(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> Made:
    transform = node.transform
    assert isinstance(transform, Sort)
    frame = require_time(inputs[0], transform.column, node.label, node.info.schema)
    if not transform.keys:
        return Made(frame.orderBy(transform.column))
    return Made(frame.repartition(*transform.keys).sortWithinPartitions(transform.column))


@streaming(Sort, state_store=always)
def streaming_sort(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> Made:
    run = as_streaming(translation)
    transform = node.transform
    assert isinstance(transform, Sort)
    judge = run.exact_judge(node, transform.column)
    frame = stateful(inputs[0], [judge(F.col(transform.column))])
    schema = node.info.schema
    return Made(sort_stream(frame, schema, transform.column, transform.keys, JUDGE, node.label))


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
