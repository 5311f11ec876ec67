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
from dataclasses import dataclass, replace

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from sparkbeam.derivation import Add, Derived, Step
from sparkbeam.graph import Node
from sparkbeam.runners.spark.exact.late_filter import (
    Late,
    Steps,
)
from sparkbeam.runners.spark.translate import (
    _long,
    units,
)
from sparkbeam.time import MAX_MICROS, MIN_MICROS


@dataclass(frozen=True)
class Judge:
    """A column's judge: `J(v) = spark_time(v + offset)`, which Spark compares with `W`.

    Every rule of the model moves a watermark by a constant or floors it to an
    aligned grid, so every judge is the event time's own judge (`offset = 1`)
    moved by a constant: two columns with equal judges close at the same `W`.
    """

    kind: type
    offset: int
    steps: Steps = ()
    """How the column's model watermark follows from the event time's (`late_filter.mark`)."""
    held: bool = False
    """The model caps this column's watermark by rows an operator holds (`Derived.held`):
    the judge closes no earlier than the model's watermark, but may close later."""
    apart: str | None = None
    """The label of a `Union` or `Join` where watermarks of several `WithWatermark`s meet with
    this column derived differently on its inputs: the model's watermark there is the minimum
    of the derived watermarks, which Spark's one watermark (the minimum before derivation)
    cannot give; the judge may close later (`merged`)."""

    def __call__(self, value: Column) -> Column:
        return as_spark_time(_plus(value, self.kind, self.offset), self.kind)

    def moved(self, amount: int, step: Step) -> Judge:
        """The judge of `v` that this judge gives to `v + amount`; its watermark is this one's
        through `step`."""
        return Judge(self.kind, self.offset + amount, (*self.steps, step), self.held, self.apart)

    def through(self, derived: Derived) -> Judge:
        """The judge of the column `derived` makes from this one's.

        `Add(a)`: `v < wm + a` exactly when `v - a < wm`. `Floor(u)` gives grid
        values, and for a grid value `v`, `v < floor(wm)` exactly when
        `v + u - 1 < wm`.
        """
        judge = self
        for step in derived.steps:
            amount = -step.amount if isinstance(step, Add) else step.unit - 1
            judge = judge.moved(amount, step)
        return replace(judge, held=judge.held or derived.held)

    def late(self, column: str) -> Late:
        """How `late_filter` judges `column` by this judge and names its watermark."""
        shift = SHIFT_MICROS if self.kind is _dt.datetime else SHIFT_MICROS // 1000
        return Late(self(F.col(column)), column, self.kind is _dt.datetime, shift, self.steps)


WATERMARK_DELAY_KEY = "spark.watermarkDelayMs"


JUDGE = "__sparkbeam_judge"


SHIFT_MICROS = (_dt.datetime(1970, 1, 1) - _dt.datetime(1, 1, 1)) // _dt.timedelta(microseconds=1)
"""Spark's watermark starts at 0 (1970) and never goes below it, so times before 1970 would
all look late: Spark sees every event time moved forward by this much (year 1 becomes 1970,
9999 becomes 11968). Spark's timestamps are 64-bit microseconds (to about year 294,000), so
every shifted time of the calendar is one; Spark writes those past 9999 with a sign
(`+10968-01-01T...`, read by `queries.spark_time_ms`)."""


SPARK_LAST_MICROS = 9_000_000_000_000_000_000
"""The latest Spark time the runner uses (about year 287,000, below Spark's 64-bit limit
with room for the arithmetic on it)."""


FAR_FUTURE_MICROS = SPARK_LAST_MICROS - SHIFT_MICROS
"""The end-of-input sentinel's time on a datetime column (microseconds since 1970): far
beyond year 9999, so its watermark closes every window the calendar holds."""


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


CALENDAR_SPAN_MICROS = MAX_MICROS - MIN_MICROS


MAX_DELAY_MS = (FAR_FUTURE_MICROS - MAX_MICROS - CALENDAR_SPAN_MICROS) // 1000
"""The longest `WithWatermark` delay (ms) the Spark runner takes on a datetime column: the
sentinel's watermark then still passes every window of the calendar (a window reaches at
most a calendar's span beyond its rows), about 267,000 years."""


def as_spark_time(value: Column, kind: type) -> Column:
    """A time value as the (shifted) Spark timestamp the watermark is kept in.

    Integer times are read as milliseconds, so Spark's millisecond watermark
    rounds nothing.
    """
    if kind is _dt.datetime:
        return F.timestamp_micros(F.unix_micros(value) + _long(SHIFT_MICROS))
    return F.timestamp_millis(value + _long(SHIFT_MICROS // 1000))


def _plus(value: Column, kind: type, amount: int) -> Column:
    if kind is _dt.datetime:
        return F.timestamp_micros(units(value, kind) + _long(amount))
    return value + _long(amount)


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
    """The judges of a node's output from its inputs' judges: its watermark rule (`Node.rule`),
    compiled.

    Where inputs meet, a column's judge is the latest of theirs (the judge of
    the minimum of their watermarks: it closes when the last of them does).
    Where watermarks of several `WithWatermark`s meet (`meets`), that is
    exact only for a column derived alike on every input (`merged`).
    """
    out: dict[str, Judge] = {}
    for derived in node.rule.derived:
        if derived.column not in node.info.watermarked:
            continue
        bases = [judges.get(derived.source) for judges in inputs]
        if bases and all(base is not None for base in bases):
            judges = [b.through(derived) for b in bases if b is not None]
            out[derived.column] = merged(judges, node.label if meets else None)
    for column in node.rule.own:
        out[column] = own_judge(node.info.schema.type_of(column))
    return out


def merged(judges: list[Judge], meeting: str | None) -> Judge:
    """The judge of the minimum of several watermarks: the latest of their judges.

    With one origin (`meeting` None) every input's watermark follows from the
    same one. Where watermarks of several `WithWatermark`s meet at `meeting`,
    Spark's watermark is the minimum of theirs, `W = min(wm_a, wm_b)`, and
    the model's of the column `min(f_a(wm_a), f_b(wm_b))`: a judge of `W`
    alone is exact when `f_a = f_b` (then that is `f(W)`), not otherwise.
    With tumbling windows of 10 and 4 on `window_end`, wm_a = 100 and
    wm_b = 9 close window_end 10 in the model (10 < min(110, 12)); with
    wm_a = 9 and wm_b = 100 they do not (10 < min(10, 104) fails); Spark
    sees W = 9 both times. Such a column's judge is marked `apart`.
    """
    latest = max(judges, key=lambda judge: judge.offset)
    apart = next((judge.apart for judge in judges if judge.apart), None)
    if meeting is not None and len(set(replace(j, apart=None) for j in judges)) > 1:
        apart = apart or meeting
    return replace(latest, apart=apart)
