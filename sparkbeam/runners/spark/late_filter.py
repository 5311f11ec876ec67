"""The late-row filter of a live query, judged against the current micro-batch's watermark.

Spark's stateful operators drop late input by the watermark of the batch
before (they evict state by the current one). Where the runner feeds epochs
itself, a no-data batch runs between two data batches, so the two are the
same and a deduplication keyed on the judge is an exact filter (see
`streaming`). A live source with a backlog runs data batches back to back:
there the filter is a pass-through `transformWithState` that compares each
row's judge with `TimerValues.getCurrentWatermarkInMs()`, the watermark the
model judges the epoch by. It holds no state; rows are grouped by their
input partition only to run it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql.streaming.stateful_processor import (
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)

from sparkbeam.runners.spark.arrow import spark_schema
from sparkbeam.runners.spark.keyed_state import KEY, as_longs, as_times, in_micros
from sparkbeam.schema import Schema

JUDGE_US = "__sparkbeam_judge_us"


class CurrentWatermarkFilter(StatefulProcessor):
    """Passes the rows whose judge lies above the current batch's watermark (`J > W`)."""

    def __init__(self, names: list[str]) -> None:
        self.names = names

    def init(self, handle: StatefulProcessorHandle) -> None:
        pass

    def handleInputRows(
        self, key: Any, rows: Iterator[Row], timerValues: TimerValues
    ) -> Iterator[Row]:
        watermark_us = timerValues.getCurrentWatermarkInMs() * 1000
        names = self.names
        for row in rows:
            if row[JUDGE_US] > watermark_us:
                yield Row(**{name: row[name] for name in names})

    def close(self) -> None:
        pass


def current_watermark_filter(frame: DataFrame, schema: Schema, judge: str, label: str) -> DataFrame:
    """The rows of `frame` (with the judge column `judge`) that are not late this batch."""
    prepared = frame.select(
        *in_micros(schema),
        F.unix_micros(judge).alias(JUDGE_US),
        F.spark_partition_id().alias(KEY),
    )
    passed = prepared.groupBy(KEY).transformWithState(
        CurrentWatermarkFilter(list(schema.names)),
        spark_schema(as_longs(schema), label),
        "Append",
        "EventTime",
    )
    return passed.select(*as_times(schema))
