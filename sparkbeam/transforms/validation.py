"""Checks shared by transforms when they are applied; each raises `PipelineError`."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence

from sparkbeam.errors import PipelineError
from sparkbeam.graph import EdgeInfo
from sparkbeam.schema import Schema, type_name
from sparkbeam.time import MICROS_PER_MILLI, duration_micros, shown_value


def column_names(value: object, what: str, transform: str) -> tuple[str, ...]:
    """`value` (a column name or a list or tuple of them) as a tuple of names; `PipelineError`
    naming `transform` and `what` (`"keys"`) otherwise."""
    names = (value,) if isinstance(value, str) else value
    if isinstance(names, (list, tuple)) and all(isinstance(name, str) for name in names):
        return tuple(names)
    raise PipelineError(
        f"{transform}: {what}={value!r}; give a column name or a list of column names, "
        f"for example {what}=['user']"
    )


def single_input(inputs: Sequence[EdgeInfo], label: str) -> EdgeInfo:
    if not inputs:
        raise PipelineError(
            f"{label}: applied to the pipeline, but it transforms a PCollection; apply it to "
            "one, the output of a source or of another transform (pcoll = p | sb.Create(rows), "
            "then pcoll | transform)"
        )
    if len(inputs) != 1:
        raise PipelineError(f"{label}: takes one input, got {len(inputs)}")
    return inputs[0]


def require_time_column(schema: Schema, column: str, label: str) -> None:
    """The column exists and holds `datetime`s or integers."""
    schema.require(column, label)
    if not schema.is_time(column):
        raise PipelineError(
            f"{label}: column {column!r} is {type_name(schema.type_of(column))}, not an event "
            "time; event-time columns hold datetime values or integers (convert it with "
            "Map first, or pick another column)"
        )


def duration_on(
    schema: Schema,
    column: str,
    value: object,
    what: str,
    label: str,
    *,
    positive: bool = False,
    whole_millis: bool = False,
) -> int:
    """A duration on `column` of `schema`, in that column's units (see `duration_for`)."""
    return duration_for(
        schema.type_of(column),
        value,
        what,
        label,
        column=column,
        positive=positive,
        whole_millis=whole_millis,
    )


def duration_for(
    kind: type,
    value: object,
    what: str,
    label: str,
    *,
    column: str,
    positive: bool = False,
    whole_millis: bool = False,
) -> int:
    """A duration on a time column of type `kind`, in its units (microseconds for datetimes).

    `datetime` columns take `timedelta`s or Spark interval strings (and 0);
    integer columns take integers. `positive` refuses zero and negatives, the
    default refuses negatives only; `whole_millis` refuses sub-millisecond
    durations on datetime columns.
    """
    is_datetime = kind is _dt.datetime
    given = shown_value(value)
    if isinstance(value, bool):
        wanted = (
            "a timedelta or a string such as '5 minutes'"
            if is_datetime
            else f"an integer in the unit of {column!r}, such as 5"
        )
        raise PipelineError(f"{label}: {what} {given} is a bool, not a duration; give {wanted}")
    if is_datetime:
        if isinstance(value, int) and value != 0:
            raise PipelineError(
                f"{label}: {what} {given} is a bare integer but {column!r} holds datetimes; "
                "give a timedelta or a string such as '5 minutes'"
            )
        try:
            units = 0 if isinstance(value, int) else duration_micros(value)
        except ValueError as exc:
            raise PipelineError(f"{label}: {what}: {exc}") from None
    else:
        if not isinstance(value, int):
            raise PipelineError(
                f"{label}: {what} {given} is not an integer but {column!r} is an integer "
                "time column; give sizes, delays and gaps on it as integers in its unit"
            )
        units = value
    if units < 0 or (positive and units == 0):
        sign = "positive" if positive else "zero or positive"
        raise PipelineError(f"{label}: {what} must be {sign}, got {given}")
    if whole_millis and is_datetime and units % MICROS_PER_MILLI:
        raise PipelineError(
            f"{label}: {what} {given} is not a whole number of milliseconds; watermarks "
            "on datetime columns are kept in milliseconds (as in Spark), so round it"
        )
    return units


def signed_duration_for(kind: type, value: object, what: str, label: str, *, column: str) -> int:
    """A duration that may be negative (`"-5 minutes"`, a negative timedelta or integer)."""
    if isinstance(value, str) and value.strip().startswith("-"):
        return -duration_for(kind, value.strip()[1:], what, label, column=column)
    if isinstance(value, _dt.timedelta) and value < _dt.timedelta(0):
        return -duration_for(kind, -value, what, label, column=column)
    if isinstance(value, int) and not isinstance(value, bool) and value < 0:
        return -duration_for(kind, -value, what, label, column=column)
    return duration_for(kind, value, what, label, column=column)


def offset_on(schema: Schema, column: str, value: object, label: str, what: str = "offset") -> int:
    """A window offset (or `what` else that may be negative): any duration."""
    return signed_duration_for(schema.type_of(column), value, what, label, column=column)


def require_new_columns(schema: Schema, names: Sequence[str], label: str) -> None:
    clash = [name for name in names if name in schema]
    if clash:
        raise PipelineError(
            f"{label}: the input already has column(s) {clash}, which this transform adds; "
            "rename them with Select first"
        )
