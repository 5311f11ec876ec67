"""Each column's judge as data: how the Spark runner's stateful operators compare it with
Spark's one watermark, compiled from the graph's watermark rules (`sparkbeam.derivation`)
without Spark. `judges.Judge` adds the Spark columns; the plan decides from these alone which
columns a node cannot key state or late rows on (`held`, `apart`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Self, TypeVar

from sparkbeam.derivation import Add, Derived, Step
from sparkbeam.errors import PipelineError
from sparkbeam.graph import Node
from sparkbeam.runners.spark import limits

Origins = Mapping[int, frozenset[int]]


@dataclass(frozen=True)
class JudgeRule:
    """A column's judge: `J(v) = spark_time(v + offset)`, which Spark compares with `W`.

    Every rule of the model moves a watermark by a constant or floors it to an
    aligned grid, so every judge is the event time's own judge (`offset = 1`)
    moved by a constant: two columns with equal judges close at the same `W`.
    """

    kind: type
    offset: int
    steps: tuple[Step, ...] = ()
    """How the column's model watermark follows from the event time's (`late_filter.mark`)."""
    held: bool = False
    """The model caps this column's watermark by rows an operator holds (`Derived.held`):
    the judge closes no earlier than the model's watermark, but may close later."""
    apart: str | None = None
    """The label of a `Union` or `Join` where watermarks of several `WithWatermark`s meet with
    this column derived differently on its inputs: the model's watermark there is the minimum
    of the derived watermarks, which Spark's one watermark (the minimum before derivation)
    cannot give; the judge may close later (`merged`)."""

    def moved(self, amount: int, step: Step) -> Self:
        """The judge of `v` that this judge gives to `v + amount`; its watermark is this one's
        through `step`."""
        return replace(self, offset=self.offset + amount, steps=(*self.steps, step))

    def through(self, derived: Derived) -> Self:
        """The judge of the column `derived` makes from this one's.

        `Add(a)`: `v < wm + a` exactly when `v - a < wm`. `Floor(u)` gives grid
        values, and for a grid value `v`, `v < floor(wm)` exactly when
        `v + u - 1 < wm`.
        """
        judge = self
        for step in derived.steps:
            amount = -step.amount if isinstance(step, Add) else step.unit - 1
            judge = judge.moved(amount, step)
        return replace(judge, held=judge.held or derived.held)

    def keyed_refusal(self, label: str, column: str) -> PipelineError | None:
        """Why node `label` cannot key state or late rows on `column` by this judge: the
        model's watermark there depends on rows another operator holds (`held`), or on which
        of several `WithWatermark`s holds it back (`apart`); None where it can."""
        if self.held:
            return limits.HELD_WINDOW_START.error(label, column=column)
        if self.apart is not None:
            return limits.MERGED_DERIVED_APART.error(label, column=column, merge=self.apart)
        return None


J = TypeVar("J", bound=JudgeRule)


def merged(judges: Sequence[J], meeting: str | None) -> J:
    """The judge of the minimum of several watermarks: the latest of their judges.

    With one origin (`meeting` None) every input's watermark follows from the
    same one. Where watermarks of several `WithWatermark`s meet at `meeting`,
    Spark's watermark is the minimum of theirs, `W = min(wm_a, wm_b)`, and
    the model's of the column `min(f_a(wm_a), f_b(wm_b))`: a judge of `W`
    alone is exact when `f_a = f_b` (then that is `f(W)`), not otherwise.
    With tumbling windows of 10 and 4 on `window_end`, wm_a = 100 and
    wm_b = 9 close window_end 10 in the model (10 < min(110, 12)); with
    wm_a = 9 and wm_b = 100 they do not (10 < min(10, 104) fails); Spark
    sees W = 9 both times. Such a column's judge is marked `apart`.
    """
    latest = max(judges, key=lambda judge: judge.offset)
    apart = next((judge.apart for judge in judges if judge.apart), None)
    if meeting is not None and len(set(replace(j, apart=None) for j in judges)) > 1:
        apart = apart or meeting
    return replace(latest, apart=apart)


def derived_judges(
    node: Node, inputs: Sequence[Mapping[str, J]], meets: bool, own: Callable[[type], J]
) -> dict[str, J]:
    """The judges of a node's output from its inputs' judges: its watermark rule (`Node.rule`),
    compiled; `own(kind)` is the judge of a column the node watermarks itself.

    Where inputs meet, a column's judge is the latest of theirs (the judge of
    the minimum of their watermarks: it closes when the last of them does).
    Where watermarks of several `WithWatermark`s meet (`meets`), that is
    exact only for a column derived alike on every input (`merged`).
    """
    out: dict[str, J] = {}
    for derived in node.rule.derived:
        if derived.column not in node.info.watermarked:
            continue
        bases = [judges.get(derived.source) for judges in inputs]
        if bases and all(base is not None for base in bases):
            judges = [b.through(derived) for b in bases if b is not None]
            out[derived.column] = merged(judges, node.label if meets else None)
    for column in node.rule.own:
        out[column] = own(node.info.schema.type_of(column))
    return out


def meets_at(node: Node, origins: Origins) -> bool:
    """Whether watermarks of several `WithWatermark`s meet at `node` (of several inputs)."""
    return len(node.inputs) > 1 and len(origins[node.id]) > 1


def own_rule(kind: type) -> JudgeRule:
    """The judge of an event time a `WithWatermark` watermarks: `v + 1`."""
    return JudgeRule(kind, 1)


def pipeline_judges(nodes: Sequence[Node], origins: Origins) -> dict[int, dict[str, JudgeRule]]:
    """Every node's output judges, all nodes in one query (origins: `watermark_origins`)."""
    judges: dict[int, dict[str, JudgeRule]] = {}
    for node in nodes:
        inputs = [judges.get(i, {}) for i in node.inputs]
        judges[node.id] = derived_judges(node, inputs, meets_at(node, origins), own_rule)
    return judges
