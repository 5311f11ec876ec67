"""The text of JSON and CSV files the direct runner writes: character for character what
Spark's writers put in them, so that the two runners' outputs hold the same lines.

- Timestamps: ISO 8601 in UTC with six fraction digits and `Z`
  (`2026-04-01T10:00:00.000000Z`).
- Floats: as Java's `Double.toString` spells them (`1.5`, `1.0E7`, `1.0E-4`,
  `NaN`, `Infinity`); integers in full; booleans `true`/`false`.
- JSON: one compact object per line (`{"id":"a","n":1}`), columns in schema
  order, a `None` left out, text in UTF-8 with only `"`, `\\` and control
  characters escaped (`\\n`, `\\u001F`), a float that is no number as a string
  (`"NaN"`), list columns as arrays.
- CSV: a header row, `\\n` line ends, `None` an empty field and the empty
  string `""`; a field holding `,`, `"` or a line break is quoted, `"`
  doubled inside (spaces at either end are kept, unquoted).
"""

from __future__ import annotations

import datetime as _dt
import decimal
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

from sparkbeam.schema import Row


def timestamp_text(value: _dt.datetime) -> str:
    """A naive UTC datetime as ISO 8601 with microseconds and `Z` (the year in four digits)."""
    return value.isoformat(timespec="microseconds") + "Z"


def java_double(value: float) -> str:
    """`value` as Java's `Double.toString` writes it (Spark's JSON and CSV writers do): the
    shortest digits that read back as `value` (at least two: the nearest such), plain from
    0.001 up to 10 million (`0.001`, `29.99`, `1234567.5`), otherwise scientific (`1.0E7`,
    `1.0E-4`), always with a digit after the point; `NaN`, `Infinity`, `-Infinity`."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign = "-" if value < 0 else ""
    text = repr(abs(value))
    two_digits = f"{abs(value):.1e}"  # Java picks the nearest of two digits over one
    if float(two_digits) == abs(value):
        text = two_digits
    shortest = decimal.Decimal(text).as_tuple()
    digits = "".join(map(str, shortest.digits))
    point = len(digits) + int(shortest.exponent)  # the value is 0.<digits> * 10**point
    digits = digits.rstrip("0")
    if -2 <= point <= 7:
        if point <= 0:
            return f"{sign}0.{'0' * -point}{digits}"
        whole, fraction = digits[:point].ljust(point, "0"), digits[point:]
        return f"{sign}{whole}.{fraction or '0'}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{point - 1}"


_JSON_ESCAPES: Final[dict[int, str]] = {
    **{code: f"\\u{code:04X}" for code in range(0x20)},
    ord('"'): '\\"',
    ord("\\"): "\\\\",
    ord("\b"): "\\b",
    ord("\t"): "\\t",
    ord("\n"): "\\n",
    ord("\f"): "\\f",
    ord("\r"): "\\r",
}


def json_value(value: Any) -> str:
    """One value as Spark's JSON writer spells it (a `None` inside a list is `null`)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        text = java_double(value)
        return text if math.isfinite(value) else f'"{text}"'
    if isinstance(value, _dt.datetime):
        return f'"{timestamp_text(value)}"'
    if isinstance(value, list):
        return "[" + ",".join(json_value(item) for item in value) + "]"
    return '"' + str(value).translate(_JSON_ESCAPES) + '"'


def json_lines(rows: Sequence[Row]) -> Iterator[str]:
    """One JSON object per row and line, its `None` columns left out."""
    for row in rows:
        fields = (
            f"{json_value(name)}:{json_value(value)}"
            for name, value in row.items()
            if value is not None
        )
        yield "{" + ",".join(fields) + "}\n"


_CSV_QUOTED: Final = frozenset(',"\n\r')


def csv_field(value: Any) -> str:
    """One value as a CSV field: empty for `None`, quoted where it must be."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_double(value)
    if isinstance(value, _dt.datetime):
        return timestamp_text(value)
    text = str(value)
    if isinstance(value, str) and (not text or not _CSV_QUOTED.isdisjoint(text)):
        return '"' + text.replace('"', '""') + '"'
    return text


def csv_lines(names: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> Iterator[str]:
    """The header row, then a line per row."""
    yield ",".join(csv_field(name) for name in names) + "\n"
    for row in rows:
        yield ",".join(csv_field(row[name]) for name in names) + "\n"
