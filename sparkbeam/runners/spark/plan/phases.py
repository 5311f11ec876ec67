"""The refusal phases: each one concern of the Spark runner's catalogue (`limits.py`) that
the graph alone decides, run in order on the pipeline's nodes before any session exists.

A phase takes the nodes (and their watermark origins) and raises its refusal for the first
node it finds. The translators keep no copy of these decisions: where one checks again as a
backstop, it calls the same predicate.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from sparkbeam.graph import Node
from sparkbeam.runners.spark import limits
from sparkbeam.runners.spark.plan.origins import (
    merges_chained_origins,
    redefines_watermark,
    watermark_origins,
)
from sparkbeam.transforms.combine import CombinePerKey
from sparkbeam.transforms.connectors import ReadFromSpark
from sparkbeam.transforms.join import Join
from sparkbeam.transforms.union import Union
from sparkbeam.transforms.watermark import WithWatermark

Origins = Mapping[int, frozenset[int]]
Phase = Callable[[Sequence[Node], Origins], None]


def refuse_update_mode(nodes: Sequence[Node], origins: Origins) -> None:
    """`CombinePerKey(emit="update")`, in every mode."""
    for node in nodes:
        transform = node.transform
        if isinstance(transform, CombinePerKey) and transform.updates:
            raise limits.UPDATE_MODE.error(node.label)


def refuse_emit_event(nodes: Sequence[Node], origins: Origins) -> None:
    """`WithWatermark(emit="event")`, in every mode."""
    for node in nodes:
        if node.transform.raises_watermark_per_row():
            assert isinstance(node.transform, WithWatermark)
            raise limits.EMIT_EVENT.error(node.label, emit=node.transform.emit)


def refuse_idle_processing_time(nodes: Sequence[Node], origins: Origins) -> None:
    """`idle_after` as processing time, on unbounded input."""
    for node in nodes:
        transform = node.transform
        if not isinstance(transform, WithWatermark) or transform.idle_after is None:
            continue
        if transform.idle_epochs(node.label) is None:
            raise limits.IDLE_PROCESSING_TIME.error(node.label, idle_after=transform.idle_after)


def refuse_bounded_read(nodes: Sequence[Node], origins: Origins) -> None:
    """A bounded `ReadFromSpark` in an unbounded pipeline."""
    for node in nodes:
        if isinstance(node.transform, ReadFromSpark) and node.transform.bounded:
            raise limits.BOUNDED_READ_IN_STREAM.error(node.label)


def refuse_chained_watermarks(nodes: Sequence[Node], origins: Origins) -> None:
    """A `WithWatermark` downstream of another: chained, or meeting in a `Union` or `Join`."""
    for node in nodes:
        chained = redefines_watermark(origins, node) or (
            isinstance(node.transform, (Union, Join))
            and merges_chained_origins(origins, node.inputs)
        )
        if chained:
            raise limits.CHAINED_WATERMARKS.error(node.label)


DECIDED = (
    limits.UPDATE_MODE,
    limits.EMIT_EVENT,
    limits.IDLE_PROCESSING_TIME,
    limits.BOUNDED_READ_IN_STREAM,
    limits.CHAINED_WATERMARKS,
)
"""The catalogue's refusals the phases decide, wherever the pipeline raises them."""

BATCH_PHASES: tuple[Phase, ...] = (refuse_update_mode, refuse_emit_event)
"""The phases of a bounded pipeline (a batch job), in order."""

PHASES: tuple[Phase, ...] = (
    *BATCH_PHASES,
    refuse_idle_processing_time,
    refuse_bounded_read,
    refuse_chained_watermarks,
)
"""The phases of an unbounded pipeline (Structured Streaming), in order."""


def refuse(nodes: Sequence[Node]) -> None:
    """Run the phases for `nodes` (those of an unbounded pipeline when any node is unbounded):
    raise the first refusal the graph alone decides."""
    unbounded = any(not node.info.bounded for node in nodes)
    origins = watermark_origins(nodes)
    for phase in PHASES if unbounded else BATCH_PHASES:
        phase(nodes, origins)
