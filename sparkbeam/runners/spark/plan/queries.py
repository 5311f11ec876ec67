"""The refusals of one PCollection's queries (a sink's, or a collected one's), decided from
the graph alone: which sources they read (live or replayed), whether watermarks of several
`WithWatermark`s meet there (stage queries), watermark alignment.

`refuse_query` runs them for a target before its queries are planned: for every sink when the
pipeline runs, before any session exists, and for a collected PCollection when it is first
asked for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sparkbeam.graph import Node
from sparkbeam.runners.shared.alignment import AlignmentGraph
from sparkbeam.runners.spark import limits
from sparkbeam.runners.spark.plan.ancestry import ancestors, origins_meet
from sparkbeam.runners.spark.plan.late_filters import merged_by_footers
from sparkbeam.runners.spark.plan.updates import refuse_update_live_merge
from sparkbeam.transforms.connectors import ReadFromSpark
from sparkbeam.transforms.files import ReadFiles
from sparkbeam.transforms.late import DroppedRows
from sparkbeam.transforms.sources import Create, TestStreamSource
from sparkbeam.transforms.watermark import WithWatermark


def is_replayed(node: Node, live: bool) -> bool:
    """Whether the runner feeds this source's epochs itself (a source with an end)."""
    transform = node.transform
    if isinstance(transform, ReadFiles):
        return not (live and transform.streaming)
    return isinstance(transform, (TestStreamSource, Create))


def is_live(node: Node, live: bool) -> bool:
    """Whether Spark reads this source itself (a source with no end)."""
    transform = node.transform
    return isinstance(transform, ReadFromSpark) or (
        live and isinstance(transform, ReadFiles) and transform.streaming
    )


def idles(node: Node) -> bool:
    """Whether `node` is a `WithWatermark` with `idle_after`."""
    transform = node.transform
    return isinstance(transform, WithWatermark) and transform.idle_after is not None


def staged_origins(
    nodes: Sequence[Node],
    target: Node,
    live: bool = False,
    resolved: Mapping[int, str] | None = None,
) -> set[int]:
    """The `WithWatermark`s upstream of `target` that run as stage queries of their own: all of
    them where watermarks of several meet on the way (none otherwise). In a run with sinks
    (`live`), none either where every one of them reads straight from a live parquet source
    whose reader judges its rows (`late_filters.merged_by_footers`; `resolved`: the local
    directories of sources on other URIs): the merge then runs in the sink's own query."""
    upstream = ancestors(nodes, target)
    origins = {n for n in upstream if isinstance(nodes[n].transform, WithWatermark)}
    if not origins_meet(nodes, upstream):
        return set()
    if live and merged_by_footers(nodes, origins, resolved or {}):
        return set()
    return origins


def refuse_query(nodes: Sequence[Node], target: Node, sink: bool, live: bool) -> None:
    """Refuse the queries of `target` (`sink`: written by a sink, else collected; `live`:
    `ReadFiles(streaming=True)` read by Spark itself, a run with sinks), in the order they
    are planned: its sources, its live merges (an idle input, update mode behind one),
    watermark alignment, then its dropped rows."""
    upstream = sorted(ancestors(nodes, target))
    live_sources = [nodes[n].label for n in upstream if is_live(nodes[n], live)]
    replayed = [nodes[n].label for n in upstream if is_replayed(nodes[n], live)]
    if live_sources and not sink:
        raise limits.COLLECT_LIVE.error(target.label, source=live_sources[0])
    if live_sources and replayed:
        raise limits.LIVE_AND_REPLAYED.error(
            target.label, live=live_sources[0], replayed=replayed[0]
        )
    staged = staged_origins(nodes, target)
    alignment = AlignmentGraph.of(nodes)
    if live_sources and staged:
        idle = [nodes[o] for o in sorted(staged) if idles(nodes[o])]
        if idle:
            raise limits.IDLE_LIVE_MERGE.error(idle[0].label, target=target.label)
        refuse_update_live_merge(nodes, target)
    if alignment is not None:
        drifting = nodes[min(alignment.drift)]
        if live_sources:
            raise limits.MAX_DRIFT_LIVE.error(drifting.label, source=live_sources[0])
        idle = [n for n in nodes if idles(n)]
        if idle:
            raise limits.MAX_DRIFT_WITH_IDLE.error(drifting.label, idle=idle[0].label)
    refuse_dropped_rows_meet(nodes, target, staged)


def refuse_dropped_rows_meet(nodes: Sequence[Node], target: Node, staged: set[int]) -> None:
    """The dropped rows of a `WithWatermark` that runs as a stage query (`staged`), read by
    the final query of `target`: there they would be judged by another's watermark."""
    for node_id in sorted(ancestors(nodes, target, stop=staged)):
        node = nodes[node_id]
        if isinstance(node.transform, DroppedRows) and node.inputs[0] in staged:
            raise limits.DROPPED_ROWS_MEET.error(node.label, source=nodes[node.inputs[0]].label)
