"""Row-wise transforms: `Map`, `Filter`, `Select` (expressions: `transforms.expressions`).

Watermark rules (each transform's `watermark_rule`):
- `Filter` keeps every watermark (removing rows never breaks a promise).
- `Select` (and `with_columns`, a `Select` of every column) keeps the
  watermark of a column it passes through (also under a new name or cast to
  its own type) and derives one through an order-keeping expression:
  `col + d` gives `W(out, wm + d)`, `col.truncate(unit)` gives
  `W(out, floor(wm))` (each expression's rule sits in its `bind`).
  Watermarks of columns it drops or computes otherwise are dropped.
- `Map` keeps the watermarks of the columns it declares in `keeps` (it
  promises to leave them unchanged; both runners check the promise on every
  row, `broken_keeps`) and drops all others.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from sparkbeam.derivation import Derived, WatermarkRule, passing
from sparkbeam.errors import DataError, PipelineError
from sparkbeam.graph import EdgeInfo, PrimitiveTransform, init_fields
from sparkbeam.schema import Row, Schema, columns_to_rows, type_name
from sparkbeam.transforms.expressions import (
    BoundExpr,
    Col,
    Expr,
    expression,
    predicate_type_check,
    take,
    uncalled,
)
from sparkbeam.transforms.validation import single_input
from sparkbeam.updates import UpdateStream, passes_over_updates, refused_over_updates


@dataclass(frozen=True, eq=False, init=False)
class Select(PrimitiveTransform):
    """Keep, rename and derive columns: `Select("a", "b", t2=sb.col("t") + "1 minute")`.

    Output columns: the positional names in order, then the keyword ones. A
    keyword value is an expression (`sb.col`, `sb.lit`, operators, functions);
    a plain str names a column; a plain number, bool or datetime is a literal.

    Args:
        *columns: Names of input columns to keep, in order.
        **expressions: Output columns by name: an expression, a column name (str)
            or a literal.
    """

    outputs: tuple[tuple[str, Expr], ...]

    def __init__(self, *columns: str, **expressions: object) -> None:
        outputs: list[tuple[str, Expr]] = [(name, Col(name)) for name in columns]
        for name in columns:
            if not isinstance(name, str):
                raise PipelineError(
                    f"Select: positional arguments are column names, got {name!r}; "
                    "give expressions as keywords (Select(out=sb.col('x')))"
                )
        outputs += [(name, expression(expr, "Select")) for name, expr in expressions.items()]
        names = [name for name, _ in outputs]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise PipelineError(f"Select: column(s) {duplicates} are named twice")
        if not outputs:
            raise PipelineError("Select: name at least one column to keep")
        init_fields(self, tuple(outputs))

    def update_stream(self, inputs: Sequence[EdgeInfo], label: str) -> UpdateStream | None:
        """Over an update stream: kept when every key and pane column is selected as it is."""
        passed = [
            name for name, expr in self.outputs if isinstance(expr, Col) and expr.name == name
        ]
        how = "select each of them by its own name, unchanged"
        return passes_over_updates(inputs, label, "Select", passed, how)

    def infer(self, inputs: Sequence[EdgeInfo], label: str) -> EdgeInfo:
        source = single_input(inputs, label)
        bound = self.bind(source.schema, label)
        schema = Schema(tuple((name, expr.output_type) for name, expr in bound))
        return EdgeInfo(schema, source.bounded)

    def bind(self, schema: Schema, label: str = "Select") -> list[tuple[str, BoundExpr]]:
        bound = [(name, expr.bind(schema, label)) for name, expr in self.outputs]
        for name, value in bound:
            if value.output_type is type(None):
                raise PipelineError(
                    f"{label}: column {name!r} is always None ({value.expr}), so it has no "
                    "type; give it one with .cast(...)"
                )
        return bound

    def keeping_watermark(self, column: str) -> str:
        return (
            f"select {column!r} as it is (or under a new name), or compute it with an "
            "expression that keeps the order (a column plus a duration, .truncate(...))"
        )

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


@dataclass(frozen=True, eq=False, init=False)
class RowFunction(PrimitiveTransform):
    """A user function of each row, with an output schema and `keeps` (`Map`, `FlatMap`).

    The output schema is `schema` when given, else the input's. `keeps` names
    the columns whose values every output row copies from its input row; their
    watermarks pass through, all others are dropped. Each runner checks the
    promise on every row: an output row whose kept column differs from its
    input row's is a `DataError` naming the transform and the row (never a
    row lost as late).
    """

    fn: Callable[[Row], Any]
    schema: Schema | None
    keeps: tuple[str, ...]

    def __init__(
        self,
        fn: Callable[[Row], Any],
        schema: Schema | Mapping[str, Any] | None = None,
        keeps: Sequence[str] = (),
    ) -> None:
        if not callable(fn):
            raise PipelineError(f"{type(self).__name__}: fn must be callable, got {fn!r}")
        if isinstance(keeps, str):
            keeps = (keeps,)
        schema = None if schema is None else Schema.of(schema, type(self).__name__)
        init_fields(self, fn, None if schema is None else Schema.of(schema), tuple(keeps))

    def default_label(self) -> str:
        return f"{type(self).__name__}({getattr(self.fn, '__name__', 'fn')})"

    def keeping_watermark(self, column: str) -> str:
        method = "flat_map" if type(self).__name__ == "FlatMap" else "map"
        return (
            f"a {type(self).__name__} keeps the watermark of a column it names in keeps= (a "
            f"promise that its function leaves the column as it is): .{method}(fn, "
            f"keeps=[{column!r}]); to change {column!r}, compute it with an expression that "
            f"keeps its order instead (.with_columns({column}=sb.col({column!r}) + '1 minute'))"
        )

    def infer(self, inputs: Sequence[EdgeInfo], label: str) -> EdgeInfo:
        source = single_input(inputs, label)
        schema = self.schema or source.schema
        for name in self.keeps:
            source.schema.require(name, f"{label} keeps")
            schema.require(
                name,
                f"{label} keeps",
                "the output schema (schema=)",
                f"add {name!r} to schema= or drop it from keeps",
            )
            was, made = source.schema.type_of(name), schema.type_of(name)
            if made is not was:
                raise PipelineError(
                    f"{label}: keeps={name!r} but schema= makes it {type_name(made)} where the "
                    f"input has {type_name(was)}; declare {name!r}: {type_name(was)} in "
                    "schema= or drop it from keeps"
                )
        return EdgeInfo(schema, source.bounded)

    def watermark_rule(self, inputs: Sequence[EdgeInfo], label: str) -> WatermarkRule:
        """The columns in `keeps` keep their watermarks; all others are dropped."""
        return WatermarkRule(passing(self.keeps))


def broken_keeps(
    label: str,
    keeps: Sequence[str],
    before: Mapping[str, list[Any]],
    after: Mapping[str, list[Any]],
    schemas: tuple[Schema, Schema],
    sources: Sequence[int] | None = None,
) -> DataError | None:
    """The `DataError` for the first output row whose `keeps` column differs from its input
    row's, or None when every promise holds (both runners check it, on internal values).

    `before`/`after` are the input and output columns; output row `i` came from input row
    `sources[i]` (from input row `i` when `sources` is None). NaN equals NaN.
    """
    for name in keeps:
        old, new = before[name], after[name]
        if sources is None and old == new:
            continue
        for i, value in enumerate(new):
            j = i if sources is None else sources[i]
            was = old[j]
            if value != was and not (value != value and was != was):
                row = columns_to_rows(take(before, [j]), schemas[0])[0]
                out = columns_to_rows(take(after, [i]), schemas[1])[0]
                return DataError(
                    f"{label}: keeps={list(keeps)!r} promises that the function leaves "
                    f"{name!r} unchanged, but it made {out[name]!r} of {row[name]!r} on row "
                    f"{row!r} (output {out!r}); leave {name!r} as it is or drop it from keeps "
                    "(its watermark is then dropped)",
                    row,
                )
    return None


@dataclass(frozen=True, eq=False, init=False)
class Map(RowFunction):
    """Apply `fn` to each row (a dict) to get one output row.

    The output schema is `schema` when given, else the input's. `keeps` names
    the columns `fn` leaves unchanged; their watermarks pass through, all
    others are dropped. Over an update stream `keeps` must name every key and
    pane column.

    Args:
        fn: The function, from a row (a dict) to a row.
        schema: The output's column names and types; the input's when omitted.
        keeps: Columns `fn` passes through unchanged: their watermarks are kept.
    """

    def __init__(
        self,
        fn: Callable[[Row], Any],
        schema: Schema | Mapping[str, Any] | None = None,
        keeps: Sequence[str] = (),
    ) -> None:
        super().__init__(fn, schema, keeps)

    def update_stream(self, inputs: Sequence[EdgeInfo], label: str) -> UpdateStream | None:
        """Over an update stream: kept when `keeps` names every key and pane column."""
        stream = inputs[0].updates if inputs else None
        how = "" if stream is None else f"declare keeps={list(stream.kept)!r}"
        return passes_over_updates(inputs, label, "Map", self.keeps, how)


@dataclass(frozen=True, eq=False, init=False)
class Filter(PrimitiveTransform):
    """Keep the rows where `predicate` is true: a bool expression (`sb.col("amount") >= 5`,
    run natively on Spark; a `None` result drops the row, as SQL's WHERE) or a Python function
    of the row (a dict). Every watermark passes through.

    Args:
        predicate: A bool expression (`sb.col("amount") >= 5`) or a function from a
            row (a dict) to a bool.
    """

    predicate: Callable[[Row], bool] | Expr

    def __init__(self, predicate: Callable[[Row], bool] | Expr) -> None:
        call = uncalled(predicate)
        if call is not None:
            raise PipelineError(
                f"Filter: predicate {call[0]} is not called, so it is no expression; call it: "
                f"Filter({call[1]})"
            )
        if not isinstance(predicate, Expr) and not callable(predicate):
            raise PipelineError(
                f"Filter: predicate must be a bool expression (sb.col('x') > 0) or callable "
                f"(a function of the row), got {predicate!r}"
            )
        init_fields(self, predicate)

    def default_label(self) -> str:
        if isinstance(self.predicate, Expr):
            return f"Filter({self.predicate})"
        return f"Filter({getattr(self.predicate, '__name__', 'predicate')})"

    def update_stream(self, inputs: Sequence[EdgeInfo], label: str) -> UpdateStream | None:
        """Over an update stream: kept when the predicate is an expression over key and pane
        columns only (a filter on a value could hide a group's correction)."""
        stream = single_input(inputs, label).updates
        if stream is None:
            return None
        if not isinstance(self.predicate, Expr):
            raise refused_over_updates(
                label,
                "Filter",
                stream,
                "a Filter function over an update stream could keep a group's earlier row and "
                f"drop its correction; filter with an expression over {list(stream.kept)} only "
                "(sb.col('pane_is_last'), a key compared with a value)",
            )
        bound = self.bind(inputs[0].schema, label)
        assert bound is not None
        others = sorted(bound.columns - set(stream.kept))
        if others:
            raise refused_over_updates(
                label,
                "Filter",
                stream,
                f"a Filter over an update stream may read only its key and pane columns "
                f"{list(stream.kept)} (a filter on a value could keep a group's earlier row "
                f"and drop its correction), but it reads {others}",
            )
        return replace(stream, whole=False)

    def infer(self, inputs: Sequence[EdgeInfo], label: str) -> EdgeInfo:
        source = single_input(inputs, label)
        self.bind(source.schema, label)
        return source

    def bind(self, schema: Schema, label: str = "Filter") -> BoundExpr | None:
        """The predicate checked against `schema` (`None` for a Python function)."""
        if not isinstance(self.predicate, Expr):
            return None
        bound = self.predicate.bind(schema, label)
        predicate_type_check(bound, self.predicate, label)
        return bound

    def watermark_rule(self, inputs: Sequence[EdgeInfo], label: str) -> WatermarkRule:
        return WatermarkRule(passing(inputs[0].schema.names))
