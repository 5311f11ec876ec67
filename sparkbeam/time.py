"""Event time as integers: timestamps, durations and window bounds.

Every event time is an integer. A `datetime` column is held as microseconds
since 1970-01-01 UTC (naive values are UTC, aware ones are converted); an
integer column is held as it is, in whatever unit the user chose. Window
functions are pure functions on those integers, so every runner can use them.

Watermarks on `datetime` columns are whole milliseconds (as in Spark, Flink and
Beam's portable runners); integer columns are not rounded.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Iterator
from decimal import Decimal, InvalidOperation
from typing import Final

EPOCH: Final = _dt.datetime(1970, 1, 1)
_EPOCH_UTC: Final = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
ONE_MICROSECOND: Final = _dt.timedelta(microseconds=1)
MICROS_PER_MILLI: Final = 1_000

_UNIT_MICROS: Final = {
    "microsecond": 1,
    "millisecond": 1_000,
    "second": 1_000_000,
    "minute": 60_000_000,
    "hour": 3_600_000_000,
    "day": 86_400_000_000,
    "week": 604_800_000_000,
}
_UNIT_ALIASES: Final = {
    "us": "microsecond",
    "ms": "millisecond",
    "s": "second",
    "sec": "second",
    "min": "minute",
    "h": "hour",
    "hr": "hour",
    "d": "day",
}
_INTERVAL_PART = re.compile(r"\s*([+-]?\d+(?:\.\d+)?)\s*([a-zA-Z]+)\s*")
_NUMBER_LIKE = re.compile(r"\s*([+-]?(?:[\d_,]*\.?\d[\d_,]*(?:[eE][+-]?\d+)?|\.\d+))")
"""What a person may have meant as a number in a duration (`1e3`, `1,000`, `.5`): a plain
number is only digits with an optional decimal point."""

Duration = _dt.timedelta | str | int
"""What a size, delay, gap or offset may be given as."""


def to_micros(value: _dt.datetime) -> int:
    """Microseconds since the epoch; naive means UTC, aware values are converted."""
    if value.tzinfo is None:
        return (value - EPOCH) // ONE_MICROSECOND
    return (value - _EPOCH_UTC) // ONE_MICROSECOND


MIN_MICROS = to_micros(_dt.datetime.min)
MAX_MICROS = to_micros(_dt.datetime.max)
"""The microseconds of the first and last datetimes (years 1 and 9999) both runners hold."""


def from_micros(micros: int) -> _dt.datetime:
    """The naive UTC `datetime` for microseconds since the epoch."""
    return EPOCH + _dt.timedelta(microseconds=micros)


def floor_to(value: int, unit: int, offset: int = 0) -> int:
    """The largest `offset + k * unit` that is `<= value` (floor, also for negatives)."""
    return value - (value - offset) % unit


def floor_to_ms(micros: int) -> int:
    """Microseconds floored to a whole millisecond."""
    return micros - micros % MICROS_PER_MILLI


def parse_interval(text: str) -> int:
    """Microseconds in a Spark interval string such as `"5 minutes"` or `"1 hour 30 minutes"`.

    Raises `ValueError` naming the text when it is not of that form or is finer
    than a microsecond.
    """
    body = text.strip()
    if body.lower().startswith("interval "):
        body = body[len("interval ") :]
    pos, total, parts = 0, Decimal(0), 0
    while pos < len(body):
        _require_plain_number(text, body, pos)
        match = _INTERVAL_PART.match(body, pos)
        if match is None:
            break
        number, unit = match.group(1), match.group(2).lower()
        if unit.endswith("s") and (unit[:-1] in _UNIT_MICROS or unit[:-1] in _UNIT_ALIASES):
            unit = unit[:-1]
        unit = _UNIT_ALIASES.get(unit, unit)
        if unit not in _UNIT_MICROS:
            raise ValueError(
                f"unknown unit {match.group(2)!r} in duration {text!r}: use one of "
                "microseconds, milliseconds, seconds, minutes, hours, days, weeks"
            )
        try:
            total += Decimal(number) * _UNIT_MICROS[unit]
        except InvalidOperation as exc:  # pragma: no cover - the regex admits only numbers
            raise ValueError(f"bad number {number!r} in duration {text!r}") from exc
        pos, parts = match.end(), parts + 1
    if parts == 0 or pos != len(body):
        raise ValueError(
            f"cannot read duration {text!r}: write it as Spark does, for example "
            "'5 minutes', '1 hour', '30 seconds' or '500 milliseconds'"
        )
    if total != total.to_integral_value():
        raise ValueError(f"duration {text!r} is finer than a microsecond")
    return int(total)


def _require_plain_number(text: str, body: str, pos: int) -> None:
    """Raise `ValueError` when the number at `pos` of `body` is not a plain one (`1e3`, `1,000`,
    `.5`), showing the duration written with plain numbers where it can."""
    loose = _NUMBER_LIKE.match(body, pos)
    plain = _INTERVAL_PART.match(body, pos)
    if loose is None or (plain is not None and plain.group(1) == loose.group(1)):
        return
    number = loose.group(1)
    try:
        value = Decimal(number.replace(",", "").replace("_", ""))
    except InvalidOperation:
        value = None
    hint = "such as '1000 seconds' or '1.5 hours'"
    if value is not None and value.is_finite():
        written = body[: loose.start(1)] + format(value.normalize(), "f") + body[loose.end(1) :]
        hint = f"here {written.strip()!r}"
    raise ValueError(
        f"{number!r} in duration {text!r} is not a plain number: write each number as digits "
        f"with an optional decimal point (no exponent, no separators) before its unit, {hint}"
    )


def duration_micros(value: object) -> int:
    """Microseconds in a `timedelta` or a Spark interval string."""
    if isinstance(value, _dt.timedelta):
        return value // ONE_MICROSECOND
    if isinstance(value, str):
        return parse_interval(value)
    raise ValueError(
        f"bad duration {value!r}: give a datetime.timedelta or a string such as '5 minutes'"
    )


def tumble_start(t: int, size: int, offset: int = 0) -> int:
    """The start of the tumbling window `[start, start + size)` that holds `t`."""
    return t - (t - offset) % size


def hop_starts(t: int, size: int, slide: int, offset: int = 0) -> Iterator[int]:
    """The starts, ascending, of every hopping window `[s, s + size)` that holds `t`."""
    start = earliest_hop_start(t, size, slide, offset)
    while start <= t:
        yield start
        start += slide


def earliest_hop_start(t: int, size: int, slide: int, offset: int = 0) -> int:
    """`floor_to_slide(t - size) + slide`: the smallest window start `> t - size`.

    The window may not hold `t` when `slide > size` (a gap between windows);
    it is still a lower bound for the start of any window of a time `>= t`.
    """
    return floor_to(t - size, slide, offset) + slide


_UNITS_LARGEST_FIRST: Final = (
    "week",
    "day",
    "hour",
    "minute",
    "second",
    "millisecond",
    "microsecond",
)


def describe_duration(value: object) -> str:
    """A duration as a person writes it: for a `timedelta`, its parts in Spark's interval
    words, largest unit first (`"5 minutes"`, `"1 minute 30 seconds"`, `"2 hours 5 minutes"`,
    `"-1 minute"`; a negative one signs every part, `"-2 hours -5 minutes"`, so that
    `with_watermark`, Spark and `parse_interval` read the text back as the same duration);
    the text of a string, the number of an integer.

    Every duration sparkbeam prints (metrics' lags, messages quoting a delay, a gap or a
    size, the pipeline's picture) is written so."""
    if not isinstance(value, _dt.timedelta):
        return str(value)
    micros = value // ONE_MICROSECOND
    if micros == 0:
        return "0 seconds"
    sign, left = ("-" if micros < 0 else ""), abs(micros)
    parts = []
    for unit in _UNITS_LARGEST_FIRST:
        count, left = divmod(left, _UNIT_MICROS[unit])
        if count:
            parts.append(f"{sign}{count} {unit}{'' if count == 1 else 's'}")
    return " ".join(parts)


def shown_value(value: object) -> str:
    """A value a message quotes: a `timedelta` as `describe_duration` writes it (quoted, as
    the string that gives it), anything else as its `repr`."""
    if isinstance(value, _dt.timedelta):
        return repr(describe_duration(value))
    return repr(value)
