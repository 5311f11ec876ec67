"""What `expr.cast(type)` does to a value: Spark's ANSI cast rules, the same on both runners.

- `int` to `float`, `bool` (`x != 0`), `str`; `float` to `int` (toward zero;
  NaN, infinities and values outside 64 bits fail) and `bool` (`x != 0`);
  `bool` to `int`/`float` (1/0) and `str` (`"true"`/`"false"`).
- `str` to `int` (an optional sign and ASCII digits, trimmed), `float` (a
  decimal or scientific number, optionally suffixed `d`/`f` as Java allows,
  or `nan`/`inf`/`infinity` in any case) and `bool`
  (`t`/`true`/`y`/`yes`/`1`, `f`/`false`/`n`/`no`/`0`, any case, trimmed).
- `datetime` to `str`: `2026-04-01 10:00:00.5` (trailing zeros of the fraction
  dropped).
- Refused when applied: `float` to `str`; anything but a `datetime` to
  `datetime`; `datetime` to anything but `str`; `bytes`/`object` columns.

A value that does not convert raises `ValueError` with what went wrong.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from collections.abc import Callable
from typing import Any

from sparkbeam.schema import INT64_MAX, INT64_MIN, type_name
from sparkbeam.time import from_micros

_ALLOWED: dict[type, tuple[type, ...]] = {
    int: (float, bool, str),
    float: (int, bool),
    bool: (int, float, str),
    str: (int, float, bool),
    _dt.datetime: (str,),
}

_INTEGER = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[fFdD]?")
_SPECIAL = {"nan": math.nan, "inf": math.inf, "infinity": math.inf}
_TRUE = frozenset({"t", "true", "y", "yes", "1"})
_FALSE = frozenset({"f", "false", "n", "no", "0"})


def cast_refusal(source: type, target: type) -> str | None:
    """Why `source` cannot be cast to `target` (None: it can)."""
    if target in _ALLOWED.get(source, ()):
        return None
    if source is float and target is str:
        return "a float is not cast to str (its text differs between engines); format it in a Map"
    if _dt.datetime in (source, target):
        return (
            f"a {type_name(source)} is not cast to {type_name(target)}: an integer time has no "
            "unit, so int and datetime never convert into each other; convert it in a Map"
        )
    return f"cannot cast {type_name(source)} to {type_name(target)}; convert it in a Map"


def _trim(text: str) -> str:
    """Spark's `trimAll`: whitespace and control characters at both ends."""
    start, end = 0, len(text)
    while start < end and ord(text[start]) <= 32:
        start += 1
    while end > start and ord(text[end - 1]) <= 32:
        end -= 1
    return text[start:end]


def _in_int64(value: int) -> int:
    if INT64_MIN <= value <= INT64_MAX:
        return value
    raise ValueError(f"{value} is outside the 64-bit integers ({INT64_MIN} to {INT64_MAX})")


def str_to_int(text: str) -> int:
    trimmed = _trim(text)
    if not _INTEGER.fullmatch(trimmed):
        raise ValueError(f"{text!r} is not an integer (an optional sign and digits)")
    return _in_int64(int(trimmed))


def str_to_float(text: str) -> float:
    trimmed = _trim(text)
    special = trimmed.lstrip("+-").lower()
    if special in _SPECIAL and len(trimmed) - len(special) <= 1:
        value = _SPECIAL[special]
        return -value if trimmed.startswith("-") else value
    if not _DECIMAL.fullmatch(trimmed):
        raise ValueError(f"{text!r} is not a number")
    return float(trimmed.rstrip("fFdD"))


def str_to_bool(text: str) -> bool:
    word = _trim(text).lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise ValueError(f"{text!r} is not a boolean (true/false, t/f, yes/no, y/n, 1/0)")


_LONG_LIMIT = float(2**63)


def float_to_int(value: float) -> int:
    """Toward zero, as Spark: a value whose floor and ceiling lie within the (double) bounds of
    a long converts, saturating at the ends."""
    if value != value or not (
        math.floor(value) <= _LONG_LIMIT and math.ceil(value) >= -_LONG_LIMIT
    ):
        raise ValueError(f"{value!r} does not fit in a 64-bit integer")
    return max(INT64_MIN, min(INT64_MAX, math.trunc(value)))


def datetime_to_str(micros: int) -> str:
    """Spark's text of a timestamp: `2026-04-01 10:00:00.5`."""
    value = from_micros(micros)
    text = f"{value.year:04d}-{value.month:02d}-{value.day:02d} " + value.strftime("%H:%M:%S")
    if value.microsecond:
        text += "." + f"{value.microsecond:06d}".rstrip("0")
    return text


_FUNCTIONS: dict[tuple[type, type], Callable[[Any], Any]] = {
    (int, float): float,
    (int, bool): lambda v: v != 0,
    (int, str): str,
    (float, int): float_to_int,
    (float, bool): lambda v: v != 0,
    (bool, int): int,
    (bool, float): float,
    (bool, str): lambda v: "true" if v else "false",
    (str, int): str_to_int,
    (str, float): str_to_float,
    (str, bool): str_to_bool,
    (_dt.datetime, str): datetime_to_str,
}


def cast_function(source: type, target: type) -> Callable[[Any], Any]:
    """The conversion of one (internal, non-None) value; raises `ValueError` on a bad value."""
    return _FUNCTIONS[(source, target)]
