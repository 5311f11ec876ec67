"""Expressions as Spark `Column`s: one small function per expression node, no Python worker.

Each builds the Column that gives the direct runner's value:
Python's `//` and `%` from Spark's truncating ones, SQL's `None` rules (Spark's
own), and Spark's conditional laziness. Where a value cannot be computed (an
integer leaving 64 bits, a division by zero, a cast of a bad value) the
Column fails the job through `raise_error` with a `DataError` message that
names the transform, the expression and the row, as the direct runner's does;
Spark's `try_*` functions detect those cases without ANSI's own error.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Sequence

from pyspark.sql import Column
from pyspark.sql import functions as F

from sparkbeam.runners.spark.parts.python_functions import fail_when
from sparkbeam.schema import INT64_MAX, INT64_MIN, Schema
from sparkbeam.time import MAX_MICROS, MIN_MICROS, to_micros
from sparkbeam.transforms import expressions as ex
from sparkbeam.transforms.expressions import COMPARISONS, OUTSIDE_DATETIMES, BoundExpr

SPARK_TYPES = {
    int: "long",
    float: "double",
    str: "string",
    bool: "boolean",
    _dt.datetime: "timestamp",
    bytes: "binary",
}


SHARED_ABOVE = 1_000
"""An operand whose Column prints longer than this many characters is computed once per row
and handed to its node by name (`Compiler.once`)."""


class Compiler:
    """The Columns of one transform's expressions over its input `schema`."""

    def __init__(self, schema: Schema, label: str) -> None:
        self.label = label
        self.schema = schema

    def fail_when(self, condition: Column, message: str, value: Column) -> Column:
        """`value`, or a `DataError` naming the transform and the row where `condition` holds."""
        return fail_when(condition, value, self.label, self.schema, message)

    def column(self, bound: BoundExpr) -> Column:
        """`bound` as a Column of its output type."""
        value = COMPILERS[type(bound.expr)](self, bound)
        if bound.source is not None and not bound.steps:
            return value  # a column passed through keeps Spark's event-time metadata
        kind = bound.output_type
        return value.cast(SPARK_TYPES[kind]) if kind in SPARK_TYPES else value

    def once(self, operands: Sequence[Column], body: Callable[..., Column]) -> Column:
        """`body(*operands)`, each operand computed once per row where one is large.

        The Columns of `//`, `%`, a cast and the overflow checks repeat their
        operands, so nested ones grow exponentially: two levels of
        `(x // 1.5) % 7.0 + x` printed as 14 million characters, and a
        deeper random expression filled the driver's heap in Spark's
        analyzer. A large operand goes in as a field of a one-element array
        that a lambda maps (`transform`): Spark computes it once, where the
        node is computed (inside a `when` branch only when the branch is
        taken), and the body refers to it by name. Small ones stay inline,
        where Spark's generated code evaluates them."""
        if all(len(str(operand)) <= SHARED_ABOVE for operand in operands):
            return body(*operands)
        names = [f"x{index}" for index in range(len(operands))]
        packed = F.array(F.struct(*(o.alias(n) for o, n in zip(operands, names, strict=True))))
        mapped = F.transform(packed, lambda row: body(*(row[name] for name in names)))
        return F.element_at(mapped, 1)

    def overflow(self, bound: BoundExpr, checked: Column, *operands: Column) -> Column:
        """`checked` (a `try_*` result), failing where it is null but no operand is."""
        present = F.lit(True)
        for operand in operands:
            present = present & operand.isNotNull()
        message = (
            f"{bound.expr} left the 64-bit integers ({INT64_MIN} to {INT64_MAX}) both runners "
            "hold; cast to float first for larger numbers"
        )
        return self.fail_when(present & checked.isNull(), message, checked)


Compile = Callable[[Compiler, BoundExpr], Column]
COMPILERS: dict[type, Compile] = {}


def compiles(kind: type) -> Callable[[Compile], Compile]:
    def register(function: Compile) -> Compile:
        COMPILERS[kind] = function
        return function

    return register


def _long(value: int) -> Column:
    return F.lit(value).cast("long")


@compiles(ex.Col)
def _col(c: Compiler, bound: BoundExpr) -> Column:
    assert isinstance(bound.expr, ex.Col)
    return F.col(bound.expr.name)


@compiles(ex.Lit)
def _lit(c: Compiler, bound: BoundExpr) -> Column:
    value = bound.expr.value
    if isinstance(value, _dt.datetime):
        return F.timestamp_micros(_long(to_micros(value)))
    if isinstance(value, int) and not isinstance(value, bool):
        return _long(value)
    return F.lit(value)


def _in_calendar(c: Compiler, bound: BoundExpr, micros: Column) -> Column:
    """The timestamp of `micros`, failing where it is before year 1 or after 9999."""
    outside = (micros < _long(MIN_MICROS)) | (micros > _long(MAX_MICROS))
    message = f"{bound.expr} {OUTSIDE_DATETIMES}"
    return c.fail_when(outside, message, F.timestamp_micros(micros))


def _zero_check(c: Compiler, bound: BoundExpr, a: Column, b: Column, value: Column) -> Column:
    what = "division" if bound.expr.op in ("/", "//") else "modulo"
    message = (
        f"{bound.expr}: {what} by zero; guard it with sb.when(divisor != 0, ...) or filter "
        "such rows"
    )
    return c.fail_when(a.isNotNull() & (b == 0), message, value)


def _python_mod(a: Column, b: Column, kind: type) -> Column:
    """Python's `%` (the sign of the divisor) from Spark's (the sign of the dividend); a float
    remainder of zero is a zero of the divisor's sign, as CPython's (`-4.0 % 2.0` is `0.0`).
    Every `when` here tests the remainder, so a `None` operand stays `None`."""
    m = a % b
    python = F.when((m != 0) & ((m < 0) != (b < 0)), m + b)
    if kind is float:
        python = python.when(m == 0, F.when(b < 0, F.lit(-0.0)).otherwise(F.lit(0.0)))
    return python.otherwise(m)


def _floor_double(x: Column) -> Column:
    """`math.floor` of a double as a double (Spark's `floor` gives a long)."""
    return F.when(F.abs(x) < 2.0**52, F.floor(x).cast("double")).otherwise(x)


def _python_float_floordiv(a: Column, b: Column) -> Column:
    """CPython's float `//`: `(a - fmod(a, b)) / b`, adjusted to the floor and rounded; a zero
    quotient has the sign of `a / b` (`0.0 // -5.0` is `-0.0`). `None` when an operand is:
    the last branch is computed from the operands, never a constant."""
    m = a % b
    div = (a - m) / b
    div = F.when((m != 0) & ((b < 0) != (m < 0)), div - 1.0).otherwise(div)
    floor = _floor_double(div)
    rounded = F.when(div - floor > 0.5, floor + 1.0).otherwise(floor)
    return F.when(div != 0, rounded).otherwise(a / b * 0.0)


@compiles(ex.Arith)
def _arith(c: Compiler, bound: BoundExpr) -> Column:
    if len(bound.args) == 1:  # a shift by a constant
        return c.once([c.column(bound.args[0])], lambda base: _shift(c, bound, base))
    kind = bound.detail
    a, b = (c.column(arg).cast(SPARK_TYPES[kind]) for arg in bound.args)
    return c.once([a, b], lambda a, b: _arith_of(c, bound, a, b))


def _shift(c: Compiler, bound: BoundExpr, base: Column) -> Column:
    delta = _long(bound.detail)
    if bound.output_type is _dt.datetime:
        return _in_calendar(c, bound, F.unix_micros(base) + delta)
    return c.overflow(bound, F.try_add(base, delta), base)


def _arith_of(c: Compiler, bound: BoundExpr, a: Column, b: Column) -> Column:
    expr = bound.expr
    kind = bound.detail
    op = expr.op
    if kind is int and op in "+-*":
        function = {"+": F.try_add, "-": F.try_subtract, "*": F.try_multiply}[op]
        return c.overflow(bound, function(a, b), a, b)
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        return _zero_check(c, bound, a, b, a.cast("double") / b.cast("double"))
    if op == "%":
        return _zero_check(c, bound, a, b, _python_mod(a, b, kind))
    if kind is float:
        return _zero_check(c, bound, a, b, _python_float_floordiv(a, b))
    quotient = F.call_function("div", a, b)
    m = a % b
    floor = F.when((m != 0) & ((m < 0) != (b < 0)), quotient - 1).otherwise(quotient)
    message = f"{expr} left the 64-bit integers ({INT64_MIN} // -1)"
    checked = c.fail_when((a == _long(INT64_MIN)) & (b == -1), message, floor)
    return _zero_check(c, bound, a, b, checked)


@compiles(ex.Neg)
def _neg(c: Compiler, bound: BoundExpr) -> Column:
    a = c.column(bound.args[0])
    if bound.output_type is float:
        return -a
    return c.once([a], lambda a: c.overflow(bound, F.try_subtract(_long(0), a), a))


@compiles(ex.Compare)
def _compare(c: Compiler, bound: BoundExpr) -> Column:
    a, b = (c.column(arg) for arg in bound.args)
    return COMPARISONS[bound.expr.op](a, b)


@compiles(ex.Logic)
def _logic(c: Compiler, bound: BoundExpr) -> Column:
    a, b = (c.column(arg) for arg in bound.args)
    return a & b if bound.expr.op == "&" else a | b


@compiles(ex.Not)
def _not(c: Compiler, bound: BoundExpr) -> Column:
    return ~c.column(bound.args[0])


@compiles(ex.IsNull)
def _is_null(c: Compiler, bound: BoundExpr) -> Column:
    a = c.column(bound.args[0])
    return a.isNotNull() if bound.expr.negate else a.isNull()


@compiles(ex.IsIn)
def _isin(c: Compiler, bound: BoundExpr) -> Column:
    operand, *values = (c.column(arg) for arg in bound.args)
    return operand.isin(*values)


@compiles(ex.Cast)
def _cast(c: Compiler, bound: BoundExpr) -> Column:
    (operand,) = bound.args
    a = c.column(operand)
    if operand.output_type in (bound.output_type, ex.NULL):
        return a
    message = f"{bound.expr}: the value cannot be converted (Spark's ANSI cast rules)"

    def checked(a: Column) -> Column:
        converted = a.try_cast(SPARK_TYPES[bound.output_type])
        return c.fail_when(a.isNotNull() & converted.isNull(), message, converted)

    return c.once([a], checked)


_STRING_FUNCTIONS: dict[str, Callable[[Column], Column]] = {
    "lower": F.lower,
    "upper": F.upper,
    "length": F.length,
}


@compiles(ex.StringFunction)
def _string_function(c: Compiler, bound: BoundExpr) -> Column:
    return _STRING_FUNCTIONS[bound.expr.name](c.column(bound.args[0]))


@compiles(ex.StringTest)
def _string_test(c: Compiler, bound: BoundExpr) -> Column:
    a, b = (c.column(arg) for arg in bound.args)
    return getattr(a, bound.expr.name)(b)


@compiles(ex.Substr)
def _substr(c: Compiler, bound: BoundExpr) -> Column:
    return F.substring(c.column(bound.args[0]), bound.expr.start, bound.expr.count)


@compiles(ex.Concat)
def _concat(c: Compiler, bound: BoundExpr) -> Column:
    return F.concat(*(c.column(arg) for arg in bound.args))


@compiles(ex.Truncate)
def _truncate(c: Compiler, bound: BoundExpr) -> Column:
    unit = _long(bound.detail)

    def truncated(base: Column) -> Column:
        if bound.output_type is _dt.datetime:
            micros = F.unix_micros(base)
            return _in_calendar(c, bound, micros - F.pmod(micros, unit))
        return c.overflow(bound, F.try_subtract(base, F.pmod(base, unit)), base)

    return c.once([c.column(bound.args[0])], truncated)


@compiles(ex.TimePart)
def _time_part(c: Compiler, bound: BoundExpr) -> Column:
    base = c.column(bound.args[0])
    return F.hour(base) if bound.expr.name == "hour" else F.dayofweek(base)


@compiles(ex.When)
def _when(c: Compiler, bound: BoundExpr) -> Column:
    kind = SPARK_TYPES.get(bound.output_type, "string")
    args = [c.column(arg) for arg in bound.args]
    pairs = len(bound.expr.cases)
    result = F.when(args[0], args[1].cast(kind))
    for index in range(1, pairs):
        result = result.when(args[2 * index], args[2 * index + 1].cast(kind))
    if bound.expr.default is not None:
        result = result.otherwise(args[-1].cast(kind))
    return result


@compiles(ex.Coalesce)
def _coalesce(c: Compiler, bound: BoundExpr) -> Column:
    kind = SPARK_TYPES.get(bound.output_type, "string")
    return F.coalesce(*(c.column(arg).cast(kind) for arg in bound.args))
