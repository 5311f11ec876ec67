"""`CombinePerKey` with a user `CombineFn` on unbounded input, in `transformWithState`.

Spark refuses Python aggregates in streaming aggregations, so each group's
accumulators (the direct runner's, the same code for built-in and user
aggregates) live in keyed state. Each input partition folds its rows per
group first (`translate.partials`), and the operator merges the partials.
Each group registers an event-time timer at its judge rounded up to the
millisecond; when it fires, the group is emitted once and forgotten, as the
model's emission rule says.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from pyspark import cloudpickle
from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql.streaming.stateful_processor import (
    ExpiredTimerInfo,
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)

from sparkbeam.errors import DataError
from sparkbeam.runners.shared.accumulators import accumulators_for
from sparkbeam.runners.spark.parts.arrow import spark_schema
from sparkbeam.runners.spark.parts.keyed_state import (
    RELEASE,
    as_longs,
    as_times,
    grouped,
    key_copies,
    transform_with_state,
    with_release,
)
from sparkbeam.runners.spark.session.engine_errors import DATA_ERROR_MARK
from sparkbeam.runners.spark.translate.partials import folded, merge_partials, read_columns
from sparkbeam.schema import Schema


@contextlib.contextmanager
def _marked() -> Iterator[None]:
    """A `DataError` of the aggregates marked, for the driver to find in the query's error."""
    try:
        yield
    except DataError as exc:
        raise DataError(f"{DATA_ERROR_MARK}{exc}") from exc


class PythonCombine(StatefulProcessor):
    """A group's accumulators in state; the group's row when the watermark passes it.

    Rows arrive with datetimes as microseconds, which is how the direct
    runner's accumulators hold them; a user `CombineFn` still sees datetimes.
    """

    def __init__(
        self,
        keys: tuple[str, ...],
        aggregates: Any,
        in_schema: Schema,
        out_schema: Schema,
        label: str,
    ) -> None:
        self.label = label
        self.keys = keys
        self.aggregates = aggregates
        self.in_schema = in_schema
        self.out_schema = out_schema

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.group = handle.getValueState("group", "group BINARY")

    def handleInputRows(
        self, key: Any, rows: Iterator[Row], timerValues: TimerValues
    ) -> Iterator[Row]:
        stored = self.group.get()
        if stored:
            key_values, tables = cloudpickle.loads(stored[0])
        else:
            key_values, tables = (
                None,
                [
                    accumulators_for(
                        aggregate,
                        self.in_schema,
                        self.out_schema.type_of(name),
                        f"{self.label} {name}",
                    )
                    for name, aggregate in self.aggregates
                ],
            )
        batch = list(rows)
        if not batch:
            return iter([])
        if key_values is None:
            key_values = list(key) if self.keys else []
        with _marked():
            merge_partials(tables, batch)
        self.group.update((cloudpickle.dumps((key_values, tables)),))
        if not stored:  # the release depends on the group's keys only: one timer, at its birth
            self.handle.registerTimer(batch[0][RELEASE])
        return iter([])

    def handleExpiredTimer(
        self, key: Any, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
    ) -> Iterator[Row]:
        stored = self.group.get()
        if not stored:
            return iter([])
        key_values, tables = cloudpickle.loads(stored[0])
        self.group.clear()
        values = dict(zip(self.keys, key_values, strict=True))
        with _marked():
            for (name, _), table in zip(self.aggregates, tables, strict=True):
                values[name] = table.pop(0)
        return iter([Row(**values)])

    def close(self) -> None:
        pass


def combine_stream(
    frame: DataFrame,
    in_schema: Schema,
    out_schema: Schema,
    keys: tuple[str, ...],
    aggregates: Any,
    judge: str,
    label: str,
) -> DataFrame:
    """Groups of `frame` by `keys`, each emitted once when the watermark passes its judge."""
    read = read_columns(aggregates, in_schema)
    sent = [*map(F.col, read.names), F.col(judge), *key_copies(keys, in_schema)]
    prepared = with_release(frame.select(*sent), F.col(judge))
    partials = folded(prepared, len(keys), aggregates, in_schema, read, out_schema, label)
    combined = transform_with_state(
        grouped(partials, keys),
        PythonCombine(keys, aggregates, in_schema, out_schema, label),
        spark_schema(as_longs(out_schema), label),
    )
    return combined.select(*as_times(out_schema))
