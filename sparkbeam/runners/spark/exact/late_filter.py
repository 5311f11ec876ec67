"""Late rows judged against the current micro-batch's watermark: kept, or given as data.

Spark's stateful operators drop late input by the watermark of the batch
before (they evict state by the current one). Where the runner feeds epochs
itself, a no-data batch runs between two data batches, so the two are the
same and a deduplication keyed on the judge is an exact filter
(`late_rows.first_seen`). A live source with a backlog runs data batches back to back:
there the filter is a pass-through `transformWithState` that compares each
row's judge with `TimerValues.getCurrentWatermarkInMs()`, the watermark the
model judges the epoch by. It holds no state; rows are grouped by their
input partition only to run it.

Where the runner feeds a `WithWatermark` straight from a replayed source, it
knows before writing epoch `i` the watermark every row of it is judged by:
the model's, from the largest event time the query counted through epoch
`i - 1` (`plan.keys.model_watermark`). It writes that watermark into the epoch
file as a column of the source's rows (`epochs.Channel.marks`), and the
filter is a plain comparison with it (`epoch_watermark_filter`): no state,
no shuffle. Spark's stateful operators downstream judge by the same value (a
no-data batch runs between two epochs, as above). The stateful filters stay
where the watermark is not known to the runner before the rows arrive: live
sources, and a `WithWatermark` whose input is computed in the query (the plan
chooses: `plan.late_filters`).

The same comparison, inverted, gives the late rows themselves (`late_rows()`
on unbounded input), each with the model's watermark it was below: Spark's
watermark `W` moved back through the judge of the first column it was late
on (`Late`).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql.streaming.stateful_processor import (
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)

from sparkbeam.derivation import Step, apply_steps
from sparkbeam.runners.spark.parts.arrow import spark_schema
from sparkbeam.runners.spark.parts.keyed_state import (
    KEY,
    as_longs,
    as_times,
    in_micros,
    transform_with_state,
)
from sparkbeam.schema import Schema
from sparkbeam.transforms.late import LATE_WATERMARK

JUDGE_US = "__sparkbeam_judge_us"

Steps = tuple[Step, ...]
"""How a column's watermark follows from the event time's (`sparkbeam.derivation`)."""


def mark(watermark: int, steps: Steps) -> int:
    """The watermark of a column derived from the event time's `watermark` by `steps`."""
    return apply_steps(watermark, steps)


@dataclass(frozen=True)
class Late:
    """How a column is judged late and its watermark named: `judge` closes at Spark's
    watermark `W`; the event time's model watermark is then `W - shift` in its units
    (microseconds, or milliseconds for integer times), the column's `mark` of that."""

    judge: Column
    column: str
    is_datetime: bool
    shift: int
    steps: Steps


class CurrentWatermarkFilter(StatefulProcessor):
    """Passes the rows whose judges all lie above the current batch's watermark (`J > W`);
    with `late`, passes the others instead, each with the watermark it was below."""

    def __init__(
        self, names: list[str], judges: int, late: Sequence[tuple[bool, int, Steps]] | None = None
    ) -> None:
        self.names = names
        self.judges = [f"{JUDGE_US}_{i}" for i in range(judges)]
        self.late = late
        """Per judge: whether its column is a datetime, `Late.shift` and `Late.steps`."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        pass

    def handleInputRows(
        self, key: Any, rows: Iterator[Row], timerValues: TimerValues
    ) -> Iterator[Row]:
        watermark_ms = timerValues.getCurrentWatermarkInMs()
        watermark_us = watermark_ms * 1000
        names, judges, late = self.names, self.judges, self.late
        for row in rows:
            below = next((i for i, judge in enumerate(judges) if row[judge] <= watermark_us), None)
            if late is None:
                if below is None:
                    yield Row(**{name: row[name] for name in names})
            elif below is not None:
                is_datetime, shift, steps = late[below]
                time = (watermark_us if is_datetime else watermark_ms) - shift
                values = {name: row[name] for name in names}
                yield Row(**values, **{LATE_WATERMARK: mark(time, steps)})

    def close(self) -> None:
        pass


def _prepared(frame: DataFrame, schema: Schema, judges: Sequence[Column]) -> DataFrame:
    return frame.select(
        *in_micros(schema),
        *(F.unix_micros(judge).alias(f"{JUDGE_US}_{i}") for i, judge in enumerate(judges)),
        F.spark_partition_id().alias(KEY),
    )


def current_watermark_filter(
    frame: DataFrame, schema: Schema, judges: Sequence[Column], label: str
) -> DataFrame:
    """The rows of `frame` (columns `schema`) not late this batch on any of `judges`."""
    passed = transform_with_state(
        _prepared(frame, schema, judges).groupBy(KEY),
        CurrentWatermarkFilter(list(schema.names), len(judges)),
        spark_schema(as_longs(schema), label),
    )
    return passed.select(*as_times(schema))


def late_against_current_watermark(
    frame: DataFrame, schema: Schema, late: Sequence[Late], output: Schema, label: str
) -> DataFrame:
    """The rows of `frame` (columns `schema`) late this batch on one of the judges of `late`
    (in order), each with the watermark of the first it was below, as `LATE_WATERMARK`:
    `output` is `schema` plus that column."""
    judges = [entry.judge for entry in late]
    bases = [(entry.is_datetime, entry.shift, entry.steps) for entry in late]
    rows = transform_with_state(
        _prepared(frame, schema, judges).groupBy(KEY),
        CurrentWatermarkFilter(list(schema.names), len(judges), bases),
        spark_schema(as_longs(output), label),
    )
    return rows.select(*as_times(output))


def epoch_watermark_filter(
    frame: DataFrame, schema: Schema, column: str, mark: str, held: str
) -> tuple[DataFrame, DataFrame]:
    """The rows of `frame` (columns `schema`, `mark` and `held`) not late, and the late ones
    with their watermark (`LATE_WATERMARK`), where `mark` holds the model's watermark of
    `column` for each row's epoch, in the column's units (None: no watermark yet, nothing is
    late), and `held` the event time Spark's watermark is declared on.

    A row is late when its time is below the watermark (`time < wm`, the model's rule, which
    the judges of the stateful filters compile to Spark's `J <= W`). Each filter is one
    conjunct that names `held`, so that Spark's optimizer cannot push it below the watermark:
    there the late rows' filter would leave the other rows (and the end of input) out of the
    watermark's statistics, and the watermark the query reports would lag."""
    kind = schema.type_of(column)
    time = F.unix_micros(column) if kind is _dt.datetime else F.col(column)
    watermark = F.col(mark)
    below = time < watermark
    not_late = F.coalesce(~below, F.col(held).isNotNull())
    kept = frame.filter(not_late).select(*schema.names)
    named = F.timestamp_micros(watermark) if kind is _dt.datetime else watermark
    late_rows = frame.filter(F.coalesce(below, F.col(held).isNull()))
    late = late_rows.select(*schema.names, named.alias(LATE_WATERMARK))
    return kept, late
