"""A stage the runner judges itself: a `WithWatermark` read straight from a replayed source,
where watermarks of several `WithWatermark`s meet (`queries.FedStage`;
`plan.late_filters.Strategy.FED`).

Such a stage's query would only read each epoch's rows, drop the late ones
by the watermark the runner writes into the epoch (the model's after the
epochs before: `late_filter.epoch_watermark_filter`) and count them, one
micro-batch per epoch. The runner holds each epoch's rows in Arrow already
(`epochs.SourceEpochs`), so it applies the same filter there and feeds the
rows that pass to the final queries, which declare the watermark again on
them in Spark (`streaming.restamp`): one query fewer per origin and epoch.
What the stage's query counted (`observed`), the watermark Spark would
report for it and the integer event times Spark cannot hold
(`streaming._held_time`, a `DataError` naming the row) are the same.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from sparkbeam.arrow import arrow_schema
from sparkbeam.errors import DataError
from sparkbeam.graph import Node
from sparkbeam.runners.spark.exact.judges import INT_TIME_OUTSIDE, INT_TIME_RANGE, SHIFT_MICROS
from sparkbeam.runners.spark.plan.keys import INVALID_ROWS, Observation, model_watermark
from sparkbeam.transforms.watermark import WithWatermark


def _units(table: pa.Table, column: str) -> pa.ChunkedArray:
    """A time column in its units (datetimes as microseconds since 1970)."""
    values = table.column(column)
    if pa.types.is_timestamp(values.type):
        return values.cast(pa.timestamp("us", tz=values.type.tz)).cast(pa.int64())
    return values


def _largest(values: pa.ChunkedArray) -> int | None:
    largest = pc.max(values).as_py()
    return None if largest is None else int(largest)


def _row_text(row: Mapping[str, Any]) -> str:
    def plain(value: Any) -> Any:
        if isinstance(value, _dt.datetime):
            return value.isoformat()
        return value if isinstance(value, (int, float, str, bool, type(None))) else str(value)

    return json.dumps({k: plain(v) for k, v in row.items()}, separators=(",", ":"))


class FedWatermark:
    """The late-row filter and counts of `node` (a `WithWatermark`) over `source`'s epochs."""

    def __init__(self, source: Node, node: Node) -> None:
        transform = node.transform
        assert isinstance(transform, WithWatermark)
        self.source = source
        self.node = node
        self.column = transform.column
        self.kind = node.info.schema.type_of(self.column)
        delay = transform.watermark_delay_units(node.info.schema, node.label)
        self.delay_ms = delay // 1000 if self.kind is _dt.datetime else delay
        self.emitted_latest: int | None = None
        """The largest event time among the rows passed so far (in the column's units)."""
        self.spark_latest_ms: int | None = None
        """The largest event time so far as Spark holds it, in milliseconds (`as_spark_time`)."""

    def judge(self, table: pa.Table, metrics: Mapping[str, Any]) -> tuple[pa.Table, dict[str, Any]]:
        """The epoch's rows that pass (their time at or above the model's watermark after the
        epochs counted in `metrics`), and what the stage's query would count on this epoch."""
        node, source = self.node, self.source
        watermark = model_watermark(node, metrics)
        times = _units(table, self.column)
        valid = pc.is_valid(times)
        timed, timed_times = table.filter(valid), times.filter(valid)
        if self.kind is not _dt.datetime:
            self._check_range(timed, timed_times)
        passed, passed_times = timed, timed_times
        if watermark is not None:
            kept = pc.greater_equal(timed_times, pa.scalar(watermark, pa.int64()))
            passed, passed_times = timed.filter(kept), timed_times.filter(kept)
        counted: dict[str, Any] = {
            Observation("n", source.id).rows(): table.num_rows,
            Observation("in", node.id).rows(): timed.num_rows,
            Observation("in", node.id).field(INVALID_ROWS): table.num_rows - timed.num_rows,
            Observation("n", node.id).rows(): passed.num_rows,
            Observation("out", node.id).rows(): passed.num_rows,
        }
        latest = _largest(timed_times)
        if latest is not None:
            counted[Observation("in", node.id).latest()] = latest
            held_ms = (
                (latest + SHIFT_MICROS) // 1000
                if self.kind is _dt.datetime
                else latest + SHIFT_MICROS // 1000
            )
            if self.spark_latest_ms is None or held_ms > self.spark_latest_ms:
                self.spark_latest_ms = held_ms
        emitted = _largest(passed_times)
        if emitted is not None and (self.emitted_latest is None or emitted > self.emitted_latest):
            self.emitted_latest = emitted
        for owner, rows in ((source, table), (node, passed)):
            for i, column in enumerate(sorted(owner.info.watermarked)):
                own = owner is node and column == self.column
                value = emitted if own else _largest(_units(rows, column))
                if value is not None:
                    counted[Observation("n", owner.id).latest(i)] = value
        return passed, counted

    def no_rows(self) -> pa.Table:
        """An epoch of the source with no rows."""
        return arrow_schema(self.source.info.schema).empty_table()

    def _check_range(self, rows: pa.Table, times: pa.ChunkedArray) -> None:
        low, high = INT_TIME_RANGE
        outside = pc.or_(pc.less(times, low), pc.greater(times, high))
        bad = rows.filter(outside)
        if bad.num_rows:
            row = bad.slice(0, 1).to_pylist()[0]
            text = f"{self.node.label}: {INT_TIME_OUTSIDE}. The row: {_row_text(row)}"
            raise DataError(text, row)

    def spark_watermark_ms(self) -> int:
        """The watermark Spark reports for the stage's query after the epochs judged so far: the
        largest event time as Spark holds it, less the delay (0 before any row)."""
        if self.spark_latest_ms is None:
            return 0
        return max(0, self.spark_latest_ms - self.delay_ms)
