"""Time inside Spark, and judges: the columns Spark's stateful operators compare with its one
watermark.

Spark drops a row when `time <= watermark`, in milliseconds, at stateful
operators only; the model drops it when `time < watermark`. So every stateful
operator is keyed on a *judge* of its column instead of the column: a Spark
timestamp `J(v)` with `J(v) <= W` exactly when `v < wm`, `W` being Spark's
watermark and `wm` the model's. A column's judge is compiled from its
transform's watermark rule (`sparkbeam.derivation`): every step moves the
event time's own judge (`v + 1 microsecond`) by a constant. Event times are
shifted by 1969 years inside Spark (its watermark never goes below 1970).
docs/spark-runner.md, "How the rows are made exact", says how this makes late rows exact.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from sparkbeam.graph import Node
from sparkbeam.runners.spark.exact.late_filter import Late
from sparkbeam.runners.spark.parts.units import long_literal, units
from sparkbeam.runners.spark.plan.delays import SHIFT_MICROS, SPARK_LAST_MICROS
from sparkbeam.runners.spark.plan.judging import JudgeRule, derived_judges


@dataclass(frozen=True)
class Judge(JudgeRule):
    """A column's judge (`plan.judging.JudgeRule`) with the Spark columns it makes."""

    def __call__(self, value: Column) -> Column:
        return as_spark_time(_plus(value, self.kind, self.offset), self.kind)

    def late(self, column: str) -> Late:
        """How `late_filter` judges `column` by this judge and names its watermark."""
        shift = SHIFT_MICROS if self.kind is _dt.datetime else SHIFT_MICROS // 1000
        return Late(self(F.col(column)), column, self.kind is _dt.datetime, shift, self.steps)


WATERMARK_DELAY_KEY = "spark.watermarkDelayMs"


JUDGE = "__sparkbeam_judge"


FAR_FUTURE_INT = SPARK_LAST_MICROS // 1000 - SHIFT_MICROS // 1000
"""The sentinel's time on an integer column (read as milliseconds inside Spark)."""


INT_TIME_RANGE = (-(SHIFT_MICROS // 1000), FAR_FUTURE_INT // 2)
"""The integer event times the Spark runner holds: from where Spark's time (the value plus
the shift, in milliseconds) is 0, to half the sentinel's (room for sizes and delays), about
4.5e15: microseconds since 1970 up to the year 2111, milliseconds far beyond."""

INT_TIME_OUTSIDE = (
    f"the Spark runner holds integer event times from {INT_TIME_RANGE[0]} to "
    f"{INT_TIME_RANGE[1]} (Spark keeps them as milliseconds moved by {-INT_TIME_RANGE[0]}, in "
    "64-bit microseconds, and ends the input beyond them), the direct runner any 64-bit "
    "integer; filter such rows out or use a smaller unit"
)
"""What a `DataError` says of an integer event time outside `INT_TIME_RANGE`."""

INT_WINDOW_OUTSIDE = (
    f"the row's window ends after {INT_TIME_RANGE[1]}, the latest integer time the Spark "
    "runner holds on a stream (its end of input lies beyond it, to close every window; the "
    "direct runner holds any 64-bit integer); filter such rows out, or make the size, slide, "
    "offset or gap smaller"
)
"""What a `DataError` says of a window on an integer column of a stream that ends after
`INT_TIME_RANGE` (`StreamingTranslation.window_bounds`)."""


def as_spark_time(value: Column, kind: type) -> Column:
    """A time value as the (shifted) Spark timestamp the watermark is kept in.

    Integer times are read as milliseconds, so Spark's millisecond watermark
    rounds nothing.
    """
    if kind is _dt.datetime:
        return F.timestamp_micros(F.unix_micros(value) + long_literal(SHIFT_MICROS))
    return F.timestamp_millis(value + long_literal(SHIFT_MICROS // 1000))


def _plus(value: Column, kind: type, amount: int) -> Column:
    if kind is _dt.datetime:
        return F.timestamp_micros(units(value, kind) + long_literal(amount))
    return value + long_literal(amount)


def own_judge(kind: type) -> Judge:
    return Judge(kind, 1)


def stateful(frame: DataFrame, judges: Sequence[Column], delay_ms: int = 0) -> DataFrame:
    """`frame` with the judge column Spark's stateful operators key their watermark on."""
    judge = judges[0] if len(judges) == 1 else F.least(*judges)
    return with_watermark_metadata(frame.withColumn(JUDGE, judge), JUDGE, delay_ms)


def with_watermark_metadata(frame: DataFrame, column: str, delay_ms: int = 0) -> DataFrame:
    """`frame` with Spark's watermark metadata on `column`, which its stateful operators then
    key their watermark on.

    Set by `withMetadata`, never by an alias inside `withColumn`: Spark
    Connect's `withColumn` aliases the column again with no metadata, which
    drops the inner alias's (the query then has no watermark: "append ...
    without watermark")."""
    return frame.withMetadata(column, {WATERMARK_DELAY_KEY: delay_ms})


def derive_judges(
    node: Node, inputs: Sequence[Mapping[str, Judge]], meets: bool = False
) -> dict[str, Judge]:
    """The judges of a node's output from its inputs' judges (`plan.judging.derived_judges`)."""
    return derived_judges(node, inputs, meets, own_judge)
