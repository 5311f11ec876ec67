"""Column expressions: `sb.col`, `sb.lit`, operators, functions.

An `Expr` is a tree of frozen nodes, the same object on both runners. Applied
to a schema (`bind`) it becomes a `BoundExpr`: its output type (a wrong type
is a `PipelineError` naming the transform and the expression), how the direct
runner computes it a column chunk at a time, and how it maps watermarks.

Values follow SQL (Spark's ANSI rules): an operator with a `None` operand is
`None` (even where the other operand would be an error); `&`/`|` are
three-valued; `when` and `coalesce` evaluate only what they need. An integer
result outside 64 bits, a division or modulo by zero and a cast that cannot
convert its value are `DataError`s naming the transform and the row.

Watermark rule (next to each node, in `bind`): an expression keeps or
derives its source column's watermark only where it keeps order: a column
passed through (`Col`) or cast to its own type, `+`/`-` a constant (`Add`
step), `truncate` (`Floor` step). Every other expression has none
(`source=None`).
"""

from __future__ import annotations

import datetime as _dt
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sparkbeam.derivation import Add, Floor, Step
from sparkbeam.errors import PipelineError, call_form
from sparkbeam.schema import INT64_MAX, INT64_MIN, Schema, _column_type, type_name
from sparkbeam.time import MAX_MICROS, MIN_MICROS, to_micros
from sparkbeam.transforms.casts import cast_function, cast_refusal
from sparkbeam.transforms.validation import duration_for, signed_duration_for

NULL: type = type(None)
"""The type of `sb.lit(None)`: it goes with every other type."""

Values = list[Any]
Evaluate = Callable[[Mapping[str, Values], int], Values]


class RowError(Exception):
    """A value cannot be computed for the row at `index` of the chunk (a `DataError` once the
    operator knows the row)."""

    def __init__(self, index: int, message: str) -> None:
        super().__init__(message)
        self.index = index
        self.message = message


@dataclass(frozen=True)
class BoundExpr:
    """An expression checked against a schema: its type, how to compute it, how it maps watermarks.

    `source` is the column whose watermark derives this one (`None`: no
    watermark); `steps` are the order-keeping steps from that column to this
    one (a shift is `Add`, a truncation `Floor`). `evaluate(columns, size)`
    computes the values of a chunk of `size` rows from the internal columns
    (datetimes as microseconds). `args` are the bound operands, `columns` the
    input columns it reads; runners compile `expr` with them.
    """

    output_type: type
    evaluate: Evaluate
    source: str | None
    steps: tuple[Step, ...] = ()
    expr: Any = None
    args: tuple[BoundExpr, ...] = ()
    columns: frozenset[str] = frozenset()
    detail: Any = None
    """What `bind` worked out for the runners: a shift's amount, a truncation's unit, ..."""


def _wrap(value: object) -> Expr:
    return value if isinstance(value, Expr) else Lit(value)


def uncalled(value: object) -> tuple[str, str] | None:
    """`(what was written, the call meant)` when `value` is a method of an expression or an
    expression function not called (`col('k').is_null` for `col('k').is_null()`, `sb.col` for
    `sb.col(name)`); None for anything else."""
    owner = getattr(value, "__self__", None)
    name = getattr(value, "__name__", "")
    if isinstance(owner, Expr) and callable(value):
        return f"{owner}.{name}", f"{owner}.{call_form(value)}"
    if callable(value) and getattr(value, "__module__", None) == __name__:
        call = call_form(value)
        return call.split("(")[0], call
    return None


class Expr:
    """A column expression: `sb.col("amount") * 2 >= 10`, `sb.col("t") + "5 minutes"`, ..."""

    __hash__ = object.__hash__

    def bind(self, schema: Schema, label: str) -> BoundExpr:
        raise NotImplementedError

    def __bool__(self) -> bool:
        raise TypeError(
            f"{self} is an expression, not a bool: combine conditions with &, | and ~ "
            "(not and, or, not), and compare with isin/between rather than chained comparisons"
        )

    # arithmetic
    def __add__(self, other: object) -> Expr:
        return Arith("+", self, _wrap(other))

    def __radd__(self, other: object) -> Expr:
        return Arith("+", _wrap(other), self)

    def __sub__(self, other: object) -> Expr:
        return Arith("-", self, _wrap(other))

    def __rsub__(self, other: object) -> Expr:
        return Arith("-", _wrap(other), self)

    def __mul__(self, other: object) -> Expr:
        return Arith("*", self, _wrap(other))

    def __rmul__(self, other: object) -> Expr:
        return Arith("*", _wrap(other), self)

    def __truediv__(self, other: object) -> Expr:
        return Arith("/", self, _wrap(other))

    def __rtruediv__(self, other: object) -> Expr:
        return Arith("/", _wrap(other), self)

    def __floordiv__(self, other: object) -> Expr:
        return Arith("//", self, _wrap(other))

    def __rfloordiv__(self, other: object) -> Expr:
        return Arith("//", _wrap(other), self)

    def __mod__(self, other: object) -> Expr:
        return Arith("%", self, _wrap(other))

    def __rmod__(self, other: object) -> Expr:
        return Arith("%", _wrap(other), self)

    def __neg__(self) -> Expr:
        return Neg(self)

    # comparisons
    def __eq__(self, other: object) -> Expr:  # type: ignore[override]
        return Compare("==", self, _wrap(other))

    def __ne__(self, other: object) -> Expr:  # type: ignore[override]
        return Compare("!=", self, _wrap(other))

    def __lt__(self, other: object) -> Expr:
        return Compare("<", self, _wrap(other))

    def __le__(self, other: object) -> Expr:
        return Compare("<=", self, _wrap(other))

    def __gt__(self, other: object) -> Expr:
        return Compare(">", self, _wrap(other))

    def __ge__(self, other: object) -> Expr:
        return Compare(">=", self, _wrap(other))

    # logic
    def __and__(self, other: object) -> Expr:
        return Logic("&", self, _wrap(other))

    def __rand__(self, other: object) -> Expr:
        return Logic("&", _wrap(other), self)

    def __or__(self, other: object) -> Expr:
        return Logic("|", self, _wrap(other))

    def __ror__(self, other: object) -> Expr:
        return Logic("|", _wrap(other), self)

    def __invert__(self) -> Expr:
        return Not(self)

    # methods
    def is_null(self) -> Expr:
        """`True` where the value is `None`."""
        return IsNull(self, False)

    def is_not_null(self) -> Expr:
        """`True` where the value is not `None`."""
        return IsNull(self, True)

    def isin(self, *values: object) -> Expr:
        """SQL's `IN`: `None` when the value is `None`, or not found with a `None` among values."""
        if len(values) == 1 and isinstance(values[0], (list, tuple, set, frozenset)):
            values = tuple(values[0])
        return IsIn(self, tuple(_wrap(v) for v in values))

    def between(self, low: object, high: object) -> Expr:
        """`low <= self <= high`, both ends included."""
        return (self >= low) & (self <= high)

    def cast(self, to: type | str) -> Expr:
        """The value as another type (`int`, `float`, `str`, `bool`, `datetime`)."""
        return Cast(self, _column_type(to, "cast"))

    def lower(self) -> Expr:
        return StringFunction("lower", self)

    def upper(self) -> Expr:
        return StringFunction("upper", self)

    def length(self) -> Expr:
        """The number of characters."""
        return StringFunction("length", self)

    def contains(self, other: object) -> Expr:
        return StringTest("contains", self, _wrap(other))

    def startswith(self, other: object) -> Expr:
        return StringTest("startswith", self, _wrap(other))

    def endswith(self, other: object) -> Expr:
        return StringTest("endswith", self, _wrap(other))

    def substr(self, start: int, length: int) -> Expr:
        """`length` characters from `start` (1-based; negative counts from the end), as SQL."""
        for value in (start, length):
            if not isinstance(value, int) or isinstance(value, bool):
                raise PipelineError(
                    f"substr({start!r}, {length!r}): start and length are integers, not "
                    f"{type(value).__name__}s; write for example substr(1, 3)"
                )
        return Substr(self, start, length)

    def truncate(self, unit: object) -> Expr:
        """The time floored to a multiple of `unit` since the epoch (order-keeping)."""
        return Truncate(self, unit)

    def hour(self) -> Expr:
        """The hour of a datetime (UTC), 0 to 23."""
        return TimePart("hour", self)

    def day_of_week(self) -> Expr:
        """1 = Sunday ... 7 = Saturday, as Spark's `dayofweek`."""
        return TimePart("day_of_week", self)


def _type_error(label: str, expr: Expr, what: str) -> PipelineError:
    return PipelineError(f"{label}: {expr}: {what}")


def _unify(types: Sequence[type], label: str, expr: Expr) -> type:
    """The one type values of `types` take together: int with float is float; None goes with all."""
    present = [t for t in types if t is not NULL]
    if not present:
        return NULL
    if all(t in (int, float) for t in present):
        return float if float in present else int
    if all(t is present[0] for t in present):
        return present[0]
    names = ", ".join(sorted({type_name(t) for t in present}))
    raise _type_error(
        label, expr, f"mixes {names} values; cast them to one type (.cast(...)) first"
    )


def _refs(*args: BoundExpr) -> frozenset[str]:
    return frozenset().union(*(a.columns for a in args))


def take(columns: Mapping[str, Values], indices: Sequence[int]) -> dict[str, Values]:
    """The rows at `indices` of `columns`."""
    return {name: [values[i] for i in indices] for name, values in columns.items()}


def evaluate_on(bound: BoundExpr, columns: Mapping[str, Values], indices: Sequence[int]) -> Values:
    """`bound`'s values for the rows at `indices` only (lazy `when`, `coalesce`)."""
    if not indices:
        return []
    sub = {name: [columns[name][i] for i in indices] for name in bound.columns}
    try:
        return bound.evaluate(sub, len(indices))
    except RowError as error:
        raise RowError(indices[error.index], error.message) from None


def _unary(function: Callable[[Any], Any], operand: Evaluate) -> Evaluate:
    def evaluate(columns: Mapping[str, Values], size: int) -> Values:
        return [None if v is None else function(v) for v in operand(columns, size)]

    return evaluate


# --- leaves ---------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Col(Expr):
    """A column, unchanged (keeps its watermark)."""

    name: str

    def __str__(self) -> str:
        return f"col({self.name!r})"

    def bind(self, schema: Schema, label: str) -> BoundExpr:
        schema.require(self.name, label)
        name = self.name
        return BoundExpr(
            schema.type_of(name),
            lambda columns, size: columns[name],
            name,
            expr=self,
            columns=frozenset({name}),
        )


def _literal_type(value: object) -> type:
    if value is None:
        return NULL
    for kind in (bool, int, float, str, _dt.datetime, _dt.timedelta):
        if isinstance(value, kind):
            return kind
    call = uncalled(value)
    if call is not None:
        raise PipelineError(f"lit: {call[0]} is not called, so it is no value; call it: {call[1]}")
    raise PipelineError(
        f"lit({value!r}): a literal is None, a bool, int, float, str, datetime or timedelta, "
        f"not a {type(value).__name__}"
    )


@dataclass(frozen=True, eq=False)
class Lit(Expr):
    """A constant (no watermark)."""

    value: Any

    def __post_init__(self) -> None:
        kind = _literal_type(self.value)
        if kind is int and not INT64_MIN <= self.value <= INT64_MAX:
            raise PipelineError(
                f"lit({self.value}): outside the 64-bit integers both runners hold; use a float"
            )

    def __str__(self) -> str:
        return repr(self.value)

    @property
    def internal(self) -> Any:
        return to_micros(self.value) if isinstance(self.value, _dt.datetime) else self.value

    def bind(self, schema: Schema, label: str) -> BoundExpr:
        kind = _literal_type(self.value)
        if kind is _dt.timedelta:
            raise _type_error(
                label, self, "a duration is only a shift of a datetime (sb.col('t') + duration)"
            )
        value = self.internal
        return BoundExpr(kind, lambda columns, size: [value] * size, None, expr=self)


def col(name: str) -> Col:
    """The column `name`."""
    if not isinstance(name, str):
        raise PipelineError(f"col: a column name is a str, got {name!r}")
    return Col(name)


def lit(value: object) -> Lit:
    """The constant `value` (`sb.lit("abc")` is a string, where a bare str would name a column)."""
    return Lit(value)


# --- arithmetic ------------------------------------------------------------------------


def _int64(value: int, index: int, expr: Expr) -> int:
    if INT64_MIN <= value <= INT64_MAX:
        return value
    raise RowError(
        index,
        f"{expr} is {value}, outside the 64-bit integers ({INT64_MIN} to {INT64_MAX}) both "
        "runners hold; cast to float first for larger numbers",
    )


OUTSIDE_DATETIMES = (
    "is outside the datetimes both runners hold (year 1 to 9999); filter such rows out first"
)
"""A `DataError`'s words for a shifted or truncated datetime before year 1 or after 9999."""


def _in_calendar(micros: int, index: int, expr: Expr) -> int:
    if MIN_MICROS <= micros <= MAX_MICROS:
        return micros
    raise RowError(index, f"{expr} {OUTSIDE_DATETIMES}")


def _zero(index: int, expr: Expr, op: str) -> RowError:
    what = "division" if op in ("/", "//") else "modulo"
    return RowError(
        index,
        f"{expr}: {what} by zero; guard it with sb.when(divisor != 0, ...) or filter such rows",
    )


def _arith_function(op: str, kind: type, expr: Expr) -> Callable[[Any, Any, int], Any]:
    if kind is float:
        if op == "+":
            return lambda a, b, i: float(a) + float(b)
        if op == "-":
            return lambda a, b, i: float(a) - float(b)
        if op == "*":
            return lambda a, b, i: float(a) * float(b)
    elif op in "+-*":
        operator = {"+": int.__add__, "-": int.__sub__, "*": int.__mul__}[op]
        return lambda a, b, i: _int64(operator(a, b), i, expr)

    def divide(a: Any, b: Any, i: int) -> Any:
        if b == 0:
            raise _zero(i, expr, op)
        if op == "/":
            return float(a) / float(b)
        if kind is float:
            a, b = float(a), float(b)
        if op == "//":
            return _int64(a // b, i, expr) if kind is int else a // b
        return a % b

    return divide


@dataclass(frozen=True, eq=False)
class Arith(Expr):
    """`left op right` for `+ - * / // %`; on a datetime, `+`/`-` a constant duration shifts it.

    Watermark rule: `x + c`, `c + x`, `x - c` with a constant `c` (a duration
    on a datetime, an integer on an integer) keep order: `Add(±c)` from `x`'s
    source. Every other arithmetic result has no watermark.
    """

    op: str
    left: Expr
    right: Expr

    def __str__(self) -> str:
        return f"({self.left} {self.op} {self.right})"

    def _shift(self, base: BoundExpr, other: Lit, sign: int, label: str) -> BoundExpr:
        delta = sign * _delta_units(base, other.value, label)
        evaluate = base.evaluate
        kind = base.output_type
        expr = self

        def shifted(columns: Mapping[str, Values], size: int) -> Values:
            values = evaluate(columns, size)
            if kind is int:
                return [
                    None if v is None else _int64(v + delta, i, expr) for i, v in enumerate(values)
                ]
            return [
                None if v is None else _in_calendar(v + delta, i, expr)
                for i, v in enumerate(values)
            ]

        steps = (*base.steps, Add(delta)) if base.source is not None else ()
        return BoundExpr(
            kind,
            shifted,
            base.source,
            steps,
            expr=self,
            args=(base,),
            columns=base.columns,
            detail=delta,
        )

    def bind(self, schema: Schema, label: str) -> BoundExpr:
        op, sign = self.op, -1 if self.op == "-" else 1
        if op in "+-" and isinstance(self.right, Lit) and _is_duration(self.right.value):
            return self._shift(self.left.bind(schema, label), self.right, sign, label)
        if op == "+" and isinstance(self.left, Lit) and _is_duration(self.left.value):
            return self._shift(self.right.bind(schema, label), self.left, 1, label)
        left, right = self.left.bind(schema, label), self.right.bind(schema, label)
        if op in "+-":
            if isinstance(self.right, Lit) and (
                left.output_type is _dt.datetime or left.output_type is int is right.output_type
            ):
                return self._shift(left, self.right, sign, label)
            if (
                op == "+"
                and isinstance(self.left, Lit)
                and right.output_type is int is (left.output_type)
            ):
                return self._shift(right, self.left, 1, label)
        for side in (left, right):
            if side.output_type not in (int, float, NULL):
                raise _type_error(
                    label,
                    self,
                    f"{op} needs numbers, not {type_name(side.output_type)}"
                    + (
                        "; shift a datetime by a constant duration (sb.col('t') + '5 minutes')"
                        if side.output_type is _dt.datetime
                        else "; use sb.concat for strings"
                        if side.output_type is str
                        else ""
                    ),
                )
        kind = _unify([left.output_type, right.output_type], label, self)
        kind = int if kind is NULL else kind
        out = float if op == "/" else kind
        function = _arith_function(op, kind, self)
        first, second = left.evaluate, right.evaluate

        def evaluate(columns: Mapping[str, Values], size: int) -> Values:
            return [
                None if a is None or b is None else function(a, b, i)
                for i, (a, b) in enumerate(
                    zip(first(columns, size), second(columns, size), strict=False)
                )
            ]

        return BoundExpr(
            out,
            evaluate,
            None,
            expr=self,
            args=(left, right),
            columns=_refs(left, right),
            detail=kind,
        )


def _is_duration(value: object) -> bool:
    return isinstance(value, (_dt.timedelta, str))


def _delta_units(base: BoundExpr, delta: object, label: str) -> int:
    if base.output_type in (_dt.datetime, int):
        column = base.source or "the column"
        return signed_duration_for(base.output_type, delta, "shift", label, column=column)
    raise PipelineError(
        f"{label}: cannot shift a {type_name(base.output_type)} column by {delta!r}; shift "
        "datetime columns by a timedelta or an interval string, integer columns by an integer"
    )


@dataclass(frozen=True, eq=False)
class Neg(Expr):
    """`-x` (no watermark: it reverses order)."""

    operand: Expr

    def __str__(self) -> str:
        return f"(-{self.operand})"

    def bind(self, schema: Schema, label: str) -> BoundExpr:
        operand = self.operand.bind(schema, label)
        kind = operand.output_type
        if kind not in (int, float):
            raise _type_error(label, self, f"- needs a number, not {type_name(kind)}")
        values = operand.evaluate
        expr = self

        def evaluate(columns: Mapping[str, Values], size: int) -> Values:
            if kind is float:
                return [None if v is None else -v for v in values(columns, size)]
            return [
                None if v is None else _int64(-v, i, expr)
                for i, v in enumerate(values(columns, size))
            ]

        return BoundExpr(kind, evaluate, None, expr=self, args=(operand,), columns=operand.columns)


# --- comparisons and logic --------------------------------------------------------------


def _comparable(left: type, right: type) -> bool:
    if NULL in (left, right):
        return True
    if left in (int, float) and right in (int, float):
        return True
    return left is right and left in (str, bool, _dt.datetime, bytes)


def _nan_last(value: Any) -> Any:
    """Spark's order of floats: NaN equals NaN and is larger than every other value."""
    return (1, 0.0) if value != value else (0, value)


COMPARISONS: dict[str, Callable[[Any, Any], Any]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
"""Each comparison's operator: on Python values here, on Spark `Column`s in the Spark runner."""


@dataclass(frozen=True, eq=False)
class Compare(Expr):
    """`left op right` for `== != < <= > >=`: a bool (no watermark). Floats compare by
    Spark's rule (NaN equals NaN, above all numbers); an int with a float compares as floats."""

    op: str
    left: Expr
    right: Expr

    def __str__(self) -> str:
        return f"({self.left} {self.op} {self.right})"

    def bind(self, schema: Schema, label: str) -> BoundExpr:
        left, right = self.left.bind(schema, label), self.right.bind(schema, label)
        if not _comparable(left.output_type, right.output_type):
            raise _type_error(
                label,
                self,
                f"compares {type_name(left.output_type)} with "
                f"{type_name(right.output_type)}; cast one side (.cast(...)) so both are "
                "one type",
            )
        compare = COMPARISONS[self.op]
        floats = float in (left.output_type, right.output_type)
        first, second = left.evaluate, right.evaluate

        def evaluate(columns: Mapping[str, Values], size: int) -> Values:
            pairs = zip(first(columns, size), second(columns, size), strict=False)
            if floats:
                return [
                    None if a is None or b is None else compare(_nan_last(a), _nan_last(b))
                    for a, b in pairs
                ]
            return [None if a is None or b is None else compare(a, b) for a, b in pairs]

        return BoundExpr(
            bool, evaluate, None, expr=self, args=(left, right), columns=_refs(left, right)
        )


def _require_bool(bound: BoundExpr, expr: Expr, label: str, what: str) -> None:
    if bound.output_type not in (bool, NULL):
        raise _type_error(
            label,
            expr,
            f"{what} needs booleans, not {type_name(bound.output_type)}; compare it "
            "(== , is_null(), ...) to get one",
        )


def _and(a: Any, b: Any) -> Any:
    if a is False or b is False:
        return False
    if a is None or b is None:
        return None
    return True


def _or(a: Any, b: Any) -> Any:
    if a is True or b is True:
        return True
    if a is None or b is None:
        return None
    return False


@dataclass(frozen=True, eq=False)
class Logic(Expr):
    """`&` / `|` of booleans, three-valued as SQL (`None & False` is `False`)."""

    op: str
    left: Expr
    right: Expr

    def __str__(self) -> str:
        return f"({self.left} {self.op} {self.right})"

    def bind(self, schema: Schema, label: str) -> BoundExpr:
        left, right = self.left.bind(schema, label), self.right.bind(schema, label)
        _require_bool(left, self, label, self.op)
        _require_bool(right, self, label, self.op)
        combine = _and if self.op == "&" else _or
        first, second = left.evaluate, right.evaluate

        def evaluate(columns: Mapping[str, Values], size: int) -> Values:
            return [
                combine(a, b)
                for a, b in zip(first(columns, size), second(columns, size), strict=False)
            ]

        return BoundExpr(
            bool, evaluate, None, expr=self, args=(left, right), columns=_refs(left, right)
        )


@dataclass(frozen=True, eq=False)
class Not(Expr):
    """`~x` of a boolean (`None` stays `None`)."""

    operand: Expr

    def __str__(self) -> str:
        return f"(~{self.operand})"

    def bind(self, schema: Schema, label: str) -> BoundExpr:
        operand = self.operand.bind(schema, label)
        _require_bool(operand, self, label, "~")
        return BoundExpr(
            bool,
            _unary(lambda v: not v, operand.evaluate),
            None,
            expr=self,
            args=(operand,),
            columns=operand.columns,
        )


@dataclass(frozen=True, eq=False)
class IsNull(Expr):
    """`is_null()` (or `is_not_null()` with `negate`): never `None`."""

    operand: Expr
    negate: bool

    def __str__(self) -> str:
        return f"{self.operand}.{'is_not_null' if self.negate else 'is_null'}()"

    def bind(self, schema: Schema, label: str) -> BoundExpr:
        operand = self.operand.bind(schema, label)
        values, negate = operand.evaluate, self.negate

        def evaluate(columns: Mapping[str, Values], size: int) -> Values:
            return [(v is None) != negate for v in values(columns, size)]

        return BoundExpr(bool, evaluate, None, expr=self, args=(operand,), columns=operand.columns)


@dataclass(frozen=True, eq=False)
class IsIn(Expr):
    """SQL's `IN`: `True` if found; else `None` if the value or any listed value is `None`."""

    operand: Expr
    values: tuple[Expr, ...]

    def __str__(self) -> str:
        return f"{self.operand}.isin({', '.join(map(str, self.values))})"

    def bind(self, schema: Schema, label: str) -> BoundExpr:
        if not self.values:
            raise _type_error(label, self, "isin() needs at least one value")
        operand = self.operand.bind(schema, label)
        values = [v.bind(schema, label) for v in self.values]
        for value in values:
            if not _comparable(operand.output_type, value.output_type):
                raise _type_error(
                    label,
                    self,
                    f"looks for a {type_name(value.output_type)} among "
                    f"{type_name(operand.output_type)} values; give values of the column's type",
                )
        floats = float in (operand.output_type, *(v.output_type for v in values))
        key = _nan_last if floats else (lambda v: v)

        def evaluate(columns: Mapping[str, Values], size: int) -> Values:
            listed = list(zip(*(v.evaluate(columns, size) for v in values), strict=True))
            out: Values = []
            for x, candidates in zip(operand.evaluate(columns, size), listed, strict=False):
                if x is None:
                    out.append(None)
                elif any(c is not None and key(c) == key(x) for c in candidates):
                    out.append(True)
                else:
                    out.append(None if None in candidates else False)
            return out

        return BoundExpr(
            bool,
            evaluate,
            None,
            expr=self,
            args=(operand, *values),
            columns=_refs(operand, *values),
        )


# --- casts -------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Cast(Expr):
    """The value as type `to` (rules in `transforms.casts`). Watermark rule: a cast to the
    column's own type keeps its watermark; no other cast does (no cast crosses types)."""

    operand: Expr
    to: type

    def __str__(self) -> str:
        return f"{self.operand}.cast({type_name(self.to)})"

    def bind(self, schema: Schema, label: str) -> BoundExpr:
        operand = self.operand.bind(schema, label)
        source = operand.output_type
        if source is self.to or source is NULL:
            return BoundExpr(
                self.to,
                operand.evaluate,
                operand.source,
                operand.steps,
                expr=self,
                args=(operand,),
                columns=operand.columns,
            )
        refusal = cast_refusal(source, self.to)
        if refusal:
            raise _type_error(label, self, refusal)
        convert = cast_function(source, self.to)
        values, expr = operand.evaluate, self

        def evaluate(columns: Mapping[str, Values], size: int) -> Values:
            out: Values = []
            for i, v in enumerate(values(columns, size)):
                if v is None:
                    out.append(None)
                    continue
                try:
                    out.append(convert(v))
                except ValueError as exc:
                    raise RowError(i, f"{expr}: {exc}") from None
            return out

        return BoundExpr(
            self.to, evaluate, None, expr=self, args=(operand,), columns=operand.columns
        )


# --- strings ----------------------------------------------------------------------------


def _require(bound: BoundExpr, kinds: tuple[type, ...], expr: Expr, label: str, what: str) -> None:
    if bound.output_type not in (*kinds, NULL):
        wanted = " or ".join(type_name(k) for k in kinds)
        raise _type_error(
            label,
            expr,
            f"{what} needs a {wanted} value, not {type_name(bound.output_type)}"
            + ("; cast it first (.cast(str))" if str in kinds else ""),
        )


_STRING_FUNCTIONS: dict[str, tuple[type, Callable[[str], Any]]] = {
    "lower": (str, str.lower),
    "upper": (str, str.upper),
    "length": (int, len),
}


@dataclass(frozen=True, eq=False)
class StringFunction(Expr):
    """`lower()`, `upper()`, `length()` of a string."""

    name: str
    operand: Expr

    def __str__(self) -> str:
        return f"{self.operand}.{self.name}()"

    def bind(self, schema: Schema, label: str) -> BoundExpr:
        operand = self.operand.bind(schema, label)
        _require(operand, (str,), self, label, f"{self.name}()")
        kind, function = _STRING_FUNCTIONS[self.name]
        return BoundExpr(
            kind,
            _unary(function, operand.evaluate),
            None,
            expr=self,
            args=(operand,),
            columns=operand.columns,
        )


_STRING_TESTS: dict[str, Callable[[str, str], bool]] = {
    "contains": lambda s, t: t in s,
    "startswith": str.startswith,
    "endswith": str.endswith,
}


@dataclass(frozen=True, eq=False)
class StringTest(Expr):
    """`contains(s)`, `startswith(s)`, `endswith(s)`: a bool."""

    name: str
    operand: Expr
    other: Expr

    def __str__(self) -> str:
        return f"{self.operand}.{self.name}({self.other})"

    def bind(self, schema: Schema, label: str) -> BoundExpr:
        operand, other = self.operand.bind(schema, label), self.other.bind(schema, label)
        _require(operand, (str,), self, label, f"{self.name}()")
        _require(other, (str,), self, label, f"{self.name}()")
        test = _STRING_TESTS[self.name]
        first, second = operand.evaluate, other.evaluate

        def evaluate(columns: Mapping[str, Values], size: int) -> Values:
            return [
                None if a is None or b is None else test(a, b)
                for a, b in zip(first(columns, size), second(columns, size), strict=False)
            ]

        return BoundExpr(
            bool, evaluate, None, expr=self, args=(operand, other), columns=_refs(operand, other)
        )


def substring_sql(text: str, start: int, length: int) -> str:
    """SQL's `substring(text, start, length)`: 1-based, 0 counts as 1, negative from the end."""
    size = len(text)
    first = start - 1 if start > 0 else size + start if start < 0 else 0
    end = first + length
    first = max(first, 0)
    if first >= end:
        return ""
    return text[first:end]


@dataclass(frozen=True, eq=False)
class Substr(Expr):
    """`substr(start, length)`, as SQL's `substring`."""

    operand: Expr
    start: int
    count: int

    def __str__(self) -> str:
        return f"{self.operand}.substr({self.start}, {self.count})"

    def bind(self, schema: Schema, label: str) -> BoundExpr:
        operand = self.operand.bind(schema, label)
        _require(operand, (str,), self, label, "substr()")
        start, count = self.start, self.count
        return BoundExpr(
            str,
            _unary(lambda s: substring_sql(s, start, count), operand.evaluate),
            None,
            expr=self,
            args=(operand,),
            columns=operand.columns,
        )


@dataclass(frozen=True, eq=False)
class Concat(Expr):
    """The strings joined; `None` if any is `None`."""

    parts: tuple[Expr, ...]

    def __str__(self) -> str:
        return f"concat({', '.join(map(str, self.parts))})"

    def bind(self, schema: Schema, label: str) -> BoundExpr:
        if not self.parts:
            raise _type_error(label, self, "concat() needs at least one value")
        parts = [p.bind(schema, label) for p in self.parts]
        for part in parts:
            _require(part, (str,), self, label, "concat()")

        def evaluate(columns: Mapping[str, Values], size: int) -> Values:
            rows = zip(*(p.evaluate(columns, size) for p in parts), strict=True)
            return [None if None in row else "".join(row) for row in rows]

        return BoundExpr(str, evaluate, None, expr=self, args=tuple(parts), columns=_refs(*parts))


# --- time --------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Truncate(Expr):
    """`base` floored to a multiple of `unit` since the epoch (a multiple below the 64-bit
    integers, or before year 1, is a `DataError`). Watermark rule: keeps order, so `W(x, t)`
    gives `W(out, floor(t))` (`Floor` step)."""

    base: Expr
    unit: object

    def __str__(self) -> str:
        return f"{self.base}.truncate({self.unit!r})"

    def bind(self, schema: Schema, label: str) -> BoundExpr:
        base = self.base.bind(schema, label)
        if base.output_type not in (_dt.datetime, int):
            raise PipelineError(
                f"{label}: truncate() needs a datetime or integer column, not "
                f"{type_name(base.output_type)}"
            )
        unit = duration_for(
            base.output_type,
            self.unit,
            "truncation unit",
            label,
            column=base.source or "the column",
            positive=True,
        )
        steps = (*base.steps, Floor(unit)) if base.source is not None else ()
        values, expr = base.evaluate, self
        bounded = _int64 if base.output_type is int else _in_calendar

        def evaluate(columns: Mapping[str, Values], size: int) -> Values:
            return [
                None if v is None else bounded(v - v % unit, i, expr)
                for i, v in enumerate(values(columns, size))
            ]

        return BoundExpr(
            base.output_type,
            evaluate,
            base.source,
            steps,
            expr=self,
            args=(base,),
            columns=base.columns,
            detail=unit,
        )


_HOUR = 3_600_000_000
_DAY = 24 * _HOUR
_TIME_PARTS: dict[str, Callable[[int], int]] = {
    "hour": lambda micros: micros // _HOUR % 24,
    "day_of_week": lambda micros: (micros // _DAY + 4) % 7 + 1,  # 1970-01-01 was a Thursday
}


@dataclass(frozen=True, eq=False)
class TimePart(Expr):
    """`hour()` (0-23, UTC) or `day_of_week()` (1 = Sunday) of a datetime: an int."""

    name: str
    operand: Expr

    def __str__(self) -> str:
        return f"{self.operand}.{self.name}()"

    def bind(self, schema: Schema, label: str) -> BoundExpr:
        operand = self.operand.bind(schema, label)
        _require(operand, (_dt.datetime,), self, label, f"{self.name}()")
        return BoundExpr(
            int,
            _unary(_TIME_PARTS[self.name], operand.evaluate),
            None,
            expr=self,
            args=(operand,),
            columns=operand.columns,
        )


# --- conditionals ------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class When(Expr):
    """`sb.when(cond, value).when(...).otherwise(value)`: the value of the first true condition
    (`None` without `otherwise`); a branch is evaluated only for the rows that take it."""

    cases: tuple[tuple[Expr, Expr], ...]
    default: Expr | None = None

    def __str__(self) -> str:
        text = "sb" + "".join(f".when({c}, {v})" for c, v in self.cases)
        return text + (f".otherwise({self.default})" if self.default is not None else "")

    def when(self, condition: object, value: object) -> When:
        if self.default is not None:
            raise PipelineError(f"{self}: .when(...) after .otherwise(...); put it before")
        return When((*self.cases, (_wrap(condition), _wrap(value))))

    def otherwise(self, value: object) -> When:
        if self.default is not None:
            raise PipelineError(f"{self}: .otherwise(...) given twice")
        return When(self.cases, _wrap(value))

    def bind(self, schema: Schema, label: str) -> BoundExpr:
        conditions = [c.bind(schema, label) for c, _ in self.cases]
        for condition in conditions:
            _require_bool(condition, self, label, "when()'s condition")
        values = [v.bind(schema, label) for _, v in self.cases]
        default = self.default.bind(schema, label) if self.default is not None else None
        branches = values + ([default] if default is not None else [])
        kind = _unify([b.output_type for b in branches], label, self)
        if kind is NULL:
            raise _type_error(label, self, "every branch is None; cast one to a type")

        def evaluate(columns: Mapping[str, Values], size: int) -> Values:
            out: Values = [None] * size
            pending = list(range(size))
            for condition, value in zip(conditions, values, strict=False):
                if not pending:
                    break
                tests = evaluate_on(condition, columns, pending)
                taken = [i for i, t in zip(pending, tests, strict=False) if t is True]
                pending = [i for i, t in zip(pending, tests, strict=False) if t is not True]
                for i, v in zip(taken, evaluate_on(value, columns, taken), strict=False):
                    out[i] = v
            if default is not None:
                for i, v in zip(pending, evaluate_on(default, columns, pending), strict=False):
                    out[i] = v
            if kind is float:
                return [None if v is None else float(v) for v in out]
            return out

        args = tuple(a for pair in zip(conditions, values, strict=False) for a in pair)
        args += (default,) if default is not None else ()
        return BoundExpr(kind, evaluate, None, expr=self, args=args, columns=_refs(*args))


def when(condition: object, value: object) -> When:
    """`value` where `condition` is true: `sb.when(c, v).when(c2, v2).otherwise(v3)`."""
    return When(((_wrap(condition), _wrap(value)),))


@dataclass(frozen=True, eq=False)
class Coalesce(Expr):
    """The first non-`None` value; later arguments are evaluated only for rows still `None`."""

    args: tuple[Expr, ...]

    def __str__(self) -> str:
        return f"coalesce({', '.join(map(str, self.args))})"

    def bind(self, schema: Schema, label: str) -> BoundExpr:
        if not self.args:
            raise _type_error(label, self, "coalesce() needs at least one value")
        args = [a.bind(schema, label) for a in self.args]
        kind = _unify([a.output_type for a in args], label, self)

        def evaluate(columns: Mapping[str, Values], size: int) -> Values:
            out: Values = [None] * size
            pending = list(range(size))
            for arg in args:
                if not pending:
                    break
                got = evaluate_on(arg, columns, pending)
                for i, v in zip(pending, got, strict=False):
                    out[i] = v
                pending = [i for i, v in zip(pending, got, strict=False) if v is None]
            if kind is float:
                return [None if v is None else float(v) for v in out]
            return out

        return BoundExpr(kind, evaluate, None, expr=self, args=tuple(args), columns=_refs(*args))


def coalesce(*exprs: object) -> Coalesce:
    """The first of `exprs` that is not `None`, row by row."""
    return Coalesce(tuple(_wrap(e) for e in exprs))


def concat(*exprs: object) -> Concat:
    """The strings `exprs` joined (`None` if any is `None`)."""
    return Concat(tuple(_wrap(e) for e in exprs))


def expression(value: object, label: str) -> Expr:
    """`value` as an expression for `Select`/`with_columns`: a str names a column."""
    if isinstance(value, str):
        return Col(value)
    if isinstance(value, Expr):
        return value
    if isinstance(value, (bool, int, float, _dt.datetime)) or value is None:
        return Lit(value)
    call = uncalled(value)
    if call is not None:
        raise PipelineError(
            f"{label}: {call[0]} is not called, so it is no expression; call it: {call[1]}"
        )
    raise PipelineError(
        f"{label}: {value!r} is not an expression; use sb.col('name'), sb.lit(value), "
        "sb.col('t') + '5 minutes', ... (or Map for Python code)"
    )


def predicate_type_check(bound: BoundExpr, expr: Expr, label: str) -> None:
    """`Filter(expr)` needs a boolean expression."""
    if bound.output_type is not bool:
        raise _type_error(
            label,
            expr,
            f"Filter needs a bool expression, not {type_name(bound.output_type)}; compare it "
            "(sb.col('x') > 0, .is_not_null(), ...)",
        )
