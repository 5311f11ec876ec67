"""One streaming query as data, decided from the graph before it is translated or any
stream is opened: which nodes it runs, which it reads from an earlier stage, how each of
its `WithWatermark`s drops late rows and which read the watermark from a replayed
source's epochs, which nodes another's observation counts, the channels of its epoch
feed and the settings it starts with. `query_plan` builds it; `execute.streaming` opens
its feed and translates it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from sparkbeam.graph import Node
from sparkbeam.runners.spark.plan.keys import ChannelKey, ChannelKind
from sparkbeam.runners.spark.plan.late_filters import LateFilters, Query, Role, late_filters
from sparkbeam.runners.spark.plan.queries import is_replayed
from sparkbeam.runners.spark.plan.settings import NO_EXCHANGE_REUSE, ONE_WATERMARK
from sparkbeam.schema import Schema
from sparkbeam.transforms.watermark import WithWatermark


@dataclass(frozen=True)
class FeedChannel:
    """One channel of a query's epoch feed: what it feeds, with the rows of which schema (a
    sentinel channel's rows also carry the end-of-input flag, added as the feed opens)."""

    key: ChannelKey
    schema: Schema
    label: str


@dataclass(frozen=True)
class QueryPlan:
    """What one streaming query is, before it is translated."""

    query: Query
    """Its nodes, staged origins, replayed sources, run and role (`late_filters.Query`)."""
    staged_paths: Mapping[int, str]
    """Live merges: where a stage query writes each staged node's rows (its file sink),
    read as a file stream instead of a channel of the feed (`execute.live_merges`)."""
    late_filters: LateFilters
    """How each `WithWatermark` and merge of the query drops late rows."""
    epoch_marks: Mapping[int, tuple[int, str]]
    """`WithWatermark`s the runner feeds straight from a replayed source: the source and
    the column of its epoch files that holds the watermark (`exact.late_filter`)."""
    marked_sources: frozenset[int]
    """The sources of `epoch_marks`."""
    counts_source: Mapping[int, int]
    """Sources a `WithWatermark` in `epoch_marks` counts (`n_<id>`) with its own input, in
    one observation: the first that reads each."""
    counted_inside: frozenset[int]
    """Nodes counted by another's observation, not by one of their own (`observed`)."""
    channels: tuple[FeedChannel, ...]
    """The channels of the query's epoch feed, in graph order."""
    marks: Mapping[str, tuple[str, ...]]
    """Each replayed source channel's columns holding the watermark of a `WithWatermark`
    reading it (`epoch_marks`; a live source's reader writes its own)."""
    settings: Mapping[str, str]
    """The Spark settings its plan alone decides it starts with: `ONE_WATERMARK`
    (`late_filters.one_watermark`) and `NO_EXCHANGE_REUSE` (a node with several inputs)."""

    @property
    def selected(self) -> frozenset[int]:
        return self.query.selected

    @property
    def staged(self) -> frozenset[int]:
        return self.query.staged

    @property
    def live(self) -> bool:
        """Whether `ReadFiles(streaming=True)` is Spark's own file source (a production run)
        rather than replayed epoch by epoch (`collect`)."""
        return self.query.production


def query_plan(
    nodes: Sequence[Node],
    selected: set[int] | frozenset[int] | None = None,
    staged: set[int] | frozenset[int] | None = None,
    live: bool = False,
    staged_paths: Mapping[int, str] | None = None,
    role: Role = Role.FINAL,
    back_to_back: bool = False,
    resolved: Mapping[int, str] | None = None,
) -> QueryPlan:
    """The plan of the query running `selected` (every node by default) of `nodes`, reading
    the output of the `staged` origins an earlier stage computes (through `staged_paths`'
    file sinks, or else a channel of its feed); `resolved`: the local directories its live
    parquet sources' URIs resolve to (`late_filters.Query.resolved`)."""
    chosen = frozenset(range(len(nodes))) if selected is None else frozenset(selected)
    staged_ids = frozenset(staged or ())
    staged_paths = dict(staged_paths or {})
    replayed = frozenset(i for i in chosen if is_replayed(nodes[i], live))
    query = Query(chosen, staged_ids, replayed, live, back_to_back, role, dict(resolved or {}))
    filters = late_filters(nodes, query)
    epoch_marks = {
        node_id: (late.source, late.mark)
        for node_id, late in filters.filters.items()
        if late.source is not None and late.mark is not None
    }
    marks: dict[str, list[str]] = {}
    for source_id, mark in epoch_marks.values():
        if source_id in replayed:  # else the source's reader writes them (`footers`)
            marks.setdefault(ChannelKey("source", source_id).name(), []).append(mark)
    counts_source: dict[int, int] = {}
    for node_id, (source_id, _) in sorted(epoch_marks.items(), reverse=True):
        counts_source[source_id] = node_id
    # Only a query the runner feeds (replayed sources, stages' rows it passes on) ever gets
    # an end of input or an idle input's marker rows: one over live sources only has no feed.
    fed_by_runner = bool(replayed) or any(i not in staged_paths for i in staged_ids & chosen)
    channels: list[FeedChannel] = []
    for node in nodes:
        if node.id not in chosen:
            continue
        fed: list[ChannelKind] = []
        if node.id in staged_ids and node.id not in staged_paths:
            fed.append("staged")
        if is_replayed(node, live):
            fed.append("source")
        if isinstance(node.transform, WithWatermark) and fed_by_runner:
            fed.append("sentinel")
        channels += [
            FeedChannel(ChannelKey(kind, node.id), node.info.schema, node.label) for kind in fed
        ]
    settings: dict[str, str] = {}
    if filters.one_watermark:
        settings[ONE_WATERMARK[0]] = ONE_WATERMARK[1]
    if any(len(nodes[i].inputs) > 1 for i in chosen):
        settings[NO_EXCHANGE_REUSE[0]] = NO_EXCHANGE_REUSE[1]
    return QueryPlan(
        query=query,
        staged_paths=MappingProxyType(staged_paths),
        late_filters=filters,
        epoch_marks=MappingProxyType(epoch_marks),
        marked_sources=frozenset(source_id for source_id, _ in epoch_marks.values()),
        counts_source=MappingProxyType(counts_source),
        counted_inside=frozenset(epoch_marks) | frozenset(counts_source),
        channels=tuple(channels),
        marks=MappingProxyType({name: tuple(columns) for name, columns in marks.items()}),
        settings=MappingProxyType(settings),
    )
