"""How each query drops late rows on Spark streaming, decided once, before it is translated.

Spark's stateful operators drop late input by the watermark of the batch
before. The model judges an epoch's rows by the watermark after the epochs
before it: the same value where a no-data batch runs between two data
batches (the runner feeds the epochs), not where a live source runs data
batches back to back. Which filter is exact follows from where the rows come
from (`Strategy`); the filters themselves are in `runners/spark/exact/`.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from sparkbeam.graph import Node
from sparkbeam.paths import is_local, local_path
from sparkbeam.runners.spark.plan.ancestry import stateful_depth
from sparkbeam.transforms.files import SINK_LOG, ReadFiles
from sparkbeam.transforms.late import LATE, DroppedRows
from sparkbeam.transforms.watermark import WithWatermark

EPOCH_WATERMARK = "__sparkbeam_wm"
"""The columns of epoch files that hold a `WithWatermark`'s watermark (`_<node id>`)."""


class Strategy(enum.Enum):
    """A late-row filter."""

    EPOCH_MARK = "epoch mark"
    """A `WithWatermark` the runner feeds straight from a replayed source: the runner knows,
    before writing an epoch, the model's watermark its rows are judged by, writes it into the
    epoch file as a column, and the filter compares with it (no state, no shuffle)."""
    FED = "fed"
    """The same comparison on the epoch's Arrow rows, with no query: a stage query that would
    read nothing but the replayed source its `WithWatermark` judges (`exact.fed`)."""
    DEDUP = "dedup"
    """Spark's deduplication keyed on the judge and a random row id: it drops the rows whose
    judge is at or below Spark's watermark for late events, the current batch's where the
    runner feeds the epochs (a no-data batch between two) or with `ONE_WATERMARK`."""
    FOOTERS = "footers"
    """A `WithWatermark` straight on a live parquet `ReadFiles` in a production run: the
    source's reader knows each file's watermark from the footers of the files before it and
    writes it on the rows as a column (`runners.spark.translate.footers`); the filter
    compares with it, as `EPOCH_MARK` (no state, no shuffle). Where nothing in the query
    reads its late rows, the reader drops them itself instead (`LateFilter.in_reader`)."""
    CURRENT = "current"
    """A pass-through `transformWithState` that compares each row's judge with the current
    batch's watermark: batches run back to back and other stateful operators follow."""


class Role(enum.Enum):
    """What a query is to its run (`queries.StreamingRun`)."""

    FINAL = "final"
    """The query of the PCollection collected or written (or a check of the whole graph)."""
    STAGE = "stage"
    """The query of one `WithWatermark` where watermarks of several meet, over replayed
    sources: the runner may judge it itself (`Strategy.FED`)."""
    SHADOW = "shadow"
    """A query run only for its watermark (watermark alignment)."""
    LIVE_STAGE = "live stage"
    """The query of one `WithWatermark` where watermarks of several meet, over live sources,
    written through a file sink (`live_merges`): its filter is its only stateful operator."""


@dataclass(frozen=True)
class Query:
    """What the runner knows of a query before translating it."""

    selected: frozenset[int]
    """The nodes the query runs."""
    staged: frozenset[int] = frozenset()
    """`WithWatermark`s an earlier stage computes: the query reads their output."""
    replayed: frozenset[int] = frozenset()
    """The sources the runner feeds epoch by epoch (`epochs.is_replayed`)."""
    production: bool = False
    """A run with sinks: Spark reads `ReadFiles(streaming=True)` itself."""
    back_to_back: bool = False
    """Spark reads a source of the run itself (a live source): micro-batches run back to back,
    with no no-data batch between two."""
    role: Role = Role.FINAL
    resolved: Mapping[int, str] = field(default_factory=dict)
    """Live sources on a URI that Spark's Hadoop file system resolves to a directory on the
    driver's disk (a `viewfs://` mount of a `file:` directory): that directory, by node id
    (`live_footers.resolved_directories`)."""


@dataclass(frozen=True)
class LateFilter:
    """The late-row filter of one `WithWatermark`: its strategy and, for `EPOCH_MARK`, `FED`
    and `FOOTERS`, the source it reads and the column of its rows that holds the watermark."""

    strategy: Strategy
    source: int | None = None
    mark: str | None = None
    in_reader: bool = False
    """`FOOTERS` only: the source's reader drops the late rows itself and writes no watermark
    column (`footers.Mark.drops`): the query reads no late rows of this `WithWatermark`,
    the only one there reading the source. Fewer rows and one column less cross from the
    reader's Python process into Spark, the slow part of a big file."""

    @property
    def reads_marks(self) -> bool:
        """Whether the filter compares with the watermark written into the epoch files."""
        return self.strategy in (Strategy.EPOCH_MARK, Strategy.FED, Strategy.FOOTERS)


@dataclass(frozen=True)
class LateFilters:
    """The late-row filters of one query."""

    filters: Mapping[int, LateFilter] = field(default_factory=dict)
    """Each `WithWatermark` the query computes (not staged), by node id."""
    merges: Strategy = Strategy.DEDUP
    """How a `Union` or `Join` where watermarks of several `WithWatermark`s meet drops the
    rows below the query's watermark (`policy="max"`, idle inputs): `DEDUP` or `CURRENT`."""
    one_watermark: bool = False
    """Whether the query starts with `ONE_WATERMARK` (`settings`): every stateful operator
    judges by the current batch's watermark, which makes `DEDUP` exact over live sources."""

    def of(self, node_id: int) -> LateFilter:
        return self.filters[node_id]

    def fed(self, target: int) -> bool:
        """Whether the runner judges `target`'s epochs itself, with no query."""
        chosen = self.filters.get(target)
        return chosen is not None and chosen.strategy is Strategy.FED


def judged_by_footers(node: Node, resolved: str | None = None) -> bool:
    """Whether a live source's reader can judge its rows from the files' footers
    (`Strategy.FOOTERS`): a parquet `ReadFiles(streaming=True)` on a local directory (its path,
    or `resolved`: the local directory its URI resolves to) that no Spark file sink writes
    (whose log, not the directory, says which files are there). The reader lists the
    directory in a Python process of Spark's driver, which reaches the driver's disk and
    nothing else."""
    transform = node.transform
    if not isinstance(transform, ReadFiles) or not transform.streaming:
        return False
    if transform.format != "parquet":
        return False
    if resolved is not None:
        directory = resolved
    elif is_local(transform.path):
        directory = local_path(transform.path)
    else:
        return False
    return os.path.isdir(directory) and not os.path.exists(os.path.join(directory, SINK_LOG))


def merged_by_footers(
    nodes: Sequence[Node], origins: Iterable[int], resolved: Mapping[int, str]
) -> bool:
    """Whether every one of `origins` (`WithWatermark`s whose watermarks meet, over live
    sources) reads straight from a live parquet source whose reader judges its rows
    (`judged_by_footers`; `resolved`: the local directories of sources on other URIs). Then
    each filter compares with its own watermark, written on the rows, and needs no query of
    its own: the merge runs in the sink's query, with no stage query and no stage files
    (`execute.live_merges`)."""
    sources = [nodes[origin].inputs[0] for origin in origins]
    return bool(sources) and all(judged_by_footers(nodes[s], resolved.get(s)) for s in sources)


def _alone_without_late_rows(
    nodes: Sequence[Node], selected: frozenset[int], filters: Mapping[int, LateFilter], node_id: int
) -> bool:
    """Whether the `WithWatermark` `node_id` (`FOOTERS`) is the only one of `filters` reading
    its source and no node of `selected` reads its late rows."""
    source = filters[node_id].source
    if any(f.source == source for i, f in filters.items() if i != node_id):
        return False
    for i in selected:
        transform = nodes[i].transform
        late = isinstance(transform, DroppedRows) and transform.kind == LATE
        if late and nodes[i].inputs[0] == node_id:
            return False
    return True


def late_filters(nodes: Sequence[Node], query: Query) -> LateFilters:
    """The late-row filter of each `WithWatermark` of `query`, and of its merges.

    A `WithWatermark` whose input is a replayed source in the same query
    compares with the watermark written into each epoch (`EPOCH_MARK`); in a
    stage query that reads nothing else, the runner does that itself (`FED`).
    In a production run's final query, one straight on a live parquet source
    compares with the watermark its reader writes on each file's rows
    (`FOOTERS`), or has the reader drop its late rows where the query reads
    none of them and it is the source's only `WithWatermark` (`in_reader`).
    Elsewhere the filter is stateful: `DEDUP`, exact where a no-data batch
    runs between two epochs. Over live sources batches run back
    to back: a final query with a stateful filter and at most one stateful
    operator after it on a path, and a live stage, start with
    `one_watermark`; a deeper final query filters with `CURRENT`
    (`one_watermark` would judge the second operator by the watermark the
    first moved). A query whose filters are all stateless keeps Spark's own
    watermark per operator: the rows they pass lie at or above the model's
    watermark, never below the one Spark judges by. Merges filter with
    `CURRENT` in a production run, `DEDUP` otherwise.
    """
    selected, staged = query.selected, query.staged
    footers = query.production and query.role is Role.FINAL
    filters: dict[int, LateFilter] = {}
    stateful_ids: list[int] = []
    for node_id in sorted(selected - staged):
        node = nodes[node_id]
        if not isinstance(node.transform, WithWatermark):
            continue
        source = node.inputs[0]
        mark = f"{EPOCH_WATERMARK}_{node_id}"
        if source in selected and source not in staged and source in query.replayed:
            fed = (
                query.role is Role.STAGE
                and not query.production
                and selected == frozenset({source, node_id})
            )
            strategy = Strategy.FED if fed else Strategy.EPOCH_MARK
            filters[node_id] = LateFilter(strategy, source, mark)
        elif (
            footers
            and source in selected
            and source not in staged
            and judged_by_footers(nodes[source], query.resolved.get(source))
        ):
            filters[node_id] = LateFilter(Strategy.FOOTERS, source, mark)
        else:
            stateful_ids.append(node_id)
    for node_id, chosen in list(filters.items()):
        if chosen.strategy is Strategy.FOOTERS and _alone_without_late_rows(
            nodes, selected, filters, node_id
        ):
            filters[node_id] = replace(chosen, in_reader=True)
    one_watermark = False
    stateful = Strategy.DEDUP
    if query.role is Role.LIVE_STAGE:
        one_watermark = True
    elif query.role is Role.FINAL and query.back_to_back and stateful_ids:
        if stateful_depth(nodes, set(selected)) <= 2:
            one_watermark = True
        else:
            stateful = Strategy.CURRENT
    for node_id in stateful_ids:
        filters[node_id] = LateFilter(stateful)
    merges = Strategy.CURRENT if query.production else Strategy.DEDUP
    return LateFilters(MappingProxyType(dict(sorted(filters.items()))), merges, one_watermark)
