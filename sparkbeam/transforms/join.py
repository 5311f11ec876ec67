"""`Join`: an equi-join of two inputs, optionally with a time-range (interval) condition.

- **Output columns**: the `on` keys once (for outer joins, from whichever side
  has the row), then the left side's other columns, then the right side's. A
  right column whose name clashes with an output column gets `suffix`
  (default `"_right"`) appended; if that still clashes, the join is refused.
- **Window join**: when `on` holds columns watermarked on both sides, a key
  whose value in such a column is below the minimum of both sides'
  watermarks can get no new match: its state is dropped and the unmatched
  rows of the outer side(s) are emitted, before the watermark is forwarded.
- **Interval join**: with `times=(left_time, right_time)` and
  `within=(lower, upper)`, rows match only when
  `left_time + lower <= right_time <= left_time + upper` (both inclusive).
  A left row is dropped (emitted if unmatched and the left side is kept) once
  the right side's watermark on `right_time` exceeds `left_time + upper`; a
  right row once the left side's watermark on `left_time` exceeds
  `right_time - lower`.
- **Watermarks**: on key columns watermarked on both sides, the minimum of
  both (`policy="min"`, the default) or the maximum (`policy="max"`, Spark's
  `multipleWatermarkPolicy=max`); all others are dropped. A row whose window
  key is below the output watermark cannot match without breaking invariant
  W: it is late, dropped and counted (`late_rows()` of the join, laid out as
  an unmatched row). That happens with `policy="max"` and when an idle side
  (`WithWatermark(idle_after=...)`, left out of the minimum) comes back.
- On unbounded input a join that no watermark can clean (no key watermarked
  on both sides and no interval condition with watermarks on both times)
  would hold state forever: it is refused when applied.
- Rows with a `None` key never match (SQL); in an outer join they are emitted
  unmatched at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sparkbeam.derivation import WatermarkRule, passing
from sparkbeam.errors import PipelineError
from sparkbeam.graph import (
    EdgeInfo,
    Node,
    PrimitiveTransform,
    init_fields,
    input_node,
    needs_watermark,
)
from sparkbeam.schema import Schema, type_name
from sparkbeam.time import Duration, describe_duration, shown_value
from sparkbeam.transforms.union import check_policy
from sparkbeam.transforms.validation import column_names, offset_on, require_time_column

if TYPE_CHECKING:
    from sparkbeam.pipeline import PCollection

JOIN_KINDS = ("inner", "left", "right", "full")


@dataclass(frozen=True)
class JoinLayout:
    """Where each output column comes from: `(side, column)`; side 2 means a key."""

    sources: tuple[tuple[str, int, str], ...]
    """`(output name, side, input column)`; side -1: key column, from either side."""


@dataclass(frozen=True, eq=False, init=False)
class Join(PrimitiveTransform):
    """`a.join(b, on=["k"], how="left")`; add `times=` and `within=` for an interval join.

    Args:
        other: The right side.
        on: The key column(s), named alike on both sides.
        how: `"inner"`, `"left"`, `"right"` or `"full"`.
        times: `(left_time, right_time)` for an interval join.
        within: `(lower, upper)`: an interval join matches when
            `left_time + lower <= right_time <= left_time + upper`.
        suffix: Added to a right-side column whose name the output already has.
        policy: `"min"` or `"max"`: how the watermarks of the two sides merge on
            the keys watermarked on both (as for `Union`).
    """

    other: Node
    """The node of the right side."""
    on: tuple[str, ...]
    how: str
    times: tuple[str, str] | None
    within: tuple[Duration, Duration] | None
    suffix: str
    policy: str

    def holds_state(self) -> bool:
        return True

    def partition_keys(self) -> tuple[str, ...] | None:
        return self.on

    def __init__(
        self,
        other: PCollection,
        on: str | Sequence[str],
        how: str = "inner",
        *,
        times: tuple[str, str] | None = None,
        within: tuple[Duration, Duration] | None = None,
        suffix: str = "_right",
        policy: str = "min",
    ) -> None:
        keys = column_names(on, "on", "Join")
        if (times is None) != (within is None):
            raise PipelineError(
                "Join: an interval join needs both times=(left_time, right_time) and "
                "within=(lower, upper)"
            )
        init_fields(
            self,
            input_node(other, "Join"),
            keys,
            how,
            None if times is None else (times[0], times[1]),
            None if within is None else (within[0], within[1]),
            suffix,
            policy,
        )

    def extra_inputs(self) -> tuple[Node, ...]:
        return (self.other,)

    def default_label(self) -> str:
        return f"Join({', '.join(self.on)})"

    def parameters(self) -> tuple[tuple[str, str], ...]:
        shown = [("how", self.how)]
        if self.times is not None and self.within is not None:
            lower, upper = (describe_duration(d) for d in self.within)
            shown.append(("times", ", ".join(self.times)))
            shown.append(("within", f"{lower}, {upper}"))
        if self.policy != "min":
            shown.append(("policy", self.policy))
        return tuple(shown)

    def infer(self, inputs: Sequence[EdgeInfo], label: str) -> EdgeInfo:
        if len(inputs) != 2:
            raise PipelineError(
                f"{label}: applied to the pipeline, but it joins two PCollections; apply it to "
                "the left one: left | sb.Join(right, on=...) (or left.join(right, on=...))"
            )
        left, right = inputs
        if self.how not in JOIN_KINDS:
            raise PipelineError(f"{label}: how={self.how!r}; use one of {list(JOIN_KINDS)}")
        check_policy(self.policy, label)
        if not self.on:
            raise PipelineError(f"{label}: name the key column(s) to join on with on=")
        for side, info in (("left", left), ("right", right)):
            for key in self.on:
                info.schema.require(key, f"{label} ({side} side) key", f"the {side} input")
        for key in self.on:
            lt, rt = left.schema.type_of(key), right.schema.type_of(key)
            if lt is not rt:
                raise PipelineError(
                    f"{label}: key {key!r} is {type_name(lt)} on the left but {type_name(rt)} "
                    "on the right; convert one side first"
                )
        self.interval_bounds(left.schema, right.schema, label)
        layout = self.layout(left.schema, right.schema, label)
        schema = Schema(
            tuple(
                (name, (right if side == 1 else left).schema.type_of(column))
                for name, side, column in layout.sources
            )
        )
        window_keys = self.window_keys(left, right)
        if not (left.bounded and right.bounded) and not window_keys:
            interval_ok = (
                self.times is not None
                and self.times[0] in left.watermarked
                and self.times[1] in right.watermarked
            )
            if not interval_ok:
                raise PipelineError(self._unbounded_message(left, right, label))
        return EdgeInfo(schema, left.bounded and right.bounded)

    def window_keys(self, left: EdgeInfo, right: EdgeInfo) -> tuple[str, ...]:
        """The `on` columns watermarked on both sides: they clean state."""
        return tuple(k for k in self.on if k in left.watermarked and k in right.watermarked)

    def interval_bounds(self, left: Schema, right: Schema, label: str) -> tuple[int, int] | None:
        """`(lower, upper)` in the time columns' units, or None for a plain equi-join."""
        if self.times is None or self.within is None:
            return None
        left_time, right_time = self.times
        require_time_column(left, left_time, f"{label} (left time)")
        require_time_column(right, right_time, f"{label} (right time)")
        if left.type_of(left_time) is not right.type_of(right_time):
            raise PipelineError(
                f"{label}: times {left_time!r} and {right_time!r} have different types"
            )
        lower = offset_on(left, left_time, self.within[0], label, "within (lower bound)")
        upper = offset_on(left, left_time, self.within[1], label, "within (upper bound)")
        if lower > upper:
            raise PipelineError(
                f"{label}: within=({shown_value(self.within[0])}, "
                f"{shown_value(self.within[1])}) is empty: the lower bound must not exceed the "
                "upper bound"
            )
        return lower, upper

    def layout(self, left: Schema, right: Schema, label: str = "Join") -> JoinLayout:
        sources: list[tuple[str, int, str]] = [(key, -1, key) for key in self.on]
        taken = set(self.on)
        for name in left.names:
            if name not in taken:
                sources.append((name, 0, name))
                taken.add(name)
        for name in right.names:
            if name in self.on:
                continue
            out = name + self.suffix if name in taken else name
            if out in taken:
                raise PipelineError(
                    f"{label}: right column {name!r} clashes with {out!r} even with "
                    f"suffix={self.suffix!r}; rename it with Select first"
                )
            sources.append((out, 1, name))
            taken.add(out)
        return JoinLayout(tuple(sources))

    def _unbounded_message(self, left: EdgeInfo, right: EdgeInfo, label: str) -> str:
        missing = []
        for key in self.on:
            sides = [
                s for s, info in (("left", left), ("right", right)) if key not in info.watermarked
            ]
            missing.append(f"{key!r} has none on the {' and '.join(sides)} side")
            for side, info in (("left", left), ("right", right)):
                if any(name == key for name, _ in info.dropped):
                    missing.append(f"on the {side}, {needs_watermark(info, key, '')}")
        if self.times is not None:
            both = (("left", left), ("right", right))
            for time, (side, info) in zip(self.times, both, strict=True):
                if any(name == time for name, _ in info.dropped):
                    missing.append(f"on the {side}, {needs_watermark(info, time, '')}")
        return (
            f"{label}: on unbounded input this join would keep state forever: no watermark "
            f"cleans it ({'; '.join(missing)}). Join on a window column watermarked on both "
            "sides (for example window_start after .with_watermark(...).tumble(...) on each), "
            "or make it an interval join with times=(left_time, right_time), within=(lower, "
            "upper) and a watermark on both time columns"
        )

    def keeping_watermark(self, column: str) -> str:
        return (
            f"a Join keeps the watermarks of its on= columns watermarked on both sides only: "
            f"join on {column!r} too, or apply .with_watermark({column!r}, delay=...) after it"
        )

    def watermark_rule(self, inputs: Sequence[EdgeInfo], label: str) -> WatermarkRule:
        """The `on` columns watermarked on both sides: the minimum (`policy="max"`: the
        maximum) of both; every other watermark is dropped."""
        return WatermarkRule(passing(self.on))
