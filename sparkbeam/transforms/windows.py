"""Windows: `Tumble`, `Hop` and `Session`.

Windows are half-open, `[start, end)`; `Tumble` and `Hop` align them to the
epoch plus `offset`. Each adds the columns `window_start` and `window_end`,
of the time column's type. Tumble and Hop assignment is a pure function of
the row's time (`sparkbeam.time`).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from dataclasses import dataclass

from sparkbeam.derivation import Add, Derived, Floor, WatermarkRule, passing
from sparkbeam.errors import PipelineError
from sparkbeam.graph import EdgeInfo, PrimitiveTransform, init_fields, needs_watermark
from sparkbeam.schema import INT64_MAX, INT64_MIN, Schema
from sparkbeam.time import MAX_MICROS, MIN_MICROS, Duration, describe_duration
from sparkbeam.transforms.validation import (
    column_names,
    duration_on,
    offset_on,
    require_new_columns,
    require_time_column,
    single_input,
)

WINDOW_START = "window_start"
WINDOW_END = "window_end"
WINDOW_COLUMNS = (WINDOW_START, WINDOW_END)


OUTSIDE_CALENDAR = (
    "the row's window has a bound outside the datetimes both runners hold (year 1 to 9999); "
    "filter such rows out before the window"
)
"""A `DataError`'s words for a window bound before year 1 or after 9999."""


OUTSIDE_INT64 = (
    f"the row's window has a bound outside the 64-bit integers ({INT64_MIN} to {INT64_MAX}) "
    "both runners hold; filter such rows out before the window, or make the size, slide, "
    "offset or gap smaller"
)
"""A `DataError`'s words for a window bound outside 64 bits on an integer time column."""


def bounds_of(kind: type) -> tuple[int, int, str]:
    """The least and greatest window bound a time column of type `kind` holds, in its units,
    and the words of the `DataError` for a window beyond them."""
    if kind is _dt.datetime:
        return MIN_MICROS, MAX_MICROS, OUTSIDE_CALENDAR
    return INT64_MIN, INT64_MAX, OUTSIDE_INT64


def _window_input(column: str, inputs: Sequence[EdgeInfo], label: str) -> EdgeInfo:
    source = single_input(inputs, label)
    require_time_column(source.schema, column, label)
    require_new_columns(source.schema, WINDOW_COLUMNS, label)
    if not source.bounded and column not in source.watermarked:
        raise PipelineError(
            f"{label}: windows over {column!r} on unbounded input need a watermark on "
            f"{column!r}; {needs_watermark(source, column, 'before the window')}"
        )
    return source


def _with_window_columns(source: EdgeInfo, column: str) -> EdgeInfo:
    kind = source.schema.type_of(column)
    return EdgeInfo(
        source.schema.with_columns((WINDOW_START, kind), (WINDOW_END, kind)), source.bounded
    )


def _window_rule(source: EdgeInfo, column: str, spec: WindowSpec) -> WatermarkRule:
    """Every column passes through; with `s0 = floor(t - size, slide, offset) + slide`, the
    earliest window start that can hold a time `>= t`: `W(window_start, s0)` and
    `W(window_end, s0 + size)` (for `Tumble`, `s0` is `t`'s own window start)."""
    start = (Add(-spec.size), Floor(spec.slide, spec.offset), Add(spec.slide))
    return WatermarkRule(
        (
            *passing(source.schema.names),
            Derived(WINDOW_START, column, start),
            Derived(WINDOW_END, column, (*start, Add(spec.size))),
        )
    )


@dataclass(frozen=True)
class WindowSpec:
    """A window family on integer time: `size`, `slide` (= size for tumbling) and `offset`."""

    size: int
    slide: int
    offset: int


@dataclass(frozen=True)
class Tumble(PrimitiveTransform):
    """Tumbling windows of `size`: each row gets the one window that holds it.

    Watermark rule: `W(column, t)` gives `W(column, t)`,
    `W(window_start, tumble_start(t))` and `W(window_end, tumble_start(t) + size)`;
    other watermarks pass through.

    Args:
        column: The event-time column the windows are over.
        size: The windows' length (a duration; an integer on an integer column).
        offset: Windows start at the epoch (1970-01-01) plus `offset`, plus
            multiples of `size`.
    """

    column: str
    size: Duration
    offset: Duration = 0

    def default_label(self) -> str:
        return f"Tumble({self.column})"

    def parameters(self) -> tuple[tuple[str, str], ...]:
        return (("size", describe_duration(self.size)), *_offset(self.offset))

    def infer(self, inputs: Sequence[EdgeInfo], label: str) -> EdgeInfo:
        source = _window_input(self.column, inputs, label)
        self.spec(source.schema, label)
        return _with_window_columns(source, self.column)

    def spec(self, schema: Schema, label: str = "Tumble") -> WindowSpec:
        size = duration_on(schema, self.column, self.size, "size", label, positive=True)
        offset = offset_on(schema, self.column, self.offset, label) % size
        return WindowSpec(size, size, offset)

    def watermark_rule(self, inputs: Sequence[EdgeInfo], label: str) -> WatermarkRule:
        return _window_rule(inputs[0], self.column, self.spec(inputs[0].schema, label))


@dataclass(frozen=True)
class Hop(PrimitiveTransform):
    """Hopping (sliding) windows of `size` every `slide`: one output row per window holding the row.

    With `slide > size` rows between windows belong to none and produce no row.
    Watermark rule: with `s0 = floor_to_slide(t - size) + slide`, the start of
    the earliest window that can hold a time `>= t`: `W(column, t)`,
    `W(window_start, s0)`, `W(window_end, s0 + size)`; others pass through.

    Args:
        column: The event-time column the windows are over.
        size: The windows' length (a duration; an integer on an integer column).
        slide: How far each window starts after the one before.
        offset: Windows start at the epoch (1970-01-01) plus `offset`, plus
            multiples of `slide`.
    """

    column: str
    size: Duration
    slide: Duration
    offset: Duration = 0

    def default_label(self) -> str:
        return f"Hop({self.column})"

    def parameters(self) -> tuple[tuple[str, str], ...]:
        return (
            ("size", describe_duration(self.size)),
            ("slide", describe_duration(self.slide)),
            *_offset(self.offset),
        )

    def infer(self, inputs: Sequence[EdgeInfo], label: str) -> EdgeInfo:
        source = _window_input(self.column, inputs, label)
        self.spec(source.schema, label)
        return _with_window_columns(source, self.column)

    def spec(self, schema: Schema, label: str = "Hop") -> WindowSpec:
        size = duration_on(schema, self.column, self.size, "size", label, positive=True)
        slide = duration_on(schema, self.column, self.slide, "slide", label, positive=True)
        offset = offset_on(schema, self.column, self.offset, label) % slide
        return WindowSpec(size, slide, offset)

    def watermark_rule(self, inputs: Sequence[EdgeInfo], label: str) -> WatermarkRule:
        return _window_rule(inputs[0], self.column, self.spec(inputs[0].schema, label))


@dataclass(frozen=True, init=False)
class Session(PrimitiveTransform):
    """Session windows: per key, rows whose consecutive times are at most `gap` apart.

    A session is `[first, last + gap)`. Its rows are emitted, each with the
    session's `window_start` and `window_end`, once the session is closed
    (the watermark on `column` is `> window_end`: a row at exactly
    `window_end` would still join it) or at end of input.
    Watermark rule: `W(column, t)` gives `W(window_end, t)` and
    `W(window_start, min(t, start of the oldest open session))`, after the
    closed sessions' rows; other watermarks are dropped (rows are held).

    Args:
        column: The event-time column.
        gap: The largest gap between two consecutive rows of one session (a
            duration; an integer on an integer column).
        keys: Column(s) each key of which has sessions of its own.
    """

    column: str
    gap: Duration
    keys: tuple[str, ...]

    def holds_state(self) -> bool:
        return True

    def partition_keys(self) -> tuple[str, ...] | None:
        return self.keys

    def __init__(self, column: str, gap: Duration, keys: str | Sequence[str] = ()) -> None:
        init_fields(self, column, gap, column_names(keys, "keys", "Session"))

    def default_label(self) -> str:
        return f"Session({self.column})"

    def parameters(self) -> tuple[tuple[str, str], ...]:
        keys = (("keys", ", ".join(self.keys)),) if self.keys else ()
        return (("gap", describe_duration(self.gap)), *keys)

    def infer(self, inputs: Sequence[EdgeInfo], label: str) -> EdgeInfo:
        source = _window_input(self.column, inputs, label)
        for key in self.keys:
            source.schema.require(key, f"{label} key")
        self.gap_units(source.schema, label)
        return _with_window_columns(source, self.column)

    def gap_units(self, schema: Schema, label: str = "Session") -> int:
        return duration_on(schema, self.column, self.gap, "gap", label, positive=True)

    def keeping_watermark(self, column: str) -> str:
        return (
            "a Session's output keeps watermarks on window_start and window_end only: use "
            f"one of those, or apply .with_watermark({column!r}, delay=...) after it"
        )

    def watermark_rule(self, inputs: Sequence[EdgeInfo], label: str) -> WatermarkRule:
        """`W(window_end, t)`; `W(window_start, t)` capped by the oldest open session (held)."""
        return WatermarkRule(
            (
                Derived(WINDOW_END, self.column),
                Derived(WINDOW_START, self.column, held=True),
            )
        )


def _offset(offset: Duration) -> tuple[tuple[str, str], ...]:
    """The offset as the picture shows it: only when there is one."""
    none = offset == 0 or offset == _dt.timedelta(0)
    return () if none else (("offset", describe_duration(offset)),)
