"""`Session` then `CombinePerKey` grouped on `window_start`, on unbounded input: one operator.

The model's watermark on a session's `window_start` is the watermark on the
time column capped by the start of the oldest session still open, of any key
(`Session.watermark_rule`, `Derived.held`). A group keyed on `window_start`
(and no other watermarked column) is emitted once that watermark passes it.
Spark's stateful operators see one key at a time, so no judge column can
follow that cap. This operator holds every key's sessions in one state (one
task) and does what the two transforms do together: sessions close as the
watermark passes their end (an event-time timer per row, as in
`session.SessionWindows`), their rows wait as closed rows, and a group is
aggregated and emitted once its `window_start` lies below both the watermark
and the oldest open session's start. End of input (the sentinel) closes
everything.

Use it only where needed: grouping on `window_end` as well keeps each key in
its own task (`window_end`'s watermark is the time column's, with a judge).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pyspark.sql import DataFrame, Row
from pyspark.sql import types as T
from pyspark.sql.streaming.stateful_processor import (
    ExpiredTimerInfo,
    StatefulProcessorHandle,
    TimerValues,
)

from sparkbeam.runners.shared.accumulators import accumulators_for
from sparkbeam.runners.spark.parts.arrow import spark_schema
from sparkbeam.runners.spark.parts.keyed_state import (
    HeldRows,
    as_longs,
    as_times,
    grouped,
    held_schema,
    transform_with_state,
)
from sparkbeam.runners.spark.translate.session_windows import held_input
from sparkbeam.schema import Schema
from sparkbeam.transforms.windows import WINDOW_END, WINDOW_START


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
