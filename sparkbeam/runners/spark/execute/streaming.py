"""One streaming query's translation, run: `StreamingTranslation` builds the DataFrames of
the ancestors of one PCollection in graph order, each by its kind's streaming translator
(`translate.families`), opens the feed of its replayed sources' epochs (`epochs`) and
collects the settings the query starts with.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from sparkbeam.graph import Node
from sparkbeam.runners.spark.exact.judges import derive_judges
from sparkbeam.runners.spark.execute.epochs import Channel, EpochFeed, SourceEpochs
from sparkbeam.runners.spark.plan.keys import (
    ChannelKey,
    ChannelKind,
    Observation,
)
from sparkbeam.runners.spark.plan.late_filters import Query, Role, late_filters
from sparkbeam.runners.spark.plan.phases import STREAMING_TRANSLATED, refuse_untranslated
from sparkbeam.runners.spark.plan.queries import is_replayed
from sparkbeam.runners.spark.session.paths import paths_of
from sparkbeam.runners.spark.translate.context import (
    Made,
    StreamingContext,
    needs_state_store,
    translating,
)
from sparkbeam.runners.spark.translate.families import COUNTS_FROM_INPUT, STREAMING_TRANSLATORS
from sparkbeam.runners.spark.translate.live_footers import resolved_directories
from sparkbeam.runners.spark.translate.observed import Derive, observed
from sparkbeam.runners.spark.translate.watermark import SENTINEL, restamp
from sparkbeam.schema import Schema
from sparkbeam.transforms.watermark import WithWatermark

STATE_STORE = (
    "spark.sql.streaming.stateStore.providerClass",
    "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
)
"""`transformWithState` needs the RocksDB state store: a query that holds one starts with it.
The other queries keep the session's provider (Spark's default, HDFS-backed, is the faster of
the two for a windowed aggregation: `benchmarks/state_store.py`). Whether a query holds one
follows from the pipeline alone, so a query started again from its checkpoint starts with the
provider it was created with (Spark also keeps the provider in the checkpoint)."""

CHANGELOG = ("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "true")
"""With RocksDB, each micro-batch's commit writes the batch's changes instead of a checkpoint of
the whole store (a snapshot every `minDeltasForSnapshot` batches, in the background): in the
idle-inputs test's four queries, whose pass-through `transformWithState`s hold no state, the
commit times summed over their batches went from 3.9, 3.7, 8.3 and 5.1 s to 2.6, 3.3, 5.9 and
4.2 s (their joins' and aggregations' too), and the live benchmark's deduplication on RocksDB
from 3.53x to 3.17x the hand-written time. Spark reads a checkpoint written either way, so a
query started again on a checkpoint made without it goes on."""

NO_EXCHANGE_REUSE = ("spark.sql.exchange.reuse", "false")
"""A query where a subtree is read twice (a `Join` or `Union` of a PCollection with a copy of
itself) plans it twice; with exchange reuse Spark reads the second copy's shuffle from the
first (`ReusedExchangeExec`), and the `withWatermark`s below that shuffle are then out of the
operator tree that Spark's watermark propagation (`WatermarkPropagator`) walks: the stateful
operators above it got no watermark (a Session after a Union of two restamped `WithWatermark`s,
self-joined, never closed a session). Turning reuse off computes the shuffle twice and
changes no row. The late-row filter's dedup keys on `uuid()`, whose seed differs between the
copies, so a plan with the filter in the same query was never reused."""

ONE_WATERMARK = ("spark.sql.streaming.statefulOperator.allowMultiple", "false")
"""Spark's stateful operators drop late input by the previous batch's watermark (and evict
state by the current one), so that rows one operator emits are not late for the next. That
is the model's watermark only when a no-data batch runs between two data batches, as when
the runner feeds epochs; a live source with a backlog runs data batches back to back. With
this setting every operator judges by the current batch's watermark: exact for the
late-row filter and one operator after it (rows it passes lie above that watermark), wrong
for an operator after another (what the first emits would be late for the second). The plan
decides which queries start with it (`plan.late_filters`)."""

MAX_POLICY = ("spark.sql.streaming.multipleWatermarkPolicy", "max")
"""Spark's watermark of a query is the latest of its `withWatermark`s' instead of the earliest:
`policy="max"` where watermarks of different `WithWatermark`s meet."""


class StreamingTranslation(StreamingContext):
    """The streaming DataFrames of one query: the ancestors of one PCollection."""

    def __init__(
        self,
        spark: SparkSession,
        nodes: Sequence[Node],
        directory: str,
        selected: set[int] | None = None,
        staged: set[int] | None = None,
        live: bool = False,
        staged_paths: dict[int, str] | None = None,
        epochs: SourceEpochs | None = None,
        role: Role = Role.FINAL,
        back_to_back: bool = False,
    ) -> None:
        super().__init__(spark, nodes)
        self.directory = directory
        self.live = live
        self.settings: dict[str, str] = {}
        """Spark settings the query starts with (`Stage.start` sets them only while it
        starts): `ONE_WATERMARK` (`late_filters.one_watermark`), `MAX_POLICY` (a `Union` with
        `policy="max"`), `STATE_STORE` and `CHANGELOG` (a `transformWithState`),
        `NO_EXCHANGE_REUSE` (a node with several inputs)."""
        self.keyed_state: set[int] = set()
        """The nodes whose translators build a `transformWithState` (`needs_state_store`)."""
        self.selected = set(range(len(nodes))) if selected is None else selected
        self.staged = staged or set()
        self.staged_paths = staged_paths or {}
        replayed = frozenset(i for i in self.selected if is_replayed(nodes[i], live))
        resolved = resolved_directories(spark, nodes, self.selected) if live else {}
        query = Query(
            frozenset(self.selected),
            frozenset(self.staged),
            replayed,
            live,
            back_to_back,
            role,
            resolved,
        )
        self.late_filters = late_filters(nodes, query)
        if self.late_filters.one_watermark:
            self.settings[ONE_WATERMARK[0]] = ONE_WATERMARK[1]
        self.epoch_marks = {
            node_id: (chosen.source, chosen.mark)
            for node_id, chosen in self.late_filters.filters.items()
            if chosen.source is not None and chosen.mark is not None
        }
        marks: dict[str, list[str]] = {}
        for source_id, mark in self.epoch_marks.values():
            if source_id in replayed:  # else the source's reader writes them (`footers`)
                marks.setdefault(ChannelKey("source", source_id).name(), []).append(mark)
        self.marked_sources = {source_id for source_id, _ in self.epoch_marks.values()}
        self.counts_source = {}
        for node_id, (source_id, _) in sorted(self.epoch_marks.items(), reverse=True):
            self.counts_source[source_id] = node_id
        self.counted_inside = set(self.epoch_marks) | set(self.counts_source)
        """Nodes counted by another's observation, not by one of their own (`observed`)."""
        self.derived: dict[int, Derive] = {}
        """Nodes whose counts follow from their input's, counted by this query
        (`translate.windows.tumble_counts`): `Stage.collect_metrics` adds them."""
        self.marked = {}
        channels: list[tuple[str, Schema, str]] = []
        for node in nodes:
            if node.id not in self.selected:
                continue
            if node.id in self.staged and node.id not in self.staged_paths:
                channels.append(
                    (ChannelKey("staged", node.id).name(), node.info.schema, node.label)
                )
            if is_replayed(node, live):
                channels.append(
                    (ChannelKey("source", node.id).name(), node.info.schema, node.label)
                )
            if isinstance(node.transform, WithWatermark):
                with_flag = node.info.schema.with_columns((SENTINEL, bool))
                channels.append((ChannelKey("sentinel", node.id).name(), with_flag, node.label))
        self.paths = paths_of(spark)
        self.feed = EpochFeed(directory, channels, self.paths, marks)
        self.feed.open(spark)
        self.sources = self._channels("source")
        """The replayed sources' channels, by node id: what `Stage.feed` writes each epoch."""
        self.sentinels = self._channels("sentinel")
        """Each `WithWatermark`'s sentinel channel: where the end of input goes."""
        self.judges = {}
        self.origins = {}
        self.policies: set[int] = set()
        """The `Union`s and `Join`s where watermarks of several `WithWatermark`s meet."""
        self.counted_as: dict[Observation, Observation] = {}
        """Observed metrics that also count as others' rows (`Stage.collect_metrics`): a
        `WithWatermark`'s output (`n_<id>`) is what its late-row filter passed (`out_<id>`),
        counted once."""
        self.epochs = epochs or SourceEpochs(self.paths)
        """The replayed sources' epochs, shared with the other queries of the run."""

    def prefetch(self) -> None:
        """Start reading and checking the replayed sources' epochs in the background, while
        the query starts; `epoch_of` waits for each (and raises what reading it raised)."""
        for node_id in self.sources:
            self.epochs.prefetch(self.nodes[node_id])

    def epoch_of(self, node_id: int, index: int) -> pa.Table:
        """A source's rows of epoch `index` (`SourceEpochs`)."""
        return self.epochs.epoch(self.nodes[node_id], index)

    def _channels(self, kind: ChannelKind) -> dict[int, Channel]:
        keys = {name: ChannelKey.parse(name) for name in self.feed.channels}
        return {
            key.node_id: self.feed.channels[name]
            for name, key in keys.items()
            if key is not None and key.kind == kind
        }

    def run(self) -> None:
        """Translate the query's nodes in graph order; judges follow each node's rule. A
        query with a `transformWithState` starts with `STATE_STORE` (as each
        translator declares it builds one: `streaming(kind, state_store=...)`)."""
        for node in self.nodes:
            if node.id not in self.selected:
                continue
            refuse_untranslated([node], STREAMING_TRANSLATED, "unbounded")  # the plan's
            translate = STREAMING_TRANSLATORS[type(node.transform)]
            if node.id in self.staged:
                translate = restamp
            inputs = [self.frames[i] for i in node.inputs if i in self.frames]
            origins = frozenset().union(*(self.origins.get(i, frozenset()) for i in node.inputs))
            self.origins[node.id] = origins | ({node.id} if node.rule.own else frozenset())
            with translating(node):
                made = translate(self, node, inputs)
            if needs_state_store(self, node):
                self.keyed_state.add(node.id)
            if not isinstance(made, Made):
                made = Made(made)
            if made.counts_as is not None:
                self.counted_as[Observation("n", node.id)] = made.counts_as
            if made.policy is not None:
                self._merge_policy(node, made.policy)
            self.made[node.id] = made
            frame = made.frame
            counts_from_input = COUNTS_FROM_INPUT.get(type(node.transform))
            if counts_from_input is not None and node.inputs[0] not in self.staged:
                derive = counts_from_input(node, self.nodes[node.inputs[0]])
                if derive is not None:
                    self.derived[node.id] = derive
            if node.id not in self.staged | self.counted_inside | set(self.derived):
                frame = observed(node, frame)  # else counted elsewhere
            if node.id in self.marked_sources:  # for its other readers, without the marks
                self.marked[node.id] = frame
                frame = frame.select(*node.info.schema.names)
            self.frames[node.id] = frame
            meets = len(node.inputs) > 1 and len(self.origins[node.id]) > 1
            self.judges[node.id] = derive_judges(
                node, [self.judges.get(i, {}) for i in node.inputs], meets
            )
        if self.keyed_state:
            self.settings[STATE_STORE[0]] = STATE_STORE[1]
            self.settings[CHANGELOG[0]] = CHANGELOG[1]
        if any(len(self.nodes[i].inputs) > 1 for i in self.selected):
            self.settings[NO_EXCHANGE_REUSE[0]] = NO_EXCHANGE_REUSE[1]

    def _merge_policy(self, node: Node, policy: str) -> None:
        """Note that watermarks of several `WithWatermark`s meet at `node` under `policy`:
        Spark keeps one watermark per query, so all such merges have one policy
        (`plan.merges.refuse_policies_meet`)."""
        chosen = self.settings.get(MAX_POLICY[0], "min")
        assert not self.policies or policy == chosen, f"{node.label}: policies meet"
        self.policies.add(node.id)
        if policy == "max":
            self.settings[MAX_POLICY[0]] = MAX_POLICY[1]

    def channel(self, name: str) -> Channel:
        return self.feed.channels[name]

    def frame(self, name: str) -> DataFrame:
        frame = self.feed.channels[name].frame
        assert frame is not None
        return frame
