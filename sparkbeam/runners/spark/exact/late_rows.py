"""The one entry to the late-row filters: a `WithWatermark`'s (`filter_late_rows`) and a
merge's (`not_late_at_merge`), each applied by the strategy the plan chose
(`plan.late_filters`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from sparkbeam.runners.spark.exact.judges import JUDGE, own_judge, stateful
from sparkbeam.runners.spark.exact.late_filter import (
    current_watermark_filter,
    epoch_watermark_filter,
)
from sparkbeam.runners.spark.plan.late_filters import LateFilter, Strategy
from sparkbeam.schema import Schema

ROW_ID = "__sparkbeam_row"


def first_seen(frame: DataFrame) -> DataFrame:
    """The rows of `frame` (with `JUDGE`, from `stateful`) that are not late: Spark's
    deduplication keyed on the judge and a random row id (every row its own key) drops only
    the rows whose judge is at or below its watermark for late events, and keeps each key
    until its judge closes. Exact where that watermark is the current batch's (a no-data
    batch between two epochs, or `ONE_WATERMARK`: `late_filter`)."""
    keyed = frame.withColumn(ROW_ID, F.expr("uuid()"))
    return keyed.dropDuplicates([ROW_ID, JUDGE]).drop(ROW_ID, JUDGE)


@dataclass(frozen=True)
class Filtered:
    """What a `WithWatermark`'s late-row filter made."""

    passed: DataFrame
    """The rows not late."""
    late: DataFrame | None = None
    """`EPOCH_MARK`, `FED`: the late rows, each with its watermark (`LATE_WATERMARK`)."""
    judged: DataFrame | None = None
    """`DEDUP`, `CURRENT`: the rows with their judge (`JUDGE`), before the filter; the late
    rows are judged from them when asked for (`late_against_current_watermark`)."""


def filter_late_rows(
    chosen: LateFilter,
    frame: DataFrame,
    schema: Schema,
    column: str,
    delay_ms: int,
    held: str,
    label: str,
) -> Filtered:
    """The rows of `frame` (a `WithWatermark`'s, columns `schema`, watermark declared on
    `held`) not late on the event time `column`, by the filter the plan chose.

    `EPOCH_MARK` and `FED` compare with the watermark in the epoch's column
    `chosen.mark` (which `frame` holds, with `held`); the stateful filters key
    on the column's judge, with Spark's watermark metadata (`delay_ms`).
    """
    if chosen.in_reader:  # the source's reader dropped them (`translate.footers`)
        return Filtered(frame.select(*schema.names))
    if chosen.reads_marks:
        assert chosen.mark is not None
        passed, late = epoch_watermark_filter(frame, schema, column, chosen.mark, held)
        return Filtered(passed, late=late)
    judge = own_judge(schema.type_of(column))
    judged = stateful(frame, [judge(F.col(column))], delay_ms)
    if chosen.strategy is Strategy.CURRENT:
        passed = current_watermark_filter(judged, schema, [F.col(JUDGE)], label)
    else:
        passed = first_seen(judged)
    return Filtered(passed, judged=judged)


def not_late_at_merge(
    strategy: Strategy, frame: DataFrame, schema: Schema, judges: Sequence[Column], label: str
) -> DataFrame:
    """The rows of `frame` (columns `schema`) not late on any of `judges` at a merge.

    Where the runner feeds the epochs (a no-data batch runs between two), Spark's watermark
    for late events is the current batch's: its deduplication is the exact filter
    (`DEDUP`: `first_seen`), in the JVM. In a production run the final query may run
    batches back to back: a `transformWithState` compares with the current batch's
    watermark (`CURRENT`: `late_filter.current_watermark_filter`)."""
    if strategy is Strategy.CURRENT:
        return current_watermark_filter(frame, schema, judges, label)
    return first_seen(stateful(frame, judges))
