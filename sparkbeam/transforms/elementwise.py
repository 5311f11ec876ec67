"""Row-wise transforms: `Map`, `Filter` and `Select`, and the expressions `Select` takes.

Watermark rules (each transform's `watermark_rule`):
- `Filter` keeps every watermark (removing rows never breaks a promise).
- `Select` keeps the watermark of a column it passes through (also under a new
  name) and derives one through an order-keeping expression: `col + d`
  gives `W(out, wm + d)`, `col.truncate(unit)` gives `W(out, floor(wm))`.
  Watermarks of columns it drops or computes otherwise are dropped.
- `Map` keeps the watermarks of the columns it declares in `keeps` (it
  promises to leave them unchanged; the direct runner checks the promise
  through invariant W) and drops all others.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from sparkbeam.derivation import Add, Derived, Floor, Step, WatermarkRule, passing
from sparkbeam.errors import PipelineError
from sparkbeam.graph import EdgeInfo, PrimitiveTransform
from sparkbeam.schema import Row, Schema, type_name
from sparkbeam.time import Duration
from sparkbeam.transforms.validation import duration_for, signed_duration_for, single_input


@attrs.frozen
class BoundExpr:
    """An expression checked against a schema: its type, how to compute it, how it maps watermarks.

    `source` is the column whose watermark derives this one (`None`: no
    watermark); `steps` are the order-keeping steps from that column to this
    one (a shift is `Add`, a truncation `Floor`), which runners also use to
    compute the value.
    """

    output_type: type
    evaluate: Callable[[Mapping[str, list[Any]]], list[Any]]
    source: str | None
    steps: tuple[Step, ...] = ()


class Expr:
    """A column expression for `Select`: `sb.col("t")`, `sb.col("t") + "5 minutes"`, ..."""

    def bind(self, schema: Schema, label: str) -> BoundExpr:
        raise NotImplementedError

    def __add__(self, delta: object) -> Expr:
        return Shift(self, delta, 1)

    def __sub__(self, delta: object) -> Expr:
        return Shift(self, delta, -1)

    def truncate(self, unit: Duration) -> Expr:
        """The time floored to a multiple of `unit` since the epoch (order-keeping)."""
        return Truncate(self, unit)


@attrs.frozen
class Col(Expr):
    """A column, unchanged."""

    name: str

    def bind(self, schema: Schema, label: str) -> BoundExpr:
        schema.require(self.name, label)
        name = self.name
        return BoundExpr(schema.type_of(name), lambda columns: columns[name], name)


def _delta_units(base: BoundExpr, delta: object, what: str, label: str) -> int:
    if base.output_type in (_dt.datetime, int):
        column = base.source or "the column"
        return signed_duration_for(base.output_type, delta, what, label, column=column)
    raise PipelineError(
        f"{label}: cannot shift a {type_name(base.output_type)} column by {delta!r}; shift "
        "datetime columns by a timedelta or an interval string, integer columns by an integer"
    )


@attrs.frozen(eq=False)
class Shift(Expr):
    """`base + delta` (or minus) for a time column: keeps order, so watermarks shift too."""

    base: Expr
    delta: object
    sign: int

    def bind(self, schema: Schema, label: str) -> BoundExpr:
        base = self.base.bind(schema, label)
        delta = self.sign * _delta_units(base, self.delta, "shift", label)
        evaluate = base.evaluate

        def shifted(columns: Mapping[str, list[Any]]) -> list[Any]:
            return [None if v is None else v + delta for v in evaluate(columns)]

        return BoundExpr(base.output_type, shifted, base.source, (*base.steps, Add(delta)))


@attrs.frozen(eq=False)
class Truncate(Expr):
    """`base` floored to a multiple of `unit` since the epoch: keeps order."""

    base: Expr
    unit: object

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
        evaluate = base.evaluate

        def truncated(columns: Mapping[str, list[Any]]) -> list[Any]:
            return [None if v is None else v - v % unit for v in evaluate(columns)]

        return BoundExpr(base.output_type, truncated, base.source, (*base.steps, Floor(unit)))


def col(name: str) -> Col:
    """The column `name`, for `Select` expressions."""
    return Col(name)


def _expression(value: Expr | str, label: str) -> Expr:
    if isinstance(value, str):
        return Col(value)
    if isinstance(value, Expr):
        return value
    raise PipelineError(
        f"{label}: {value!r} is not an expression; use sb.col('name'), "
        "sb.col('t') + '5 minutes' or sb.col('t').truncate('1 hour') (or Map for Python code)"
    )


@attrs.frozen(init=False)
class Select(PrimitiveTransform):
    """Keep, rename and derive columns: `Select("a", "b", t2=sb.col("t") + "1 minute")`.

    Output columns: the positional names in order, then the keyword ones.
    """

    outputs: tuple[tuple[str, Expr], ...]

    def __init__(self, *columns: str, **expressions: Expr | str) -> None:
        outputs: list[tuple[str, Expr]] = [(name, Col(name)) for name in columns]
        for name in columns:
            if not isinstance(name, str):
                raise PipelineError(
                    f"Select: positional arguments are column names, got {name!r}; "
                    "give expressions as keywords (Select(out=sb.col('x')))"
                )
        outputs += [(name, _expression(expr, "Select")) for name, expr in expressions.items()]
        names = [name for name, _ in outputs]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise PipelineError(f"Select: column(s) {duplicates} are named twice")
        if not outputs:
            raise PipelineError("Select: name at least one column to keep")
        self.__attrs_init__(tuple(outputs))

    def infer(self, inputs: Sequence[EdgeInfo], label: str) -> EdgeInfo:
        source = single_input(inputs, label)
        bound = self.bind(source.schema, label)
        schema = Schema(tuple((name, expr.output_type) for name, expr in bound))
        return EdgeInfo(schema, source.bounded)

    def bind(self, schema: Schema, label: str = "Select") -> list[tuple[str, BoundExpr]]:
        return [(name, expr.bind(schema, label)) for name, expr in self.outputs]

    def watermark_rule(self, inputs: Sequence[EdgeInfo], label: str) -> WatermarkRule:
        """Each output whose expression keeps order gets its source's watermark through the
        expression's steps."""
        return WatermarkRule(
            tuple(
                Derived(name, expr.source, expr.steps)
                for name, expr in self.bind(inputs[0].schema, label)
                if expr.source is not None
            )
        )


@attrs.frozen(eq=False, init=False)
class Map(PrimitiveTransform):
    """Apply `fn` to each row (a dict) to get one output row.

    The output schema is `schema` when given, else the input's. `keeps` names
    the columns `fn` leaves unchanged; their watermarks pass through, all
    others are dropped.
    """

    fn: Callable[[Row], Row]
    schema: Schema | None
    keeps: tuple[str, ...]

    def __init__(
        self,
        fn: Callable[[Row], Row],
        schema: Schema | Mapping[str, Any] | None = None,
        keeps: Sequence[str] = (),
    ) -> None:
        if not callable(fn):
            raise PipelineError(f"Map: fn must be callable, got {fn!r}")
        if isinstance(keeps, str):
            keeps = (keeps,)
        self.__attrs_init__(fn, None if schema is None else Schema.of(schema), tuple(keeps))

    def default_label(self) -> str:
        return f"Map({getattr(self.fn, '__name__', 'fn')})"

    def infer(self, inputs: Sequence[EdgeInfo], label: str) -> EdgeInfo:
        source = single_input(inputs, label)
        schema = self.schema or source.schema
        for name in self.keeps:
            source.schema.require(name, f"{label} keeps")
            schema.require(name, f"{label} keeps (output schema)")
            if schema.type_of(name) is not source.schema.type_of(name):
                raise PipelineError(
                    f"{label}: keeps={name!r} but the column changes type in the output schema"
                )
        return EdgeInfo(schema, source.bounded)

    def watermark_rule(self, inputs: Sequence[EdgeInfo], label: str) -> WatermarkRule:
        """The columns in `keeps` keep their watermarks; all others are dropped."""
        return WatermarkRule(passing(self.keeps))


@attrs.frozen(eq=False, init=False)
class Filter(PrimitiveTransform):
    """Keep the rows (dicts) for which `predicate` is true; every watermark passes through."""

    predicate: Callable[[Row], bool]

    def __init__(self, predicate: Callable[[Row], bool]) -> None:
        if not callable(predicate):
            raise PipelineError(f"Filter: predicate must be callable, got {predicate!r}")
        self.__attrs_init__(predicate)

    def default_label(self) -> str:
        return f"Filter({getattr(self.predicate, '__name__', 'predicate')})"

    def infer(self, inputs: Sequence[EdgeInfo], label: str) -> EdgeInfo:
        return single_input(inputs, label)

    def watermark_rule(self, inputs: Sequence[EdgeInfo], label: str) -> WatermarkRule:
        return WatermarkRule(passing(inputs[0].schema.names))
