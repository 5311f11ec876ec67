"""The refusal phases: each one concern of the Spark runner's catalogue (`limits.py`) that
the graph alone decides, run in order on the pipeline's nodes before any session exists.

A phase takes the nodes (and their watermark origins) and raises its refusal for the first
node it finds; where a pipeline has refusals of several phases, the earlier phase's is raised
(each phase's own at the node a translator would have named). `refuse` runs the first ones;
`refuse_translation`, after the runner checks the column types, those a translator meets,
then every sink's query phases (`queries.refuse_query`). The translators keep no copy of
these decisions: where one checks again as a backstop, it calls the same predicate or
asserts it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from sparkbeam.graph import Node
from sparkbeam.runners.spark import limits
from sparkbeam.runners.spark.plan.delays import refuse_long_delays
from sparkbeam.runners.spark.plan.keyed import refuse_inexact_keys
from sparkbeam.runners.spark.plan.merges import (
    refuse_interval_join_max,
    refuse_join_key_derived_apart,
    refuse_policies_meet,
    refuse_union_derived_apart,
)
from sparkbeam.runners.spark.plan.origins import (
    merges_chained_origins,
    redefines_watermark,
    watermark_origins,
)
from sparkbeam.runners.spark.plan.queries import refuse_query
from sparkbeam.runners.spark.plan.update_batch import refuse_update_after_held_rows
from sparkbeam.runners.spark.plan.updates import refuse_held_update_keys, refuse_update_streaming
from sparkbeam.transforms.combine import CombinePerKey, Finals
from sparkbeam.transforms.connectors import ForEachBatch, ReadFromSpark
from sparkbeam.transforms.elementwise import Filter, Map, Select
from sparkbeam.transforms.files import ReadFiles, WriteFiles
from sparkbeam.transforms.flat import FlatMap
from sparkbeam.transforms.join import Join
from sparkbeam.transforms.late import DroppedRows
from sparkbeam.transforms.sort import Sort
from sparkbeam.transforms.sources import Create, TestStreamSource
from sparkbeam.transforms.union import Union
from sparkbeam.transforms.watermark import WithWatermark
from sparkbeam.transforms.windows import Hop, Session, Tumble

Origins = Mapping[int, frozenset[int]]
Phase = Callable[[Sequence[Node], Origins], None]


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


TRANSLATED: frozenset[type] = frozenset(
    {
        Map,
        FlatMap,
        Filter,
        Select,
        Tumble,
        Hop,
        Session,
        Sort,
        CombinePerKey,
        Finals,
        Join,
        Union,
        WithWatermark,
        DroppedRows,
        Create,
        ReadFiles,
        ReadFromSpark,
        WriteFiles,
        ForEachBatch,
    }
)
"""The primitive transforms the Spark runner translates in a batch job (`translate.families`): every
one of sparkbeam's own; on unbounded input `TestStream` too (`STREAMING_TRANSLATED`)."""

STREAMING_TRANSLATED = TRANSLATED | {TestStreamSource}
"""The primitive transforms the Spark runner translates into Structured Streaming."""


def refuse_untranslated(nodes: Sequence[Node], translated: frozenset[type], input: str) -> None:
    """A primitive transform the Spark runner has no translation of (a user's own), on
    `input` ("bounded" or "unbounded") input."""
    for node in nodes:
        if type(node.transform) not in translated:
            kind = type(node.transform).__name__
            raise limits.NO_TRANSLATION.error(node.label, kind=kind, input=input)


def refuse_untranslated_batch(nodes: Sequence[Node], origins: Origins) -> None:
    """A transform with no translation into a batch job (`TRANSLATED`)."""
    refuse_untranslated(nodes, TRANSLATED, "bounded")


def refuse_untranslated_streaming(nodes: Sequence[Node], origins: Origins) -> None:
    """A transform with no translation into Structured Streaming (`STREAMING_TRANSLATED`)."""
    refuse_untranslated(nodes, STREAMING_TRANSLATED, "unbounded")


DECIDED = (
    limits.UPDATE_WITHOUT_WATERMARK,
    limits.UPDATE_LATENESS_APART,
    limits.UPDATE_HELD_KEY,
    limits.UPDATE_AFTER_HELD_ROWS,
    limits.UPDATE_LIVE_MERGE,
    limits.EMIT_EVENT,
    limits.IDLE_PROCESSING_TIME,
    limits.BOUNDED_READ_IN_STREAM,
    limits.CHAINED_WATERMARKS,
    limits.NO_TRANSLATION,
    limits.INTERVAL_JOIN_MAX,
    limits.HELD_WINDOW_START,
    limits.MERGED_DERIVED_APART,
    limits.JOIN_KEY_DERIVED_APART,
    limits.UNION_DERIVED_APART,
    limits.POLICIES_MEET,
    limits.COLLECT_LIVE,
    limits.LIVE_AND_REPLAYED,
    limits.IDLE_LIVE_MERGE,
    limits.MAX_DRIFT_LIVE,
    limits.MAX_DRIFT_WITH_IDLE,
    limits.DROPPED_ROWS_MEET,
)
"""The catalogue's refusals the phases decide, wherever the pipeline raises them."""

BATCH_PHASES: tuple[Phase, ...] = (refuse_emit_event, refuse_update_after_held_rows)
"""The phases of a bounded pipeline (a batch job) run first, in order."""

PHASES: tuple[Phase, ...] = (
    refuse_emit_event,
    refuse_update_streaming,
    refuse_idle_processing_time,
    refuse_bounded_read,
    refuse_chained_watermarks,
)
"""The phases of an unbounded pipeline (Structured Streaming) run first, in order."""

BATCH_TRANSLATION_PHASES: tuple[Phase, ...] = (refuse_untranslated_batch,)
"""The phases of a batch job run after the column types are checked (`refuse_translation`)."""

TRANSLATION_PHASES: tuple[Phase, ...] = (
    refuse_untranslated_streaming,
    refuse_long_delays,
    refuse_interval_join_max,
    refuse_held_update_keys,
    refuse_update_after_held_rows,
    refuse_inexact_keys,
    refuse_join_key_derived_apart,
    refuse_union_derived_apart,
    refuse_policies_meet,
)
"""The phases of an unbounded pipeline run after the column types are checked, in the order a
translator meets their refusals at one node; they take the pipeline's nodes as one query (all
its merges, whichever of its queries each runs in)."""


def refuse(nodes: Sequence[Node]) -> None:
    """Run the first phases for `nodes` (those of an unbounded pipeline when any node is
    unbounded): raise the first refusal they decide."""
    unbounded = any(not node.info.bounded for node in nodes)
    origins = watermark_origins(nodes)
    for phase in PHASES if unbounded else BATCH_PHASES:
        phase(nodes, origins)


def refuse_translation(nodes: Sequence[Node]) -> None:
    """Run the translation's phases for `nodes`, then, on unbounded input, those of every
    sink's queries (`refuse_query`), sinks in graph order."""
    unbounded = any(not node.info.bounded for node in nodes)
    origins = watermark_origins(nodes)
    for phase in TRANSLATION_PHASES if unbounded else BATCH_TRANSLATION_PHASES:
        phase(nodes, origins)
    if unbounded:
        for node in nodes:
            if isinstance(node.transform, (WriteFiles, ForEachBatch)):
                refuse_query(nodes, node, sink=True, live=True)
