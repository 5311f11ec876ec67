"""`CombinePerKey(emit="update")` on unbounded input: an update stream from `transformWithState`.

Per group (keyed by the transform's keys), the state holds the direct
runner's accumulators, the next pane index, whether the estimate has passed
the group and the group's release: its judge rounded up to the millisecond
(`keyed_state.with_release`), the Spark watermark at which the model's
watermark `W` passes it. The estimate is `E = W + allowed_lateness` in every
query (the plan refuses a pipeline whose `WithWatermark`s meeting at the
`CombinePerKey` differ in it), so `E` passes the group at Spark watermark
`release - lateness`.

How the model's epochs land on micro-batches: the runner writes each epoch
as one file, which Spark reads as one data micro-batch run with the
watermark of the epoch before (`W'`), then one no-data micro-batch with the
watermark the epoch raised (`W`), in which the event-time timers up to `W`
fire. So step 1 of an epoch (one row per group its rows touched: `"EARLY"`,
or `"LATE"` once `E'` passed the group) comes from `handleInputRows` in the
data batch, and step 2 from the timers in the no-data batch: a timer at
`release - lateness` emits `"ON_TIME"` (the last row if `W` passes the group
too), one at `release` the closing `"LATE"` row. The end of input's
sentinel lifts the watermark past every timer. The runner keeps a batch's
rows after the batch before's, so each epoch's step-1 rows come before its
step-2 rows.

On live sources Spark runs a backlog's files as data micro-batches back to
back: the watermark an epoch raised is the next batch's, whose rows reach
`handleInputRows` before the timers fire. A group whose on-time point that
watermark has passed emits its `"ON_TIME"` row there, before the update of
the new rows (its timer then finds it on time and emits nothing), so the
change rows are the direct runner's.

A running aggregate (no watermarked key) has one timer, at `END_OF_INPUT_MS`,
which only the end of input's watermark reaches: there `E` and `W` are both
past the group, so its one step-2 row is `"ON_TIME"` and last.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
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

from sparkbeam.graph import Node
from sparkbeam.runners.shared.accumulators import Accumulators, accumulators_for
from sparkbeam.runners.spark.exact.judges import INT_TIME_RANGE, JUDGE, stateful
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
from sparkbeam.runners.spark.plan.delays import SHIFT_MICROS
from sparkbeam.runners.spark.plan.updates import lateness_of
from sparkbeam.runners.spark.translate.partials import folded, merge_partials, read_columns
from sparkbeam.runners.spark.translate.python_combine import _marked
from sparkbeam.schema import Schema
from sparkbeam.transforms.combine import CombinePerKey, Finals
from sparkbeam.updates import EARLY, LATE, ON_TIME, PANE_COLUMNS, PANE_IS_LAST

END_OF_INPUT_MS = INT_TIME_RANGE[1] + SHIFT_MICROS // 1000 + 1
"""A Spark watermark (ms) that only the end of input's sentinel reaches: past the judge of
the latest integer time the runner holds on a stream (and of every datetime), which the
sentinel's watermark passes so that every window closes."""


class UpdateGroups(StatefulProcessor):
    """A group's accumulators, next pane index, estimate flag and release in state; its pane
    rows as its rows arrive (folded per input partition: `translate.partials`) and as the
    watermark passes it (module docstring)."""

    def __init__(
        self,
        keys: tuple[str, ...],
        aggregates: Any,
        in_schema: Schema,
        out_schema: Schema,
        lateness_ms: int,
        label: str,
    ) -> None:
        self.label = label
        self.keys = keys
        self.aggregates = aggregates
        self.in_schema = in_schema
        self.out_schema = out_schema
        self.lateness_ms = lateness_ms

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.group = handle.getValueState("group", "group BINARY")

    def _fresh(self) -> list[Accumulators]:
        return [
            accumulators_for(
                aggregate, self.in_schema, self.out_schema.type_of(name), f"{self.label} {name}"
            )
            for name, aggregate in self.aggregates
        ]

    def handleInputRows(
        self, key: Any, rows: Iterator[Row], timerValues: TimerValues
    ) -> Iterator[Row]:
        batch = list(rows)
        if not batch:
            return iter([])
        stored = self.group.get()
        if stored:
            key_values, tables, pane, passed, release = cloudpickle.loads(stored[0])
        else:
            key_values = list(key) if self.keys else []
            tables, pane, release = self._fresh(), 0, batch[0][RELEASE]
            on_time_at = release - self.lateness_ms
            # A group the estimate passed before its first row is born late: no "ON_TIME" row.
            passed = on_time_at <= timerValues.getCurrentWatermarkInMs()
            if not passed:
                self.handle.registerTimer(on_time_at)
            if on_time_at != release:
                self.handle.registerTimer(release)
        out: list[Row] = []
        if (
            stored
            and not passed
            and release - self.lateness_ms <= timerValues.getCurrentWatermarkInMs()
        ):
            # On time since the batch before, whose rows ran back to back with these: its
            # timer fires only after them, but its "ON_TIME" row comes before their update.
            out.append(self._row(key_values, tables, ON_TIME, pane, last=False))
            pane, passed = pane + 1, True
        with _marked():
            merge_partials(tables, batch)
        out.append(self._row(key_values, tables, LATE if passed else EARLY, pane, last=False))
        self.group.update((cloudpickle.dumps((key_values, tables, pane + 1, passed, release)),))
        return iter(out)

    def handleExpiredTimer(
        self, key: Any, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
    ) -> Iterator[Row]:
        stored = self.group.get()
        if not stored:  # closed by the group's other timer in the same micro-batch
            return iter([])
        key_values, tables, pane, passed, release = cloudpickle.loads(stored[0])
        last = release <= timerValues.getCurrentWatermarkInMs()
        if passed and not last:
            return iter([])
        out = self._row(key_values, tables, LATE if passed else ON_TIME, pane, last=last)
        if last:
            self.group.clear()
        else:
            self.group.update((cloudpickle.dumps((key_values, tables, pane + 1, True, release)),))
        return iter([out])

    def _row(
        self, key_values: list[Any], tables: list[Accumulators], timing: str, pane: int, last: bool
    ) -> Row:
        values = dict(zip(self.keys, key_values, strict=True))
        with _marked():
            for (name, _), table in zip(self.aggregates, tables, strict=True):
                values[name] = table.current(0)
        return Row(**values, pane_timing=timing, pane_index=pane, pane_is_last=last)

    def close(self) -> None:
        pass


def update_stream(
    frame: DataFrame,
    nodes: Sequence[Node],
    node: Node,
    judges: Sequence[Any],
    in_schema: Schema,
) -> DataFrame:
    """The update stream of `node` (an update-mode `CombinePerKey`) over `frame`; `judges` are
    the judge columns of its watermarked keys (none: a running aggregate)."""
    transform = node.transform
    assert isinstance(transform, CombinePerKey)
    keys, out_schema = transform.keys, node.info.schema
    # Only what the aggregates read crosses into Python: each value costs a conversion.
    read = read_columns(transform.aggregates, in_schema)
    sent = [*map(F.col, read.names), *key_copies(keys, in_schema)]
    if judges:
        judged = stateful(frame, list(judges))
        prepared = with_release(judged.select(*sent, F.col(JUDGE)), F.col(JUDGE))
        lateness_ms = lateness_of(nodes, node)
    else:
        prepared = frame.select(*sent).withColumn(RELEASE, F.lit(END_OF_INPUT_MS))
        lateness_ms = 0
    partials = folded(
        prepared, len(keys), transform.aggregates, in_schema, read, out_schema, node.label
    )
    updates = transform_with_state(
        grouped(partials, keys),
        UpdateGroups(keys, transform.aggregates, in_schema, out_schema, lateness_ms, node.label),
        spark_schema(as_longs(out_schema), node.label),
    )
    return updates.select(*as_times(out_schema))


def finals(frame: DataFrame, node: Node) -> DataFrame:
    """`finals()`: the rows with `pane_is_last`, without the pane columns."""
    assert isinstance(node.transform, Finals)
    kept = [name for name in node.info.schema.names if name not in PANE_COLUMNS]
    return frame.filter(F.col(PANE_IS_LAST)).select(*kept)
