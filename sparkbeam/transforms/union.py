"""`Union`: all rows of all inputs, which must have the same schema.

Watermark rule (RisingWave's merger): a column keeps a watermark only when
every input carries one on it; the output watermark is the minimum of the
inputs' latest watermarks, emitted once every input has one. Chunks pass
through at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs

from sparkbeam.errors import PipelineError
from sparkbeam.graph import EdgeInfo, PrimitiveTransform

if TYPE_CHECKING:
    from sparkbeam.pipeline import PCollection


@attrs.frozen(eq=False, init=False)
class Union(PrimitiveTransform):
    """`a | Union(b, c)` or `a.union(b, c)`: the rows of `a`, `b` and `c`."""

    others: tuple[PCollection, ...]

    def __init__(self, *others: PCollection) -> None:
        self.__attrs_init__(tuple(others))

    def extra_inputs(self) -> tuple[PCollection, ...]:
        return self.others

    def infer(self, inputs: Sequence[EdgeInfo], label: str) -> EdgeInfo:
        if len(inputs) < 2:
            raise PipelineError(f"{label}: give at least one other PCollection to union with")
        first = inputs[0].schema
        for position, other in enumerate(inputs[1:], start=2):
            if other.schema != first:
                raise PipelineError(
                    f"{label}: input {position} has columns ({other.schema.describe()}) but the "
                    f"first input has ({first.describe()}); make them the same (names, types and "
                    "order) with Select or Map first"
                )
        watermarked = frozenset.intersection(*(info.watermarked for info in inputs))
        return EdgeInfo(first, all(info.bounded for info in inputs), watermarked)
