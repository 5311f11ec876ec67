"""`CombinePerKey` and its aggregates: `Count`, `Sum`, `Mean`, `Min`, `Max`, `CountDistinct`,
`CollectSet`, `MinBy`, `MaxBy`, `Any`, `All` and user `CombineFn`s; `Finals`
(`pc.finals()`).

Emission rule, `emit="close"` (the default; append-only, each group once): a
group is emitted when the watermark of one of its key columns passes it (the
group's value in that column is `< wm`), or at end of input. On unbounded
input at least one key column must carry a watermark, or the state would grow
forever: such a pipeline is refused when applied.

`emit="update"` makes an update stream (`sparkbeam.updates`), per epoch:
first one row for each group that received rows in the epoch (`"EARLY"`;
`pane_is_last` False), then, once the watermark has risen at the epoch's end,
one row for each group it passed (`"ON_TIME"`, its last: the group is then
dropped); at the end of input every group left emits its `"ON_TIME"` row.
Without a watermarked key on unbounded input it is a running aggregate per
key, whose groups only the end of input passes. It is refused under a
`WithWatermark(emit="event")` (its rows are made per epoch). `Finals` keeps
the rows with `pane_is_last` and drops the pane columns: an append stream
equal, epoch by epoch, to the same pipeline with `emit="close"`.

Output watermarks (both modes): the watermarks of the key columns pass
through, after the groups they released; all others are dropped.

Nulls follow SQL: `Sum`, `Mean`, `Min`, `Max` and `Count(column)` skip
`None`; over no values they give `None` (`Count` gives 0). `Sum` of an
integer column is an integer. The others: `CountDistinct`
counts distinct non-None values (0 over none); `CollectSet` is the sorted list
of them (empty over none); `MinBy`/`MaxBy` give `value` of the row with the
least/greatest non-None `by`, ties going to the least/greatest `value` (None
least); `Any`/`All` are or/and of the non-None booleans. NaN equals NaN and is
the largest value (section 3).
"""

from __future__ import annotations

import datetime as _dt
import typing
from collections.abc import Sequence
from dataclasses import dataclass

from sparkbeam.derivation import WatermarkRule, passing
from sparkbeam.errors import PipelineError, call_form
from sparkbeam.graph import EdgeInfo, PrimitiveTransform, init_fields, needs_watermark
from sparkbeam.schema import Schema, list_of, type_name
from sparkbeam.transforms.validation import column_names, single_input
from sparkbeam.updates import (
    EMIT_CLOSE,
    EMIT_MODES,
    EMIT_UPDATE,
    PANE_COLUMNS,
    PANE_TYPES,
    UpdateStream,
)


class CombineFn:
    """A user aggregate, with Beam's four-method protocol.

    Each input element is the whole row as a dict (datetimes as naive UTC).
    `output_type` is the output column's type (`object` when unknown).
    """

    output_type: type = object

    def create_accumulator(self) -> typing.Any:
        raise NotImplementedError

    def add_input(self, accumulator: typing.Any, element: dict[str, typing.Any]) -> typing.Any:
        raise NotImplementedError

    def merge_accumulators(self, accumulators: Sequence[typing.Any]) -> typing.Any:
        raise NotImplementedError

    def extract_output(self, accumulator: typing.Any) -> typing.Any:
        raise NotImplementedError


COMBINE_FN_METHODS = ("create_accumulator", "add_input", "merge_accumulators", "extract_output")
_NUMERIC = (int, float)
_ORDERED = (int, float, str, _dt.datetime, bytes, bool)


class AggregateFn:
    """A built-in aggregate over one column (or over rows, for `Count()`)."""

    column: str | None

    def output_type(self, schema: Schema, label: str) -> type:
        raise NotImplementedError

    def _input_type(self, schema: Schema, label: str, allowed: tuple[type, ...], what: str) -> type:
        if self.column is None:
            raise PipelineError(f"{label}: {type(self).__name__} needs a column")
        schema.require(self.column, label)
        kind = schema.type_of(self.column)
        if kind not in allowed:
            raise PipelineError(
                f"{label}: {type(self).__name__}({self.column!r}) needs {what} column, but "
                f"{self.column!r} is {type_name(kind)}"
            )
        return kind


@dataclass(frozen=True)
class Count(AggregateFn):
    """The number of rows in the group, or of non-None values of `column`.

    Args:
        column: Count its non-None values; every row when omitted.
    """

    column: str | None = None

    def output_type(self, schema: Schema, label: str) -> type:
        if self.column is not None:
            schema.require(self.column, label)
        return int


@dataclass(frozen=True)
class Sum(AggregateFn):
    """The sum of the non-None values; an integer for an integer column.

    Args:
        column: The column to aggregate.
    """

    column: str

    def output_type(self, schema: Schema, label: str) -> type:
        return self._input_type(schema, label, _NUMERIC, "a numeric (int or float)")


@dataclass(frozen=True)
class Mean(AggregateFn):
    """The mean of the non-None values, as a float (`None` when there are none).

    Args:
        column: The column to aggregate.
    """

    column: str

    def output_type(self, schema: Schema, label: str) -> type:
        self._input_type(schema, label, _NUMERIC, "a numeric (int or float)")
        return float


@dataclass(frozen=True)
class Min(AggregateFn):
    """The smallest non-None value.

    Args:
        column: The column to aggregate.
    """

    column: str

    def output_type(self, schema: Schema, label: str) -> type:
        return self._input_type(schema, label, _ORDERED, "an ordered")


@dataclass(frozen=True)
class Max(AggregateFn):
    """The largest non-None value.

    Args:
        column: The column to aggregate.
    """

    column: str

    def output_type(self, schema: Schema, label: str) -> type:
        return self._input_type(schema, label, _ORDERED, "an ordered")


@dataclass(frozen=True)
class CountDistinct(AggregateFn):
    """The number of distinct non-None values (NaN equals NaN).

    Args:
        column: The column to aggregate.
    """

    column: str

    def output_type(self, schema: Schema, label: str) -> type:
        self._input_type(schema, label, _ORDERED, "an ordered")
        return int


@dataclass(frozen=True)
class CollectSet(AggregateFn):
    """The distinct non-None values as a sorted list (NaN last); empty when there are none.

    Args:
        column: The column to aggregate.
    """

    column: str

    def output_type(self, schema: Schema, label: str) -> type:
        return list_of(self._input_type(schema, label, _ORDERED, "an ordered"))


@dataclass(frozen=True)
class ValueBy(AggregateFn):
    """`value` of the row that is best by `by`: the base of `MinBy` and `MaxBy`."""

    value: str
    by: str

    @property
    def column(self) -> str:  # type: ignore[override]
        return self.value

    def output_type(self, schema: Schema, label: str) -> type:
        schema.require(self.by, label)
        if schema.type_of(self.by) not in _ORDERED:
            raise PipelineError(
                f"{label}: {type(self).__name__}({self.value!r}, {self.by!r}) needs an ordered "
                f"`by` column, but {self.by!r} is {type_name(schema.type_of(self.by))}"
            )
        return self._input_type(schema, label, _ORDERED, "an ordered")


@dataclass(frozen=True)
class MinBy(ValueBy):
    """`value` of the row with the least non-None `by`; among ties the least `value`
    (None least); None when no row has a `by`.

    Args:
        value: The column whose value is the result.
        by: The column that picks the row.
    """


@dataclass(frozen=True)
class MaxBy(ValueBy):
    """`value` of the row with the greatest non-None `by`; among ties the greatest `value`
    (None least); None when no row has a `by`.

    Args:
        value: The column whose value is the result.
        by: The column that picks the row.
    """


@dataclass(frozen=True)
class Any(AggregateFn):
    """True when a non-None value is True; None when there are no non-None values.

    Args:
        column: The column to aggregate.
    """

    column: str

    def output_type(self, schema: Schema, label: str) -> type:
        return self._input_type(schema, label, (bool,), "a bool")


@dataclass(frozen=True)
class All(AggregateFn):
    """True when every non-None value is True; None when there are no non-None values.

    Args:
        column: The column to aggregate.
    """

    column: str

    def output_type(self, schema: Schema, label: str) -> type:
        return self._input_type(schema, label, (bool,), "a bool")


Aggregate = AggregateFn | CombineFn


def _aggregate_type(name: str, aggregate: object, schema: Schema, label: str) -> type:
    if isinstance(aggregate, AggregateFn):
        given = (
            {"value": aggregate.value, "by": aggregate.by}
            if isinstance(aggregate, ValueBy)
            else {"column": aggregate.column}
        )
        wrong = [
            field
            for field, column in given.items()
            if not isinstance(column, str) and not (column is None and isinstance(aggregate, Count))
        ]
        if wrong:
            names = [
                column if isinstance(column, str) else getattr(column, "name", field)
                for field, column in given.items()
            ]  # `sb.col("x")` for "x"
            call = f"sb.{type(aggregate).__name__}({', '.join(repr(str(n)) for n in names)})"
            raise PipelineError(
                f"{label}: aggregate {name}={aggregate!r}: {wrong[0]}={given[wrong[0]]!r} is "
                f"not a column name; aggregates name their columns as strings: {name}={call}"
            )
        return aggregate.output_type(schema, label)
    if isinstance(aggregate, type) and issubclass(aggregate, (AggregateFn, CombineFn)):
        raise PipelineError(
            f"{label}: aggregate {name}={aggregate.__name__} is the class, not an aggregate; "
            f"call it: {name}={call_form(aggregate)}"
        )
    missing = [m for m in COMBINE_FN_METHODS if not callable(getattr(aggregate, m, None))]
    if missing:
        raise PipelineError(
            f"{label}: aggregate {name}={aggregate!r} is neither a built-in aggregate "
            "(sb.Count(), sb.Sum(col), sb.Mean(col), sb.Min(col), sb.Max(col), "
            "sb.CountDistinct(col), sb.CollectSet(col), sb.MinBy(value, by), sb.MaxBy(value, by), "
            f"sb.Any(col), sb.All(col)) nor a "
            f"CombineFn: it lacks {missing}"
        )
    kind = getattr(aggregate, "output_type", object)
    return kind if isinstance(kind, type) else object


@dataclass(frozen=True, init=False)
class CombinePerKey(PrimitiveTransform):
    """Group by `keys` and aggregate: `CombinePerKey(["k"], n=sb.Count(), total=sb.Sum("v"))`.

    Output columns: the keys, then the aggregates in the order given; with
    `emit="update"`, then `pane_timing`, `pane_index` and `pane_is_last`.

    Args:
        keys: The column(s) to group by.
        emit: `"close"` (the default): one row per group, once the watermark
            passes it. `"update"`: the group's value so far after every epoch
            that changes it, then its last row (an update stream). Always the
            mode, never an aggregate.
        **aggregates: Output columns by name, each an aggregate (`sb.Count()`,
            `sb.Sum("v")`, ..., or a `CombineFn`).
    """

    keys: tuple[str, ...]
    aggregates: tuple[tuple[str, typing.Any], ...]
    emit: str = EMIT_CLOSE

    def holds_state(self) -> bool:
        return True

    def partition_keys(self) -> tuple[str, ...] | None:
        return self.keys

    def __init__(
        self, keys: str | Sequence[str], /, emit: str = EMIT_CLOSE, **aggregates: Aggregate
    ) -> None:
        key_tuple = column_names(keys, "keys", "CombinePerKey")
        if not isinstance(emit, str):
            raise PipelineError(
                f"CombinePerKey: emit={emit!r} is not a mode; emit names when groups are "
                "emitted, emit='close' (once, when the watermark passes them) or emit='update' "
                "(each epoch they change, then once more when it passes them); an aggregate "
                "needs another name"
            )
        if emit not in EMIT_MODES:
            raise PipelineError(
                f"CombinePerKey: emit={emit!r} is not a mode; use emit='close' (each group "
                "once, when the watermark passes it) or emit='update' (early results, then "
                "the final row)"
            )
        if not aggregates:
            raise PipelineError(
                "CombinePerKey: name at least one aggregate, for example n=sb.Count()"
            )
        init_fields(self, key_tuple, tuple(aggregates.items()), emit)

    @property
    def updates(self) -> bool:
        """Whether it makes an update stream (`emit="update"`)."""
        return self.emit == EMIT_UPDATE

    def default_label(self) -> str:
        return f"CombinePerKey({', '.join(self.keys)})"

    def parameters(self) -> tuple[tuple[str, str], ...]:
        shown = tuple((name, _describe_aggregate(fn)) for name, fn in self.aggregates)
        return (*shown, ("emit", self.emit)) if self.updates else shown

    def update_stream(self, inputs: Sequence[EdgeInfo], label: str) -> UpdateStream | None:
        """With `emit="update"`, an update stream keyed by `keys`; refused over an update
        stream and under a `WithWatermark(emit="event")`."""
        super().update_stream(inputs, label)
        if not self.updates:
            return None
        if any(info.row_watermarks for info in inputs):
            raise PipelineError(
                f"{label}: emit='update' makes its rows once per epoch, but a "
                "WithWatermark(emit='event') upstream raises the watermark after every row; "
                "use emit='periodic' on that WithWatermark, or emit='close' here"
            )
        return UpdateStream(self.keys, label)

    def infer(self, inputs: Sequence[EdgeInfo], label: str) -> EdgeInfo:
        source = single_input(inputs, label)
        schema = source.schema
        for key in self.keys:
            schema.require(key, f"{label} key")
        duplicates = sorted({k for k in self.keys if self.keys.count(k) > 1})
        if duplicates:
            raise PipelineError(f"{label}: key column(s) {duplicates} are named twice")
        clash = [name for name, _ in self.aggregates if name in self.keys]
        if clash:
            raise PipelineError(
                f"{label}: aggregate name(s) {clash} are also key columns; name them differently"
            )
        fields = [(key, schema.type_of(key)) for key in self.keys]
        fields += [
            (name, _aggregate_type(name, aggregate, schema, label))
            for name, aggregate in self.aggregates
        ]
        if self.updates:
            taken = [name for name, _ in fields if name in PANE_COLUMNS]
            if taken:
                raise PipelineError(
                    f"{label}: emit='update' adds the columns {list(PANE_COLUMNS)}, but "
                    f"{taken} already name a key or an aggregate; name them differently"
                )
            fields += PANE_TYPES
            return EdgeInfo(Schema(tuple(fields)), source.bounded)
        watermarked = self.watermark_rule(inputs, label).outputs([source.watermarked])
        if not source.bounded and not watermarked:
            dropped = [
                needs_watermark(source, key, "")
                for key in self.keys
                if any(name == key for name, _ in source.dropped)
            ]
            raise PipelineError(
                f"{label}: on unbounded input a group is emitted when the watermark of a key "
                f"column passes it, but none of the keys {list(self.keys)} carries a watermark; "
                + (
                    "; ".join(dropped)
                    if dropped
                    else "key on a window column (window_start/window_end) or on a column "
                    "with .with_watermark(...), or use emit='update' for a running aggregate "
                    "(a row per group each epoch it changes)"
                )
            )
        return EdgeInfo(Schema(tuple(fields)), source.bounded)

    def keeping_watermark(self, column: str) -> str:
        return (
            "a CombinePerKey keeps the watermarks of its keys only (an aggregate has none): "
            f"sort or window on a key column (window_start/window_end), or key on {column!r}"
        )

    def watermark_rule(self, inputs: Sequence[EdgeInfo], label: str) -> WatermarkRule:
        """The key columns' watermarks pass (after the groups they released); others drop."""
        return WatermarkRule(passing(self.keys))


@dataclass(frozen=True)
class Finals(PrimitiveTransform):
    """Each group's last row of an update stream, without the pane columns (`pc.finals()`).

    Keeps the rows with `pane_is_last` and drops `pane_timing`, `pane_index`
    and `pane_is_last`: an append stream equal, epoch by epoch, to the same
    pipeline with `emit="close"`. Every watermark passes through.
    """

    def default_label(self) -> str:
        return "finals"

    def update_stream(self, inputs: Sequence[EdgeInfo], label: str) -> UpdateStream | None:
        source = single_input(inputs, label)
        if source.updates is None:
            raise PipelineError(
                f"{label}: finals() reads an update stream (the output of "
                "CombinePerKey(..., emit='update'), or what keeps its key and pane columns), "
                "but its input is an append stream, whose rows are final already; drop "
                "finals(), or apply it after a CombinePerKey with emit='update'"
            )
        return None

    def infer(self, inputs: Sequence[EdgeInfo], label: str) -> EdgeInfo:
        source = single_input(inputs, label)
        kept = tuple(
            (name, kind) for name, kind in source.schema.fields if name not in PANE_COLUMNS
        )
        return EdgeInfo(Schema(kept), source.bounded)

    def watermark_rule(self, inputs: Sequence[EdgeInfo], label: str) -> WatermarkRule:
        """The watermarks of the columns it keeps pass through."""
        names = inputs[0].schema.names
        return WatermarkRule(passing(name for name in names if name not in PANE_COLUMNS))


def _describe_aggregate(aggregate: typing.Any) -> str:
    """`Sum(amount)`, `Count()`, or a user `CombineFn`'s class name."""
    if isinstance(aggregate, ValueBy):
        return f"{type(aggregate).__name__}({aggregate.value}, {aggregate.by})"
    if isinstance(aggregate, AggregateFn):
        return f"{type(aggregate).__name__}({aggregate.column or ''})"
    return type(aggregate).__name__
