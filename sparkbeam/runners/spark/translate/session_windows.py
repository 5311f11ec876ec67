"""`Session` on unbounded input: session windows in `transformWithState`.

Per key, rows wait in list state. Each row registers an event-time timer at
the earliest watermark that could close a session ending at `t + gap`: the
session `[first, last + gap)` closes when the model's watermark on the time
column passes `last + gap`, which on Spark reads `J(last + gap) <= W` (see
`streaming`), so the timer is `J(t + gap)` rounded up to the millisecond.
When a timer fires, the held rows are cut into sessions (consecutive times at
most `gap` apart) and the closed ones are emitted with their bounds. Later
rows that extend a session register later timers, so no session closes early.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterator
from typing import Any

from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.streaming.stateful_processor import ExpiredTimerInfo, TimerValues

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
from sparkbeam.schema import Schema
from sparkbeam.transforms.windows import WINDOW_END, WINDOW_START


class SessionWindows(HeldRows):
    """Holds a key's rows (ordered by time); emits each session's rows once the watermark
    closes it. A row's release is that of a session ending at `t + gap`."""

    def __init__(self, names: list[str], state_schema: T.StructType, gap: int) -> None:
        super().__init__(names, state_schema)
        self.gap = gap

    def handleExpiredTimer(
        self, key: Any, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
    ) -> Iterator[Row]:
        watermark = timerValues.getCurrentWatermarkInMs()
        held = sorted(self.held(), key=lambda row: (row[self.order], row[self.sequence]))
        sessions: list[list[tuple[Any, ...]]] = []
        for row in held:
            if sessions and row[self.order] - sessions[-1][-1][self.order] <= self.gap:
                sessions[-1].append(row)
            else:
                sessions.append([row])
        out: list[Row] = []
        rest: list[tuple[Any, ...]] = []
        for session in sessions:
            last = session[-1]
            if last[self.release] <= watermark:  # the session's end has passed the watermark
                first, end = session[0][self.order], last[self.order] + self.gap
                for row in sorted(session, key=lambda r: r[self.sequence]):
                    values = dict(zip(self.names, row, strict=False))
                    out.append(Row(**values, **{WINDOW_START: first, WINDOW_END: end}))
            else:
                rest.extend(session)
        self.keep(rest)
        return iter(out)


def held_input(
    frame: DataFrame,
    schema: Schema,
    column: str,
    gap: int,
    end_judge: Any,
    keys: list[Column],
) -> DataFrame:
    """`frame`'s rows as `SessionWindows` holds them: ordered by time, each released by a
    session ending at `t + gap` (its judge rounded up to the millisecond)."""
    kind = schema.type_of(column)
    time = F.unix_micros(column) if kind is _dt.datetime else F.col(column)
    end = F.timestamp_micros(time + F.lit(gap)) if kind is _dt.datetime else time + F.lit(gap)
    prepared = frame.select(
        *in_micros(schema),
        time.alias(ORDER),
        end_judge(end).alias("__sparkbeam_end_judge"),
        "__sparkbeam_judge",
        *keys,
    )
    return with_release(prepared, F.col("__sparkbeam_end_judge"))


def session_stream(
    frame: DataFrame,
    schema: Schema,
    column: str,
    gap: int,
    keys: tuple[str, ...],
    end_judge: Any,
    label: str,
) -> DataFrame:
    """Rows of `frame` with their sessions' bounds, as the watermark closes the sessions.

    `end_judge(v)` is the judge (a Spark timestamp) of a window end `v`; `frame`
    carries a judge column with Spark's watermark metadata.
    """
    kind = schema.type_of(column)
    released = held_input(frame, schema, column, gap, end_judge, key_columns(keys))
    out_schema = as_longs(schema).with_columns((WINDOW_START, int), (WINDOW_END, int))
    sessions = transform_with_state(
        grouped(released, keys),
        SessionWindows(list(schema.names), spark_schema(held_schema(schema), label), gap),
        spark_schema(out_schema, label),
    )
    return sessions.select(*as_times(schema.with_columns((WINDOW_START, kind), (WINDOW_END, kind))))
