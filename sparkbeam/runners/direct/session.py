"""Direct operator for `Session` (rules in `transforms.windows.Session`)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

from sparkbeam.graph import EdgeInfo, Node
from sparkbeam.messages import Watermark
from sparkbeam.runners.direct.operator import Chunk, Message, Operator, Owner
from sparkbeam.runners.direct.windows import require_bounds, require_times
from sparkbeam.schema import one_nan_in
from sparkbeam.transforms.windows import WINDOW_END, WINDOW_START, Session, bounds_of


class OpenSession:
    __slots__ = ("first", "last", "rows")

    def __init__(self, first: int, last: int, rows: list[tuple[Any, ...]]) -> None:
        self.first = first
        self.last = last
        self.rows = rows


class SessionOperator(Operator):
    """State: per key, the open sessions in start order, each with its rows.

    Sessions of one key are more than `gap` apart, so a new row joins the
    contiguous run of sessions within `gap` of it, merging them.

    Checkpoint: the open sessions of every key. Rescale: each key's sessions
    go to the unit that owns the key.
    """

    def __init__(self, node: Node, inputs: Sequence[EdgeInfo]) -> None:
        super().__init__(node, inputs)
        transform = node.transform
        assert isinstance(transform, Session)
        self.transform = transform
        self.gap = transform.gap_units(inputs[0].schema)
        self.names = list(inputs[0].schema.names)
        self.time_position = self.names.index(transform.column)
        self.key_positions = [self.names.index(key) for key in transform.keys]
        self.kind = inputs[0].schema.type_of(transform.column)
        self.latest_time = bounds_of(self.kind)[1] - self.gap
        self.float_keys = [key for key in transform.keys if inputs[0].schema.type_of(key) is float]
        self.sessions: dict[Hashable, list[OpenSession]] = {}
        self.held = 0

    def on_chunk(self, port: int, chunk: Chunk) -> list[Message]:
        times = require_times(self, chunk, self.transform.column)
        gap, position, keys = self.gap, self.time_position, self.key_positions
        if times and max(times) > self.latest_time:
            # a session ends at its last row's time plus the gap
            require_bounds(self, chunk, [t + gap for t in times], 0, range(chunk.size), self.kind)
        columns = one_nan_in(chunk.columns, self.float_keys)
        for row in zip(*(columns[name] for name in self.names), strict=True):
            t = row[position]
            key = tuple(row[i] for i in keys)
            sessions = self.sessions.setdefault(key, [])
            near = [s for s in sessions if s.first - gap <= t <= s.last + gap]
            if near:
                merged = near[0]
                for other in near[1:]:
                    merged.rows.extend(other.rows)
                    sessions.remove(other)
                merged.first = min(merged.first, t)
                merged.last = max(near[-1].last, t)
                merged.rows.append(row)
            else:
                sessions.append(OpenSession(t, t, [row]))
                sessions.sort(key=lambda s: s.first)
        self.held += chunk.size
        return []

    def on_watermark(self, port: int, watermark: Watermark) -> list[Message]:
        if watermark.column != self.transform.column:
            return []
        mark, gap = watermark.value, self.gap
        closed: list[OpenSession] = []
        oldest: int | None = None
        for key in list(self.sessions):
            sessions = self.sessions[key]
            still_open = []
            for session in sessions:
                if session.last + gap < mark:
                    closed.append(session)
                else:
                    still_open.append(session)
                    oldest = session.first if oldest is None else min(oldest, session.first)
            if still_open:
                self.sessions[key] = still_open
            else:
                del self.sessions[key]
        out: list[Message] = [self._emit(closed)] if closed else []
        held = self.node.rule.held_columns()  # capped by the oldest open session
        derived = self.derive(watermark.column, mark)
        if oldest is not None:
            derived = [(c, min(v, oldest) if c in held else v) for c, v in derived]
        return out + self.watermarks(derived)

    def on_end(self) -> list[Message]:
        sessions = [s for per_key in self.sessions.values() for s in per_key]
        self.sessions.clear()
        return [self._emit(sessions)] if sessions else []

    def _emit(self, sessions: list[OpenSession]) -> Chunk:
        rows, starts, ends = [], [], []
        for session in sessions:
            rows.extend(session.rows)
            starts.extend([session.first] * len(session.rows))
            ends.extend([session.last + self.gap] * len(session.rows))
        self.held -= len(rows)
        chunk = Chunk.from_rows(self.names, rows)
        chunk.columns[WINDOW_START] = starts
        chunk.columns[WINDOW_END] = ends
        return chunk

    def state_size(self) -> int:
        return self.held

    def snapshot(self) -> dict[Any, list[tuple[int, int, tuple[Any, ...]]]]:
        return {
            key: [(s.first, s.last, tuple(s.rows)) for s in sessions]
            for key, sessions in self.sessions.items()
        }

    def restore(self, state: dict[Any, list[tuple[int, int, tuple[Any, ...]]]]) -> None:
        self.sessions = {
            key: [OpenSession(first, last, list(rows)) for first, last, rows in sessions]
            for key, sessions in state.items()
        }
        self.held = sum(len(s.rows) for sessions in self.sessions.values() for s in sessions)

    def rescale(self, states: Sequence[Any], units: int, owner: Owner) -> list[Any]:
        moved: list[dict[Any, Any]] = [{} for _ in range(units)]
        for state in states:
            for key, sessions in state.items():
                moved[owner(key)][key] = sessions
        return moved
