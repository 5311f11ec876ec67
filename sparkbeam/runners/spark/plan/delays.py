"""How far Spark's time reaches, and the longest `WithWatermark` delay the Spark runner takes on
a stream within it (`refuse_long_delays`).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping, Sequence

from sparkbeam.errors import PipelineError
from sparkbeam.graph import Node
from sparkbeam.time import MAX_MICROS, MIN_MICROS, shown_value
from sparkbeam.transforms.watermark import WithWatermark

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


CALENDAR_SPAN_MICROS = MAX_MICROS - MIN_MICROS


MAX_DELAY_MS = (FAR_FUTURE_MICROS - MAX_MICROS - CALENDAR_SPAN_MICROS) // 1000
"""The longest `WithWatermark` delay (ms) the Spark runner takes on a datetime column: the
sentinel's watermark then still passes every window of the calendar (a window reaches at
most a calendar's span beyond its rows), about 267,000 years."""


SPARK_MAX_DELAY_MS = (2**63 - 1) // 1000
"""The largest watermark delay Spark parses: `withWatermark`'s interval is kept in microseconds
(a 64-bit integer); beyond it Spark fails with CANNOT_PARSE_INTERVAL."""


def long_delay(node: Node) -> PipelineError | None:
    """Why the Spark runner cannot declare the watermark of `node` (a `WithWatermark`) on a
    stream: a delay beyond `MAX_DELAY_MS` (datetimes) or `SPARK_MAX_DELAY_MS`; None where it
    can."""
    transform = node.transform
    assert isinstance(transform, WithWatermark)
    schema = node.info.schema
    kind = schema.type_of(transform.column)
    delay = transform.watermark_delay_units(schema, node.label)
    delay_ms = delay // 1000 if kind is _dt.datetime else delay
    limit = MAX_DELAY_MS if kind is _dt.datetime else SPARK_MAX_DELAY_MS
    if delay_ms <= limit:
        return None
    unit = "milliseconds" if kind is _dt.datetime else "units"
    why = (
        "about 265,000 years: beyond it the end of input could not close the windows of "
        "year 9999 inside Spark, whose timestamps are 64-bit microseconds"
        if kind is _dt.datetime
        else "about 292,000 years: its interval in microseconds is a 64-bit integer"
    )
    given = shown_value(transform.delay)
    if transform.allowed_lateness != 0:
        given += f" plus allowed_lateness {shown_value(transform.allowed_lateness)}"
    return PipelineError(
        f"{node.label}: delay {given} is {delay_ms} {unit}; Spark's "
        f"watermark delay is at most {limit} milliseconds on the Spark runner ({why}), so "
        "it cannot run it; use a delay within that range"
    )


def refuse_long_delays(nodes: Sequence[Node], origins: Mapping[int, frozenset[int]]) -> None:
    """A `WithWatermark` on a stream whose delay Spark cannot hold (`long_delay`)."""
    for node in nodes:
        if isinstance(node.transform, WithWatermark):
            refusal = long_delay(node)
            if refusal is not None:
                raise refusal
