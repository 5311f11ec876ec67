"""`Union`: all rows of all inputs, which must have the same schema.

Watermark rule (RisingWave's merger): a column keeps a watermark only when
every input carries one on it; with `policy="min"` (the default, the model's
rule) the output watermark is the minimum of the inputs' latest watermarks,
emitted once every input has one. Chunks pass through at once.

`policy="max"` follows the fastest input instead (Spark's
`multipleWatermarkPolicy=max`): the output watermark is the maximum of the
inputs' latest watermarks, emitted as soon as one input has one. Rows of a
slower input below the output watermark are then late: the `Union` drops
them (so invariant W holds on its output) and they go to its `late_rows()`.

The inputs' watermarks of an epoch take effect at its end: the rows of an
epoch are judged against the output watermark of the epoch before (Spark's
micro-batch), whatever the order in which inputs end the epoch.

Idle inputs (`WithWatermark(idle_after=...)` upstream) are left out of the
minimum or maximum until they bring rows again; their rows below the output
watermark are late here too. Inputs that go idle in one epoch are left out
together at its end; an input back counts for the next watermark (its return
emits none by itself), so no result depends on the order in which inputs end
an epoch or come back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sparkbeam.derivation import WatermarkRule, passing
from sparkbeam.errors import PipelineError
from sparkbeam.graph import EdgeInfo, Node, PrimitiveTransform, init_fields, input_node

if TYPE_CHECKING:
    from sparkbeam.pipeline import PCollection

POLICIES = ("min", "max")


def check_policy(policy: object, label: str) -> None:
    """`policy` is one of `POLICIES`; `PipelineError` naming `label` otherwise."""
    if not isinstance(policy, str) or policy not in POLICIES:
        raise PipelineError(
            f"{label}: policy={policy!r}; use policy='min' (the slowest input's watermark, the "
            "model's rule) or policy='max' (the fastest input's: more rows of the slower "
            "inputs become late)"
        )


@dataclass(frozen=True, eq=False, init=False)
class Union(PrimitiveTransform):
    """`a | Union(b, c)` or `a.union(b, c, policy="max")`: the rows of `a`, `b` and `c`.

    Args:
        *others: The PCollections to add to the one it is applied to.
        policy: `"min"`: a column's output watermark is the least of the inputs';
            `"max"`: the greatest (rows below it are late).
    """

    others: tuple[Node, ...]
    """The nodes of the other inputs."""
    policy: str

    def __init__(self, *others: PCollection, policy: str = "min") -> None:
        init_fields(self, tuple(input_node(other, "Union") for other in others), policy)

    def extra_inputs(self) -> tuple[Node, ...]:
        return self.others

    def parameters(self) -> tuple[tuple[str, str], ...]:
        return (("policy", self.policy),) if self.policy != "min" else ()

    def infer(self, inputs: Sequence[EdgeInfo], label: str) -> EdgeInfo:
        if len(inputs) < 2:
            raise PipelineError(
                f"{label}: got {len(inputs)} input; it unions a PCollection with at least one "
                "other: a | sb.Union(b) (or a.union(b)), applied to a PCollection, not to the "
                "pipeline"
            )
        check_policy(self.policy, label)
        first = inputs[0].schema
        for position, other in enumerate(inputs[1:], start=2):
            if other.schema != first:
                raise PipelineError(
                    f"{label}: input {position} has columns ({other.schema.describe()}) but the "
                    f"first input has ({first.describe()}); make them the same (names, types and "
                    "order) with Select or Map first"
                )
        return EdgeInfo(first, all(info.bounded for info in inputs))

    def keeping_watermark(self, column: str) -> str:
        return (
            f"a Union keeps a column's watermark only when every input carries one: apply "
            f".with_watermark({column!r}, delay=...) on each input"
        )

    def watermark_rule(self, inputs: Sequence[EdgeInfo], label: str) -> WatermarkRule:
        """Every column passes; one watermarked on every input gets the minimum (or, under
        `policy="max"`, the maximum) of theirs."""
        return WatermarkRule(passing(inputs[0].schema.names))
