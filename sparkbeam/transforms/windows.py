"""Window assignment: `Tumble` and `Hop` (and, later, `Session`).

Windows are half-open, `[start, end)`, aligned to the epoch plus `offset`.
Both add the columns `window_start` and `window_end`, of the time column's
type. Assignment is a pure function of the row's time (`sparkbeam.time`).
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from sparkbeam.errors import PipelineError
from sparkbeam.graph import EdgeInfo, PrimitiveTransform
from sparkbeam.schema import Schema
from sparkbeam.time import Duration, earliest_hop_start, tumble_start
from sparkbeam.transforms.validation import (
    duration_on,
    offset_on,
    require_new_columns,
    require_time_column,
    single_input,
)

WINDOW_START = "window_start"
WINDOW_END = "window_end"
WINDOW_COLUMNS = (WINDOW_START, WINDOW_END)


def _window_input(column: str, inputs: Sequence[EdgeInfo], label: str) -> EdgeInfo:
    source = single_input(inputs, label)
    require_time_column(source.schema, column, label)
    require_new_columns(source.schema, WINDOW_COLUMNS, label)
    if not source.bounded and column not in source.watermarked:
        raise PipelineError(
            f"{label}: windows over {column!r} on unbounded input need a watermark on "
            f"{column!r}; apply .with_watermark({column!r}, delay=...) before the window"
        )
    return source


def _with_window_columns(source: EdgeInfo, column: str) -> EdgeInfo:
    kind = source.schema.type_of(column)
    watermarked = source.watermarked
    if column in watermarked:
        watermarked = watermarked | set(WINDOW_COLUMNS)
    return EdgeInfo(
        source.schema.with_columns((WINDOW_START, kind), (WINDOW_END, kind)),
        source.bounded,
        watermarked,
    )


@attrs.frozen
class WindowSpec:
    """A window family on integer time: `size`, `slide` (= size for tumbling) and `offset`."""

    size: int
    slide: int
    offset: int


@attrs.frozen
class Tumble(PrimitiveTransform):
    """Tumbling windows of `size`: each row gets the one window that holds it.

    Watermark rule: `W(column, t)` gives `W(column, t)`,
    `W(window_start, tumble_start(t))` and `W(window_end, tumble_start(t) + size)`;
    other watermarks pass through.
    """

    column: str
    size: Duration
    offset: Duration = 0

    def default_label(self) -> str:
        return f"Tumble({self.column})"

    def infer(self, inputs: Sequence[EdgeInfo], label: str) -> EdgeInfo:
        source = _window_input(self.column, inputs, label)
        self.spec(source.schema, label)
        return _with_window_columns(source, self.column)

    def spec(self, schema: Schema, label: str = "Tumble") -> WindowSpec:
        size = duration_on(schema, self.column, self.size, "size", label, positive=True)
        offset = offset_on(schema, self.column, self.offset, label) % size
        return WindowSpec(size, size, offset)

    def derive(self, spec: WindowSpec, column: str, value: int) -> list[tuple[str, int]]:
        if column != self.column:
            return [(column, value)]
        start = tumble_start(value, spec.size, spec.offset)
        return [(column, value), (WINDOW_START, start), (WINDOW_END, start + spec.size)]


@attrs.frozen
class Hop(PrimitiveTransform):
    """Hopping (sliding) windows of `size` every `slide`: one output row per window holding the row.

    With `slide > size` rows between windows belong to none and produce no row.
    Watermark rule: with `s0 = floor_to_slide(t - size) + slide`, the start of
    the earliest window that can hold a time `>= t`: `W(column, t)`,
    `W(window_start, s0)`, `W(window_end, s0 + size)`; others pass through.
    """

    column: str
    size: Duration
    slide: Duration
    offset: Duration = 0

    def default_label(self) -> str:
        return f"Hop({self.column})"

    def infer(self, inputs: Sequence[EdgeInfo], label: str) -> EdgeInfo:
        source = _window_input(self.column, inputs, label)
        self.spec(source.schema, label)
        return _with_window_columns(source, self.column)

    def spec(self, schema: Schema, label: str = "Hop") -> WindowSpec:
        size = duration_on(schema, self.column, self.size, "size", label, positive=True)
        slide = duration_on(schema, self.column, self.slide, "slide", label, positive=True)
        offset = offset_on(schema, self.column, self.offset, label) % slide
        return WindowSpec(size, slide, offset)

    def derive(self, spec: WindowSpec, column: str, value: int) -> list[tuple[str, int]]:
        if column != self.column:
            return [(column, value)]
        start = earliest_hop_start(value, spec.size, spec.slide, spec.offset)
        return [(column, value), (WINDOW_START, start), (WINDOW_END, start + spec.size)]


@attrs.frozen(init=False)
class Session(PrimitiveTransform):
    """Session windows: per key, rows whose consecutive times are at most `gap` apart.

    A session is `[first, last + gap)`. Its rows are emitted, each with the
    session's `window_start` and `window_end`, once the session is closed
    (the watermark on `column` is `> window_end`: a row at exactly
    `window_end` would still join it) or at end of input.
    Watermark rule: `W(column, t)` gives `W(window_end, t)` and
    `W(window_start, min(t, start of the oldest open session))`, after the
    closed sessions' rows; other watermarks are dropped (rows are held).
    """

    column: str
    gap: Duration
    keys: tuple[str, ...]

    def __init__(self, column: str, gap: Duration, keys: str | Sequence[str] = ()) -> None:
        self.__attrs_init__(column, gap, (keys,) if isinstance(keys, str) else tuple(keys))

    def default_label(self) -> str:
        return f"Session({self.column})"

    def infer(self, inputs: Sequence[EdgeInfo], label: str) -> EdgeInfo:
        source = _window_input(self.column, inputs, label)
        for key in self.keys:
            source.schema.require(key, f"{label} key")
        self.gap_units(source.schema, label)
        out = _with_window_columns(source, self.column)
        return attrs.evolve(out, watermarked=out.watermarked & set(WINDOW_COLUMNS))

    def gap_units(self, schema: Schema, label: str = "Session") -> int:
        return duration_on(schema, self.column, self.gap, "gap", label, positive=True)

    def derive(self, oldest_open_start: int | None, value: int) -> list[tuple[str, int]]:
        start = value if oldest_open_start is None else min(value, oldest_open_start)
        return [(WINDOW_END, value), (WINDOW_START, start)]
