"""Watermark-derivation rules as data: how a transform's output watermarks follow from its inputs'.

Each primitive transform states its rule once, next to its node
(`PrimitiveTransform.watermark_rule`), as a `WatermarkRule`: for every output
column that can carry a watermark, the input column it comes from and the
order-keeping steps between them (`Add` a constant, `Floor` to a grid). The
pipeline takes the columns that carry a watermark on each edge from it, the
direct runner evaluates it on every watermark message, and the Spark runner
compiles it into the judge columns its stateful operators compare with
Spark's one watermark. No runner keeps its own copy of a rule.

Two parts of the model are not a function of one input watermark, and the
rule says so instead of hiding them:

- `own`: a column the transform watermarks itself (`WithWatermark`: from the
  largest event time it has seen).
- `Derived.held`: the value is also capped by the rows the operator holds
  (`Session`'s `window_start` is at most the start of the oldest open session,
  of any key). A runner follows it only where it can see every held row.

With several inputs (`Union`, `Join`) a column carries a watermark only when
every input carries one on its source, and the output is the minimum of the
inputs' derived values (`policy="max"`: the maximum).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sparkbeam.time import floor_to


@dataclass(frozen=True)
class Add:
    """`value + amount`: a shift (`col + duration`), or part of a window bound."""

    amount: int

    def apply(self, value: int) -> int:
        return value + self.amount


@dataclass(frozen=True)
class Floor:
    """`value` floored to the grid `offset + k * unit` (a window start, a truncation)."""

    unit: int
    offset: int = 0

    def apply(self, value: int) -> int:
        return floor_to(value, self.unit, self.offset)


Step = Add | Floor


def apply_steps(value: int, steps: Iterable[Step]) -> int:
    """`value` through `steps`, in order."""
    for step in steps:
        value = step.apply(value)
    return value


@dataclass(frozen=True)
class Derived:
    """Output `column`'s watermark: input column `source`'s, through `steps`."""

    column: str
    source: str
    steps: tuple[Step, ...] = ()
    held: bool = False
    """Also at most the oldest value the operator still holds (`Session`'s window_start)."""

    def apply(self, value: int) -> int:
        return apply_steps(value, self.steps)


def passing(columns: Iterable[str]) -> tuple[Derived, ...]:
    """Each of `columns` keeps its watermark unchanged."""
    return tuple(Derived(column, column) for column in columns)


@dataclass(frozen=True)
class WatermarkRule:
    """A transform's output watermarks, as data (module docstring)."""

    derived: tuple[Derived, ...] = ()
    own: tuple[str, ...] = ()
    """Columns the transform puts a watermark on itself (`WithWatermark`)."""

    def outputs(self, inputs: Sequence[frozenset[str]]) -> frozenset[str]:
        """The output columns that carry a watermark, given the inputs' watermarked columns."""
        common = frozenset.intersection(*inputs) if inputs else frozenset()
        derived = {d.column for d in self.derived if d.source in common}
        return frozenset(derived) | frozenset(self.own)

    def derive(self, column: str, value: int) -> list[tuple[str, int]]:
        """The output watermarks one input watermark on `column` gives (before any merge and
        before `held` caps)."""
        return [(d.column, d.apply(value)) for d in self.derived if d.source == column]

    def held_columns(self) -> frozenset[str]:
        return frozenset(d.column for d in self.derived if d.held)


NO_WATERMARKS = WatermarkRule()
"""Sources, and transforms whose output carries no watermark (late rows)."""
