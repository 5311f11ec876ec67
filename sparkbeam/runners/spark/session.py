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

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.streaming.stateful_processor import (
    ExpiredTimerInfo,
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)

from sparkbeam.runners.spark.arrow import spark_schema
from sparkbeam.runners.spark.keyed_state import as_longs, as_times, grouped, in_micros, key_columns
from sparkbeam.schema import Schema
from sparkbeam.transforms.windows import WINDOW_END, WINDOW_START

TIME = "__sparkbeam_time"
JUDGE_END = "__sparkbeam_judge_end_us"
SEQUENCE = "__sparkbeam_seq"


class SessionWindows(StatefulProcessor):
    """Holds a key's rows; emits each session's rows once the watermark closes it."""

    def __init__(self, names: list[str], state_schema: T.StructType, gap: int) -> None:
        self.names = names
        self.state_schema = state_schema
        self.gap = gap
        self.time = len(names)
        self.judge = len(names) + 1
        self.sequence = len(names) + 2

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.rows = handle.getListState("rows", self.state_schema)
        self.count = handle.getValueState("count", "count LONG")

    def handleInputRows(
        self, key: Any, rows: Iterator[Row], timerValues: TimerValues
    ) -> Iterator[Row]:
        stored = self.count.get()
        arrivals = stored[0] if stored else 0
        held = []
        for row in rows:
            held.append((*(row[n] for n in self.names), row[TIME], row[JUDGE_END], arrivals))
            arrivals += 1
        if held:
            self.rows.appendList(held)
            self.count.update((arrivals,))
            for timer in {-(-row[self.judge] // 1000) for row in held}:
                self.handle.registerTimer(timer)
        return iter([])

    def handleExpiredTimer(
        self, key: Any, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
    ) -> Iterator[Row]:
        watermark = timerValues.getCurrentWatermarkInMs()
        held = sorted(self.rows.get() if self.rows.exists() else [], key=self._order)
        sessions: list[list[tuple[Any, ...]]] = []
        for row in held:
            if sessions and row[self.time] - sessions[-1][-1][self.time] <= self.gap:
                sessions[-1].append(row)
            else:
                sessions.append([row])
        out: list[Row] = []
        rest: list[tuple[Any, ...]] = []
        for session in sessions:
            last = session[-1]
            # The session ends at last + gap; it is closed when J(end) <= W, in milliseconds.
            if -(-last[self.judge] // 1000) <= watermark:
                first, end = session[0][self.time], last[self.time] + self.gap
                for row in sorted(session, key=lambda r: r[self.sequence]):
                    values = dict(zip(self.names, row, strict=False))
                    out.append(Row(**values, **{WINDOW_START: first, WINDOW_END: end}))
            else:
                rest.extend(session)
        if rest:
            self.rows.put(rest)
        else:
            self.rows.clear()
        return iter(out)

    def _order(self, row: tuple[Any, ...]) -> tuple[Any, Any]:
        return row[self.time], row[self.sequence]

    def close(self) -> None:
        pass


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
    longs = as_longs(schema)
    time = F.unix_micros(column) if kind is _dt.datetime else F.col(column)
    end = F.timestamp_micros(time + F.lit(gap)) if kind is _dt.datetime else time + F.lit(gap)
    prepared = frame.select(
        *in_micros(schema),
        time.alias(TIME),
        F.unix_micros(end_judge(end)).alias(JUDGE_END),
        "__sparkbeam_judge",
        *key_columns(keys),
    )
    state_schema = spark_schema(
        longs.with_columns((TIME, int), (JUDGE_END, int), (SEQUENCE, int)), label
    )
    out_schema = longs.with_columns((WINDOW_START, int), (WINDOW_END, int))
    sessions = grouped(prepared, keys).transformWithState(
        SessionWindows(list(schema.names), state_schema, gap),
        spark_schema(out_schema, label),
        "Append",
        "EventTime",
    )
    return sessions.select(*as_times(schema.with_columns((WINDOW_START, kind), (WINDOW_END, kind))))
