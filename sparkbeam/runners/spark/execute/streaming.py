"""One streaming query's translation, run: `StreamingTranslation` combines the query's
plan (`plan.streaming_query`, decided from the graph alone) with the feed of its replayed
sources' epochs it opens (`epochs.open_feed`), builds the DataFrames of the ancestors of
one PCollection in graph order, each by its kind's streaming translator
(`translate.families`), and adds to the plan's settings those that follow from what the
translators made (`plan.settings`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from sparkbeam.graph import Node
from sparkbeam.runners.spark.exact.judges import derive_judges
from sparkbeam.runners.spark.execute.epochs import Channel, SourceEpochs, open_feed
from sparkbeam.runners.spark.plan.keys import ChannelKey, ChannelKind, Observation
from sparkbeam.runners.spark.plan.late_filters import Role
from sparkbeam.runners.spark.plan.phases import STREAMING_TRANSLATED, refuse_untranslated
from sparkbeam.runners.spark.plan.settings import CHANGELOG, MAX_POLICY, STATE_STORE
from sparkbeam.runners.spark.plan.streaming_query import query_plan
from sparkbeam.runners.spark.session.call_sites import without_call_sites
from sparkbeam.runners.spark.session.paths import paths_of
from sparkbeam.runners.spark.translate.context import (
    StreamingContext,
    needs_state_store,
    returned,
    translating,
)
from sparkbeam.runners.spark.translate.families import COUNTS_FROM_INPUT, STREAMING_TRANSLATORS
from sparkbeam.runners.spark.translate.live_footers import resolved_directories
from sparkbeam.runners.spark.translate.observed import Derive, observed
from sparkbeam.runners.spark.translate.views import ReadOnlyMapping, ReadOnlySet
from sparkbeam.runners.spark.translate.watermark import restamp


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
        resolved: Mapping[int, str] | None = None,
    ) -> None:
        """The query planned from the graph (`plan.streaming_query.query_plan`), its epoch
        feed opened under `directory` (`epochs.open_feed`); `resolved`: the local directories
        of its live sources on other URIs, when the run has them already."""
        chosen = set(range(len(nodes))) if selected is None else selected
        if resolved is None:
            resolved = resolved_directories(spark, nodes, chosen) if live else {}
        plan = query_plan(nodes, selected, staged, live, staged_paths, role, back_to_back, resolved)
        super().__init__(spark, nodes, plan)
        self.directory = directory
        self._settings: dict[str, str] = dict(plan.settings)
        self.settings: Mapping[str, str] = ReadOnlyMapping("settings", self._settings)
        """Spark settings the query starts with (`Stage.start` sets them only while it
        starts): the plan's, `STATE_STORE` and `CHANGELOG` (a `transformWithState`) and
        `MAX_POLICY` (a `Union` with `policy="max"`) (`plan.settings`)."""
        self._keyed_state: set[int] = set()
        self._derived: dict[int, Derive] = {}
        self.derived: Mapping[int, Derive] = ReadOnlyMapping("derived", self._derived)
        """Nodes whose counts follow from their input's, counted by this query
        (`translate.windows.tumble_counts`): `Stage.collect_metrics` adds them."""
        self._policies: set[int] = set()
        """The `Union`s and `Join`s where watermarks of several `WithWatermark`s meet."""
        self._counted_as: dict[Observation, Observation] = {}
        self.counted_as: Mapping[Observation, Observation] = ReadOnlyMapping(
            "counted_as", self._counted_as
        )
        """Observed metrics that also count as others' rows (`Stage.collect_metrics`): a
        `WithWatermark`'s output (`n_<id>`) is what its late-row filter passed (`out_<id>`),
        counted once."""
        self.paths = paths_of(spark)
        with without_call_sites():
            self.feed = open_feed(spark, directory, self.plan, self.paths)
        self.sources = self._channels("source")
        """The replayed sources' channels, by node id: what `Stage.feed` writes each epoch."""
        self.sentinels = self._channels("sentinel")
        """Each `WithWatermark`'s sentinel channel: where the end of input goes."""
        self.epochs = epochs or SourceEpochs(self.paths)
        """The replayed sources' epochs, shared with the other queries of the run."""

    @property
    def keyed_state(self) -> frozenset[int]:
        """The nodes whose translators build a `transformWithState` (`needs_state_store`)."""
        return ReadOnlySet(self._keyed_state)

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
        self.seal()
        with without_call_sites():
            for node in self.nodes:
                if node.id not in self.selected:
                    continue
                self._translate(node)
        if self._keyed_state:
            self._settings[STATE_STORE[0]] = STATE_STORE[1]
            self._settings[CHANGELOG[0]] = CHANGELOG[1]

    def _translate(self, node: Node) -> None:
        refuse_untranslated([node], STREAMING_TRANSLATED, "unbounded")  # the plan's
        translate = STREAMING_TRANSLATORS[type(node.transform)]
        if node.id in self.staged:
            translate = restamp
        inputs = [self._frames[i] for i in node.inputs if i in self._frames]
        origins = frozenset().union(*(self._origins.get(i, frozenset()) for i in node.inputs))
        self._origins[node.id] = origins | ({node.id} if node.rule.own else frozenset())
        with translating(node):
            made = returned(node, translate(self, node, inputs))
        if needs_state_store(self, node):
            self._keyed_state.add(node.id)
        if made.counts_as is not None:
            self._counted_as[Observation("n", node.id)] = made.counts_as
        if made.policy is not None:
            self._merge_policy(node, made.policy)
        self._made[node.id] = made
        frame = made.frame
        counts_from_input = COUNTS_FROM_INPUT.get(type(node.transform))
        if counts_from_input is not None and node.inputs[0] not in self.staged:
            derive = counts_from_input(node, self.nodes[node.inputs[0]])
            if derive is not None:
                self._derived[node.id] = derive
        if node.id not in self.staged | self.counted_inside | set(self.derived):
            frame = observed(node, frame)  # else counted elsewhere
        if node.id in self.marked_sources:  # for its other readers, without the marks
            self._marked[node.id] = frame
            frame = frame.select(*node.info.schema.names)
        self._frames[node.id] = frame
        meets = len(node.inputs) > 1 and len(self._origins[node.id]) > 1
        self._judges[node.id] = MappingProxyType(
            derive_judges(node, [self._judges.get(i, {}) for i in node.inputs], meets)
        )

    def _merge_policy(self, node: Node, policy: str) -> None:
        """Note that watermarks of several `WithWatermark`s meet at `node` under `policy`:
        Spark keeps one watermark per query, so all such merges have one policy
        (`plan.merges.refuse_policies_meet`)."""
        chosen = self._settings.get(MAX_POLICY[0], "min")
        assert not self._policies or policy == chosen, f"{node.label}: policies meet"
        self._policies.add(node.id)
        if policy == "max":
            self._settings[MAX_POLICY[0]] = MAX_POLICY[1]

    def channel(self, name: str) -> Channel:
        return self.feed.channels[name]

    def frame(self, name: str) -> DataFrame:
        frame = self.feed.channels[name].frame
        assert frame is not None
        return frame
