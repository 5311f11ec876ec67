"""`Session`: on bounded input a window over each key's rows in time order; on unbounded
input session windows in `transformWithState` (`SessionWindows`), and a `Session` then a
`CombinePerKey` grouped on `window_start` as one operator (`SessionGroups`).

Session windows on unbounded input: per key, rows wait in list state. Each row registers
an event-time timer at the earliest watermark that could close a session ending at
`t + gap`: the session `[first, last + gap)` closes when the model's watermark on the time
column passes `last + gap`, which on Spark reads `J(last + gap) <= W` (see
`exact.judges`), so the timer is `J(t + gap)` rounded up to the millisecond. When a timer
fires, the held rows are cut into sessions (consecutive times at most `gap` apart) and the
closed ones are emitted with their bounds. Later rows that extend a session register later
timers, so no session closes early.

A `Session` then a `CombinePerKey` on its `window_start`: the model's watermark on a
session's `window_start` is the watermark on the time column capped by the start of the
oldest session still open, of any key (`Session.watermark_rule`, `Derived.held`). A group
keyed on `window_start` (and no other watermarked column) is emitted once that watermark
passes it. Spark's stateful operators see one key at a time, so no judge column can follow
that cap. `SessionGroups` holds every key's sessions in one state (one task) and does what
the two transforms do together: sessions close as the watermark passes their end (an
event-time timer per row, as in `SessionWindows`), their rows wait as closed rows, and a
group is aggregated and emitted once its `window_start` lies below both the watermark and
the oldest open session's start. End of input (the sentinel) closes everything.

Use it only where needed: grouping on `window_end` as well keeps each key in its own task
(`window_end`'s watermark is the time column's, with a judge).
"""

from __future__ import annotations

import datetime as _dt
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql import Column, DataFrame, Row, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.streaming.stateful_processor import (
    ExpiredTimerInfo,
    StatefulProcessorHandle,
    TimerValues,
)

from sparkbeam.graph import Node
from sparkbeam.runners.shared.accumulators import accumulators_for
from sparkbeam.runners.spark.exact.judges import stateful
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
from sparkbeam.runners.spark.parts.python_functions import fail_when
from sparkbeam.runners.spark.parts.units import from_units, long_literal, units
from sparkbeam.runners.spark.translate.context import (
    Made,
    StreamingContext,
    Translation,
    always,
    as_streaming,
    input_schema,
    require_time,
    streaming,
    translates,
)
from sparkbeam.schema import Schema
from sparkbeam.transforms.combine import CombinePerKey
from sparkbeam.transforms.windows import WINDOW_END, WINDOW_START, Session


def session_in_range(
    frame: DataFrame,
    column: str,
    gap: int,
    bounds: tuple[int, int, str],
    label: str,
    schema: Schema,
) -> DataFrame:
    """`frame`, failing the job with a `DataError` naming the row when a session ending at
    its time plus `gap` would end beyond `bounds` (`Translation.window_bounds`; a session's
    end is its last row's time plus the gap, its start a row's time; as the direct runner)."""
    kind = schema.type_of(column)
    _, high, words = bounds
    outside = units(F.col(column), kind) > long_literal(high - gap)
    return frame.withColumn(column, fail_when(outside, F.col(column), label, schema, words))


def warn_one_task(session: Session, label: str) -> None:
    """Warn, once per transform, that a `Session` without keys runs in one task: its rows are
    one sequence (in place of Spark's own warning, repeated for every window it computes,
    which a session the runner starts drops: `quiet.ONE_PARTITION_NOTICE`)."""
    if session.keys:
        return
    warnings.warn(
        f"{label}: a Session without keys makes every row one sequence, so Spark "
        "computes its sessions in one task, on one core; the rows are right. Give keys= "
        "(the columns a session belongs to, such as a user id) to compute them per key, "
        "spread over the cluster",
        stacklevel=2,
    )


@translates(Session)
def session(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> Made:
    transform = node.transform
    assert isinstance(transform, Session)
    warn_one_task(transform, node.label)
    schema = input_schema(translation, node)
    kind = schema.type_of(transform.column)
    gap_units = transform.gap_units(schema, node.label)
    gap = long_literal(gap_units)
    t = units(F.col(transform.column), kind)
    keys = list(transform.keys)
    ordered = Window.partitionBy(*keys).orderBy(t)
    # a first row (no lag), or a difference beyond 64 bits, starts a session too
    starts = F.when(F.coalesce(F.try_subtract(t, F.lag(t).over(ordered)) > gap, F.lit(True)), 1)
    starts = starts.otherwise(0)
    frame = require_time(inputs[0], transform.column, node.label, schema)
    bounds = translation.window_bounds(kind)
    numbered = session_in_range(
        frame, transform.column, gap_units, bounds, node.label, schema
    ).select(
        "*",
        F.sum(starts)
        .over(ordered.rowsBetween(Window.unboundedPreceding, Window.currentRow))
        .alias("__sparkbeam_session"),
    )
    whole = Window.partitionBy(*keys, "__sparkbeam_session")
    return Made(
        numbered.select(
            *[F.col(name) for name in schema.names],
            from_units(F.min(t).over(whole), kind).alias(WINDOW_START),
            from_units(F.max(t).over(whole) + gap, kind).alias(WINDOW_END),
        )
    )


def session_then_combine(run: StreamingContext, session: Node, node: Node) -> DataFrame:
    """A `CombinePerKey` on a `Session`'s `window_start` (and no other watermarked key): the
    two as one operator over all keys (`SessionGroups`), from the Session's input."""
    transform, windows = node.transform, session.transform
    assert isinstance(transform, CombinePerKey) and isinstance(windows, Session)
    schema = run.nodes[session.inputs[0]].info.schema
    judge = run.exact_judge(session, windows.column)
    gap = windows.gap_units(schema, session.label)
    bounds = run.window_bounds(schema.type_of(windows.column))
    checked = session_in_range(
        run.frames[session.inputs[0]], windows.column, gap, bounds, session.label, schema
    )
    frame = stateful(checked, [judge(F.col(windows.column))])
    return session_groups(
        frame,
        schema,
        windows.column,
        gap,
        windows.keys,
        judge,
        transform.keys,
        transform.aggregates,
        node.info.schema,
        node.label,
    )


@streaming(Session, state_store=always)
def streaming_session(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> Made:
    run = as_streaming(translation)
    transform = node.transform
    assert isinstance(transform, Session)
    warn_one_task(transform, node.label)
    schema = run.nodes[node.inputs[0]].info.schema
    judge = run.exact_judge(node, transform.column)
    gap = transform.gap_units(schema, node.label)
    bounds = run.window_bounds(schema.type_of(transform.column))
    checked = session_in_range(inputs[0], transform.column, gap, bounds, node.label, schema)
    frame = stateful(checked, [judge(F.col(transform.column))])
    return Made(
        session_stream(frame, schema, transform.column, gap, transform.keys, judge, node.label)
    )


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


class SessionGroups(HeldRows):
    """All keys' held rows; closed sessions' rows until their group's `window_start` passes."""

    def __init__(
        self,
        names: list[str],
        state_schema: T.StructType,
        closed_schema: T.StructType,
        gap: int,
        session_keys: tuple[str, ...],
        group_keys: tuple[str, ...],
        aggregates: Any,
        session_schema: Schema,
        out_schema: Schema,
    ) -> None:
        super().__init__(names, state_schema)
        self.closed_schema = closed_schema
        self.gap = gap
        self.session_keys = [names.index(key) for key in session_keys]
        self.session_names = list(session_schema.names)
        self.group_keys = [self.session_names.index(key) for key in group_keys]
        self.group_names = group_keys
        self.start = self.session_names.index(WINDOW_START)
        self.aggregates = aggregates
        self.session_schema = session_schema
        self.out_schema = out_schema

    def init(self, handle: StatefulProcessorHandle) -> None:
        super().init(handle)
        self.closed = handle.getListState("closed", self.closed_schema)

    def handleExpiredTimer(
        self, key: Any, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
    ) -> Iterator[Row]:
        watermark = timerValues.getCurrentWatermarkInMs()
        by_key: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
        for row in self.held():
            by_key.setdefault(tuple(row[i] for i in self.session_keys), []).append(row)
        closed = list(self.closed.get()) if self.closed.exists() else []
        still_open: list[tuple[Any, ...]] = []
        oldest: int | None = None
        for rows in by_key.values():
            rows.sort(key=lambda r: (r[self.order], r[self.sequence]))
            sessions: list[list[tuple[Any, ...]]] = []
            for row in rows:
                if sessions and row[self.order] - sessions[-1][-1][self.order] <= self.gap:
                    sessions[-1].append(row)
                else:
                    sessions.append([row])
            for session in sessions:
                first = session[0][self.order]
                if session[-1][self.release] <= watermark:  # closed: its end passed
                    end = session[-1][self.order] + self.gap
                    ordered = sorted(session, key=lambda r: r[self.sequence])
                    closed += [(*r[: len(self.names)], first, end) for r in ordered]
                else:
                    still_open.extend(session)
                    oldest = first if oldest is None else min(oldest, first)
        self.keep(still_open)
        # Closed sessions ended below the watermark, so their starts are below it too:
        # a group goes once its start is below the oldest open session's as well.
        ready = [r for r in closed if oldest is None or r[self.start] < oldest]
        waiting = [r for r in closed if oldest is not None and r[self.start] >= oldest]
        if waiting:
            self.closed.put(waiting)
        else:
            self.closed.clear()
        return iter(self._groups(ready))

    def _groups(self, rows: list[tuple[Any, ...]]) -> list[Row]:
        groups: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
        for row in rows:
            groups.setdefault(tuple(row[i] for i in self.group_keys), []).append(row)
        out = []
        for group_key, members in groups.items():
            columns = {
                name: [row[i] for row in members] for i, name in enumerate(self.session_names)
            }
            values = dict(zip(self.group_names, group_key, strict=True))
            for name, aggregate in self.aggregates:
                table = accumulators_for(
                    aggregate, self.session_schema, self.out_schema.type_of(name), name
                )
                table.add([0] * len(members), columns)
                values[name] = table.pop(0)
            out.append(Row(**values))
        return out


def session_groups(
    frame: DataFrame,
    schema: Schema,
    column: str,
    gap: int,
    session_keys: tuple[str, ...],
    end_judge: Any,
    group_keys: tuple[str, ...],
    aggregates: Any,
    out_schema: Schema,
    label: str,
) -> DataFrame:
    """The groups of `frame`'s sessions by `group_keys`, each once its `window_start` passes
    the model's watermark (module docstring). `frame` is the Session's input, with a judge
    column carrying Spark's watermark metadata; `end_judge(v)` judges a window end `v`."""
    kind = schema.type_of(column)
    released = held_input(frame, schema, column, gap, end_judge, [])
    session_schema = schema.with_columns((WINDOW_START, kind), (WINDOW_END, kind))
    processor = SessionGroups(
        list(schema.names),
        spark_schema(held_schema(schema), label),
        spark_schema(as_longs(session_schema), label),
        gap,
        session_keys,
        group_keys,
        aggregates,
        session_schema,
        out_schema,
    )
    groups = transform_with_state(
        grouped(released, ()),
        processor,
        spark_schema(as_longs(out_schema), label),
    )
    return groups.select(*as_times(out_schema))
