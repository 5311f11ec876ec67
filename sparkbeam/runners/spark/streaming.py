"""The streaming translators: one function per transform, the unbounded form of each (the batch
forms are in `translate`).

`StreamingTranslation` builds the DataFrames of one query in graph order; each
translator returns the DataFrame it made and, through `Made`, what else it
produced (its late rows, its rows before the late-row filter); judges come
from each node's watermark rule (`judges.derive_judges`).
"""

from __future__ import annotations

import datetime as _dt
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from sparkbeam.graph import EdgeInfo, Node
from sparkbeam.runners.spark import limits
from sparkbeam.runners.spark.arrow import spark_schema
from sparkbeam.runners.spark.epochs import (
    SENTINEL,
    Channel,
    EpochFeed,
    SourceEpochs,
)
from sparkbeam.runners.spark.exact.judges import (
    INT_TIME_OUTSIDE,
    INT_TIME_RANGE,
    INT_WINDOW_OUTSIDE,
    JUDGE,
    Judge,
    as_spark_time,
    derive_judges,
    own_judge,
    stateful,
    with_watermark_metadata,
)
from sparkbeam.runners.spark.exact.late_filter import late_against_current_watermark
from sparkbeam.runners.spark.exact.late_rows import filter_late_rows
from sparkbeam.runners.spark.live import live_files
from sparkbeam.runners.spark.live_footers import footer_files
from sparkbeam.runners.spark.live_merges import staged_rows
from sparkbeam.runners.spark.merges import (
    judged_sides,
    may_idle,
    not_late,
    require_separable_origins,
)
from sparkbeam.runners.spark.observed import COUNTS_FROM_INPUT, Derive, observed
from sparkbeam.runners.spark.paths import paths_of
from sparkbeam.runners.spark.plan.delays import long_delay
from sparkbeam.runners.spark.plan.keys import (
    INVALID_ROWS,
    LATEST,
    ROWS,
    ChannelKey,
    ChannelKind,
    Observation,
)
from sparkbeam.runners.spark.plan.late_filters import Query, Role, Strategy, late_filters
from sparkbeam.runners.spark.plan.merges import join_keys_apart, union_columns_apart
from sparkbeam.runners.spark.plan.origins import redefines_watermark
from sparkbeam.runners.spark.plan.phases import STREAMING_TRANSLATED, refuse_untranslated
from sparkbeam.runners.spark.plan.queries import is_replayed
from sparkbeam.runners.spark.python_combine import combine_stream
from sparkbeam.runners.spark.python_functions import fail_when
from sparkbeam.runners.spark.session_groups import session_groups
from sparkbeam.runners.spark.session_windows import session_stream
from sparkbeam.runners.spark.sort import sort_stream
from sparkbeam.runners.spark.translate import (
    TRANSLATORS,
    Translation,
    _aggregate,
    join_output,
    session_in_range,
    translating,
    units,
)
from sparkbeam.schema import INT64_MIN, Schema
from sparkbeam.transforms.combine import AggregateFn, CombinePerKey
from sparkbeam.transforms.connectors import ForEachBatch, ReadFromSpark
from sparkbeam.transforms.elementwise import Filter, Map, Select
from sparkbeam.transforms.files import ReadFiles, WriteFiles
from sparkbeam.transforms.flat import FlatMap
from sparkbeam.transforms.join import Join
from sparkbeam.transforms.late import INVALID, LATE_WATERMARK, DroppedRows
from sparkbeam.transforms.sort import Sort
from sparkbeam.transforms.sources import Create, TestStreamSource
from sparkbeam.transforms.union import Union
from sparkbeam.transforms.watermark import WithWatermark
from sparkbeam.transforms.windows import WINDOW_START, Hop, Session, Tumble

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


STATELESS = (Map, FlatMap, Filter, Select, Tumble, Hop, WriteFiles, ForEachBatch)
"""`WriteFiles` and `ForEachBatch` pass their rows on; they write only as a query's sink."""


@dataclass(frozen=True)
class Made:
    """What a streaming translator made for its node, besides its DataFrame."""

    frame: DataFrame
    judged: DataFrame | None = None
    """`WithWatermark`: its rows with their judge (`JUDGE`), before the late-row filter."""
    invalid: DataFrame | None = None
    """`WithWatermark`: its input rows with no event time."""
    late: DataFrame | None = None
    """`Union`, `Join`: the rows it drops as late (`policy="max"`, idle inputs); a
    `WithWatermark` with a stateless filter: its late rows."""
    policy: str | None = None
    """`Union`, `Join` where watermarks of several `WithWatermark`s meet: their policy."""


StreamingTranslator = Callable[
    ["StreamingTranslation", Node, Sequence[DataFrame]], DataFrame | Made
]


class StreamingTranslation(Translation):
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
        """Whether `ReadFiles(streaming=True)` is Spark's own file source (a production run)
        rather than replayed epoch by epoch (`collect`)."""
        self.settings: dict[str, str] = {}
        """Spark settings the query starts with (`Stage.start` sets them only while it
        starts): `ONE_WATERMARK` (`late_filters.one_watermark`), `MAX_POLICY` (a `Union` with
        `policy="max"`), `STATE_STORE` and `CHANGELOG` (a `transformWithState`),
        `NO_EXCHANGE_REUSE` (a node with several inputs)."""
        self.keyed_state: set[int] = set()
        """The nodes whose translators build a `transformWithState` (`needs_state_store`)."""
        self.selected = set(range(len(nodes))) if selected is None else selected
        self.staged = staged or set()
        """`WithWatermark`s computed by an earlier stage: read their output instead."""
        self.staged_paths = staged_paths or {}
        """Live merges: where a stage query writes each staged node's rows (its file sink),
        read as a file stream instead of a channel of the feed (`live_merges`)."""
        replayed = frozenset(i for i in self.selected if is_replayed(nodes[i], live))
        query = Query(
            frozenset(self.selected), frozenset(self.staged), replayed, live, back_to_back, role
        )
        self.late_filters = late_filters(nodes, query)
        """How each `WithWatermark` and merge of the query drops late rows (the plan's)."""
        if self.late_filters.one_watermark:
            self.settings[ONE_WATERMARK[0]] = ONE_WATERMARK[1]
        self.epoch_marks: dict[int, tuple[int, str]] = {
            node_id: (chosen.source, chosen.mark)
            for node_id, chosen in self.late_filters.filters.items()
            if chosen.source is not None and chosen.mark is not None
        }
        """`WithWatermark`s the runner feeds straight from a replayed source: the source and
        the column of its epoch files that holds the watermark (`exact.late_filter`)."""
        marks: dict[str, list[str]] = {}
        for source_id, mark in self.epoch_marks.values():
            if source_id in replayed:  # else the source's reader writes them (`footers`)
                marks.setdefault(ChannelKey("source", source_id).name(), []).append(mark)
        self.marked_sources = {source_id for source_id, _ in self.epoch_marks.values()}
        self.counts_source: dict[int, int] = {}
        """Sources a `WithWatermark` in `epoch_marks` counts (`n_<id>`) with its own input, in
        one observation (`_declare_watermark`): the first that reads each."""
        for node_id, (source_id, _) in sorted(self.epoch_marks.items(), reverse=True):
            self.counts_source[source_id] = node_id
        self.counted_inside = set(self.epoch_marks) | set(self.counts_source)
        """Nodes counted by another's observation, not by one of their own (`observed`)."""
        self.derived: dict[int, Derive] = {}
        """Nodes whose counts follow from their input's, counted by this query
        (`observed.tumble_counts`): `Stage.collect_metrics` adds them."""
        self.marked: dict[int, DataFrame] = {}
        """A source's frame with its epoch watermarks (`epoch_marks`), before they are
        dropped for its other readers."""
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
        self.judges: dict[int, dict[str, Judge]] = {}
        self.origins: dict[int, frozenset[int]] = {}
        """For each node, the `WithWatermark` nodes its watermarks come from."""
        self.policies: set[int] = set()
        """The `Union`s and `Join`s where watermarks of several `WithWatermark`s meet."""
        self.counted_as: dict[Observation, Observation] = {}
        """Observed metrics that also count as others' rows (`Stage.collect_metrics`): a
        `WithWatermark`'s output (`n_<id>`) is what its late-row filter passed (`out_<id>`),
        counted once."""
        self.made: dict[int, Made] = {}
        """What each node's translator made (`Made`)."""
        self.epochs = epochs or SourceEpochs(self.paths)
        """The replayed sources' epochs, shared with the other queries of the run."""

    def window_bounds(self, kind: type) -> tuple[int, int, str]:
        """On an integer column, a window or session ends at most at the latest event time the
        runner holds on a stream (`INT_TIME_RANGE`): one ending later closes in Spark after
        the end of input, if ever, and its rows would be lost."""
        if kind is _dt.datetime:
            return super().window_bounds(kind)
        return INT64_MIN, INT_TIME_RANGE[1], INT_WINDOW_OUTSIDE

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

    def input_judges(self, node: Node, port: int = 0) -> dict[str, Judge]:
        return self.judges[node.inputs[port]]

    def exact_judge(self, node: Node, column: str, port: int = 0) -> Judge:
        """The judge of input `port`'s `column`, which `node` keys state or late rows on; the
        plan refuses one whose watermark depends on rows another operator holds, or on which
        of several `WithWatermark`s holds it back (`plan.keyed`): the same rule again here."""
        judge = self.input_judges(node, port)[column]
        refusal = judge.keyed_refusal(node.label, column)
        if refusal is not None:
            raise refusal
        return judge

    def channel(self, name: str) -> Channel:
        return self.feed.channels[name]

    def frame(self, name: str) -> DataFrame:
        frame = self.feed.channels[name].frame
        assert frame is not None
        return frame


STREAMING_TRANSLATORS: dict[type, StreamingTranslator] = {
    kind: TRANSLATORS[kind] for kind in STATELESS
}


StateStoreNeed = Callable[["StreamingTranslation", Node], bool]
"""Whether a node's translation builds a `transformWithState` (`keyed_state`), from what the
query knows before translating it: its late-row filters, origins, inputs' judges and `Made`s."""

STATE_STORE_NEEDS: dict[type, StateStoreNeed] = {}
"""The kinds whose translators may build a `transformWithState`, with the rule of when; a
query holding one of their nodes that needs it starts with `STATE_STORE`."""


def needs_state_store(run: StreamingTranslation, node: Node) -> bool:
    """Whether `node`'s translation in `run` builds a `transformWithState` (a staged node only
    reads what an earlier stage computed)."""
    need = STATE_STORE_NEEDS.get(type(node.transform))
    return node.id not in run.staged and need is not None and need(run, node)


def always(run: StreamingTranslation, node: Node) -> bool:
    """The need of a kind whose translator keys its state in a `transformWithState`."""
    return True


def streaming(
    kind: type, state_store: StateStoreNeed | None = None
) -> Callable[[StreamingTranslator], StreamingTranslator]:
    """Register `kind`'s streaming translator, with when it builds a `transformWithState`."""

    def register(function: StreamingTranslator) -> StreamingTranslator:
        STREAMING_TRANSLATORS[kind] = function
        if state_store is not None:
            STATE_STORE_NEEDS[kind] = state_store
        return function

    return register


def _streaming(translation: Translation) -> StreamingTranslation:
    assert isinstance(translation, StreamingTranslation)
    return translation


@streaming(TestStreamSource)
@streaming(Create)
@streaming(ReadFiles)
def epoch_source(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> DataFrame:
    """A source's channel; its rows are read only when the query runs (`source_epochs`)."""
    run = _streaming(translation)
    if node.id in run.marked_sources and not is_replayed(node, run.live):
        readers = [(run.nodes[i], m) for i, (s, m) in run.epoch_marks.items() if s == node.id]
        return footer_files(run.spark, node, readers)
    if not is_replayed(node, run.live):
        return live_files(run.spark, node)
    return run.frame(ChannelKey("source", node.id).name())


@streaming(ReadFromSpark)
def read_from_spark(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> DataFrame:
    transform = node.transform
    assert isinstance(transform, ReadFromSpark)
    if transform.bounded:
        raise limits.BOUNDED_READ_IN_STREAM.error(node.label)
    return TRANSLATORS[ReadFromSpark](translation, node, inputs)


def _current_filter(run: StreamingTranslation, node: Node) -> bool:
    """A `WithWatermark` whose late-row filter is `Strategy.CURRENT`."""
    return run.late_filters.of(node.id).strategy is Strategy.CURRENT


@streaming(WithWatermark, state_store=_current_filter)
def with_watermark(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> Made:
    run = _streaming(translation)
    transform = node.transform
    assert isinstance(transform, WithWatermark)
    if transform.raises_watermark_per_row():
        raise limits.EMIT_EVENT.error(node.label, emit=transform.emit)
    if redefines_watermark(run.origins, node):
        raise limits.CHAINED_WATERMARKS.error(node.label)
    schema = node.info.schema
    column, kind = transform.column, schema.type_of(transform.column)
    delay = transform.watermark_delay_units(schema, node.label)
    delay_ms = delay // 1000 if kind is _dt.datetime else delay

    time = F.col(column)
    invalid = inputs[0].filter(time.isNull())
    chosen = run.late_filters.of(node.id)
    if chosen.reads_marks:
        # Fed straight from a replayed source: its epoch files hold the watermark each row is
        # judged by, a stateless filter (exact: `exact.late_filter`).
        source, mark = run.epoch_marks[node.id]
        # One observation counts the source, this node's input and what its filter passes.
        kept = time.isNotNull() & (F.col(mark).isNull() | (units(time, kind) >= F.col(mark)))
        counts = _counted(node, kept)
        if run.counts_source.get(source) == node.id:
            counts += _counted(run.nodes[source], F.lit(True))
        marked = run.marked[source]
        real = _declare_watermark(run, node, marked, counted=True, also=counts, keep_time=True)
    else:  # live sources, an input computed in the query: a stateful filter
        real = _declare_watermark(run, node, inputs[0], counted=True)
    made = filter_late_rows(chosen, real, schema, column, delay_ms, SPARK_TIME, node.label)
    # the filter's output is the node's
    run.counted_as[Observation("n", node.id)] = Observation("out", node.id)
    return Made(made.passed, judged=made.judged, invalid=invalid, late=made.late)


SPARK_TIME = "__sparkbeam_event_time"
"""The event time as Spark holds it, which its watermark is declared on (`_declare_watermark`)."""


def _counted(node: Node, rows: Column) -> list[Column]:
    """What `observed` counts of `node`, on the rows where `rows` holds among a
    `WithWatermark`'s input (the end-of-input sentinel left out), as fields named by key."""
    real = rows & ~F.col(SENTINEL)
    schema = node.info.schema
    fields = [F.count(F.when(real, 1)).alias(Observation("n", node.id).rows())]
    for i, column in enumerate(sorted(node.info.watermarked)):
        value = units(F.col(column), schema.type_of(column))
        fields.append(F.max(F.when(real, value)).alias(Observation("n", node.id).latest(i)))
    return fields


def _declare_watermark(
    run: StreamingTranslation,
    node: Node,
    frame: DataFrame,
    counted: bool,
    also: Sequence[Column] = (),
    keep_time: bool = False,
) -> DataFrame:
    """Spark's watermark for a `WithWatermark` node over `frame`, with the end-of-input sentinel.

    Rows with no event time are dropped (counted as invalid when `counted`, with `also`:
    fields of the same observation, `_counted`). With `keep_time`, the event time as Spark
    holds it stays, as `SPARK_TIME`.
    """
    transform = node.transform
    assert isinstance(transform, WithWatermark)
    schema = node.info.schema
    column, kind = transform.column, schema.type_of(transform.column)
    refusal = long_delay(node)  # the plan's (`plan.delays`)
    if refusal is not None:
        raise refusal
    delay = transform.watermark_delay_units(schema, node.label)
    delay_ms = delay // 1000 if kind is _dt.datetime else delay
    sentinel = run.frame(ChannelKey("sentinel", node.id).name())
    events = frame.withColumn(SENTINEL, F.lit(False))
    events = events.unionByName(sentinel, allowMissingColumns=True)  # epoch watermarks: null
    time = F.col(column)
    if counted:
        valid = ~F.col(SENTINEL) & time.isNotNull()
        events = events.observe(
            Observation("in", node.id).name(),
            F.count(F.when(valid, 1)).alias(ROWS),
            F.count(F.when(time.isNull(), 1)).alias(INVALID_ROWS),
            # the largest event time, late rows included (`observed.model_watermark`)
            F.max(F.when(valid, units(time, kind))).alias(LATEST),
            *also,
        )
    spark_time = SPARK_TIME
    marked = (
        events.filter(time.isNotNull())
        .withColumn(spark_time, _held_time(time, kind, node.label, schema))
        .withWatermark(spark_time, f"{delay_ms} milliseconds")
    )
    # One conjunct that names the event time, so the optimizer cannot push it below
    # the watermark (the sentinel must reach the watermark's statistics).
    not_sentinel = ~F.col(SENTINEL) | F.col(spark_time).isNull()
    real = marked.filter(not_sentinel).drop(SENTINEL)
    return real if keep_time else real.drop(spark_time)


def _held_time(time: Column, kind: type, label: str, schema: Schema) -> Column:
    """The event time as Spark holds it (`as_spark_time`); on an integer column, a row whose
    time Spark cannot hold (`INT_TIME_RANGE`) fails the query with a `DataError` naming the
    transform and the row (datetimes: the calendar's every value fits)."""
    held = as_spark_time(time, kind)
    if kind is _dt.datetime:
        return held
    low, high = INT_TIME_RANGE
    outside = ~F.col(SENTINEL) & ((time < F.lit(low)) | (time > F.lit(high)))
    return fail_when(outside, held, label, schema, INT_TIME_OUTSIDE)


def restamp(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> DataFrame:
    """A `WithWatermark` an earlier stage ran: its surviving rows, with the same watermark."""
    run = _streaming(translation)
    path = run.staged_paths.get(node.id)
    if path is not None:  # a live stage's file sink (`live_merges`)
        rows = staged_rows(run.spark, node, path)
        return _declare_watermark(run, node, rows, counted=False)
    return _declare_watermark(
        run, node, run.frame(ChannelKey("staged", node.id).name()), counted=False
    )


def _combined_keys(run: StreamingTranslation, node: Node) -> tuple[list[str], list[str]]:
    """A `CombinePerKey`'s watermarked keys and, of those, the ones whose judges are exact."""
    transform = node.transform
    assert isinstance(transform, CombinePerKey)
    judges = run.input_judges(node)
    watermarked = [k for k in transform.keys if k in judges]
    # A group is emitted when the watermark of any of its keys passes it; a held key's judge
    # may close late, so the exact ones decide where there are any (after a Session,
    # window_end's always closes first: a session's rows come out once it has closed).
    return watermarked, [k for k in watermarked if not judges[k].held]


def _with_session(run: StreamingTranslation, node: Node) -> bool:
    """A `CombinePerKey` translated with the `Session` it reads (`session_then_combine`)."""
    watermarked, exact = _combined_keys(run, node)
    source = run.nodes[node.inputs[0]]
    return not exact and isinstance(source.transform, Session) and WINDOW_START in watermarked


def _python_aggregates(transform: CombinePerKey) -> bool:
    """Spark refuses Python aggregates in streaming aggregations: keyed state instead."""
    return not all(isinstance(a, AggregateFn) for _, a in transform.aggregates)


def _keyed_combine(run: StreamingTranslation, node: Node) -> bool:
    transform = node.transform
    assert isinstance(transform, CombinePerKey)
    return _with_session(run, node) or _python_aggregates(transform)


@streaming(CombinePerKey, state_store=_keyed_combine)
def combine_per_key(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> DataFrame:
    run = _streaming(translation)
    transform = node.transform
    assert isinstance(transform, CombinePerKey)
    watermarked, exact = _combined_keys(run, node)
    if _with_session(run, node):
        return session_then_combine(run, run.nodes[node.inputs[0]], node)
    keyed = [run.exact_judge(node, k)(F.col(k)) for k in exact or watermarked[:1]]
    frame = stateful(inputs[0], keyed)
    if _python_aggregates(transform):
        in_schema = run.nodes[node.inputs[0]].info.schema
        return combine_stream(
            frame,
            in_schema,
            node.info.schema,
            transform.keys,
            transform.aggregates,
            JUDGE,
            node.label,
        )
    aggregates = [_aggregate(a, streaming=True).alias(name) for name, a in transform.aggregates]
    return frame.groupBy(*transform.keys, JUDGE).agg(*aggregates).drop(JUDGE)


def session_then_combine(run: StreamingTranslation, session: Node, node: Node) -> DataFrame:
    """A `CombinePerKey` on a `Session`'s `window_start` (and no other watermarked key): the
    two as one operator over all keys (`session_groups`), from the Session's input."""
    transform, windows = node.transform, session.transform
    assert isinstance(transform, CombinePerKey) and isinstance(windows, Session)
    schema = run.nodes[session.inputs[0]].info.schema
    judge = run.exact_judge(session, windows.column)
    gap = windows.gap_units(schema, session.label)
    bounds = run.window_bounds(schema.type_of(windows.column))
    checked = session_in_range(
        run.frames[session.inputs[0]], windows.column, gap, bounds, session.label, schema
    )
    frame = stateful(checked, [judge(F.col(windows.column))])
    return session_groups(
        frame,
        schema,
        windows.column,
        gap,
        windows.keys,
        judge,
        transform.keys,
        transform.aggregates,
        node.info.schema,
        node.label,
    )


@streaming(Sort, state_store=always)
def sort(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> DataFrame:
    run = _streaming(translation)
    transform = node.transform
    assert isinstance(transform, Sort)
    judge = run.exact_judge(node, transform.column)
    frame = stateful(inputs[0], [judge(F.col(transform.column))])
    schema = node.info.schema
    return sort_stream(frame, schema, transform.column, transform.keys, JUDGE, node.label)


def _interval(amount: int, kind: type) -> Column:
    """A day-time interval literal: `amount` microseconds (datetime) or milliseconds (int)."""
    micros = amount if kind is _dt.datetime else amount * 1000
    sign = "-" if micros < 0 else ""
    seconds, fraction = divmod(abs(micros), 1_000_000)
    return F.expr(f"INTERVAL '{sign}{seconds}.{fraction:06d}' SECOND")


def _judges_sides(run: StreamingTranslation, node: Node) -> bool:
    """A `Join` where watermarks of several `WithWatermark`s meet under `policy="max"` or
    with an idle input: its sides' late rows are judged by the current watermark."""
    transform = node.transform
    assert isinstance(transform, Join)
    meets = len(run.origins[node.id]) > 1
    return meets and (transform.policy == "max" or may_idle(run, node))


@streaming(Join, state_store=_judges_sides)
def join(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> Made:
    """A stream-stream join; Spark cleans its state by the judge of a window key on both
    sides (their judges must agree), or by a range on the judges of the interval times."""
    run = _streaming(translation)
    transform = node.transform
    assert isinstance(transform, Join)
    require_separable_origins(run, node)
    meets = len(run.origins[node.id]) > 1
    left_info, right_info = (run.nodes[i].info for i in node.inputs)
    judges = [run.judges[i] for i in node.inputs]
    left = inputs[0].select([F.col(n).alias(f"__l_{n}") for n in left_info.schema.names])
    right = inputs[1].select([F.col(n).alias(f"__r_{n}") for n in right_info.schema.names])
    condition = functools.reduce(
        lambda a, b: a & b, [F.col(f"__l_{k}") == F.col(f"__r_{k}") for k in transform.on]
    )
    window_keys = transform.window_keys(left_info, right_info)
    bounds = transform.interval_bounds(left_info.schema, right_info.schema, node.label)
    late = None
    if _judges_sides(run, node):
        left, right, late = judged_sides(run, node, left, right, judges, window_keys)

    left, right, keyless = _without_none_keys(transform, left, right, left_info, right_info, node)

    def marked(frame: DataFrame, name: str, judge: Judge, column: str) -> DataFrame:
        return with_watermark_metadata(frame.withColumn(name, judge(F.col(column))), name)

    if window_keys:
        key = window_keys[0]
        run.exact_judge(node, key, 0), run.exact_judge(node, key, 1)
        assert join_keys_apart(run.judges, node, [key]) is None, "refused by the plan"
        left = marked(left, "__l_judge", judges[0][key], f"__l_{key}")
        right = marked(right, "__r_judge", judges[1][key], f"__r_{key}")
        condition = condition & (F.col("__l_judge") == F.col("__r_judge"))
    elif bounds is not None and transform.times is not None:
        # An outer side's unmatched row comes out once Spark's one watermark, the minimum of
        # both sides', passes it; the model waits for the other side's only. Where the sides'
        # watermarks come from different WithWatermarks and the outer side's is behind, the
        # row comes out micro-batches later than on the direct runner: the same rows, never
        # a different match (docs/decisions.md).
        left_time, right_time = transform.times
        lj, rj = run.exact_judge(node, left_time, 0), run.exact_judge(node, right_time, 1)
        kind = left_info.schema.type_of(left_time)
        left = marked(left, "__l_judge", lj, f"__l_{left_time}")
        right = marked(right, "__r_judge", rj, f"__r_{right_time}")
        skew = rj.offset - lj.offset
        lower, upper = bounds[0] + skew, bounds[1] + skew
        condition = (
            condition
            & (F.col("__r_judge") >= F.col("__l_judge") + _interval(lower, kind))
            & (F.col("__r_judge") <= F.col("__l_judge") + _interval(upper, kind))
        )
    how = {"inner": "inner", "left": "left_outer", "right": "right_outer", "full": "full_outer"}
    joined = left.join(right, condition, how[transform.how])
    output = joined.select(*join_output(transform, left_info.schema, right_info.schema, node.label))
    for rows in keyless:
        output = output.unionByName(rows)
    return Made(output, late=late, policy=transform.policy if meets else None)


KEEPS_UNMATCHED = {"inner": (), "left": (0,), "right": (1,), "full": (0, 1)}
"""Which sides' unmatched rows each `how` emits."""


def _without_none_keys(
    transform: Join,
    left: DataFrame,
    right: DataFrame,
    left_info: EdgeInfo,
    right_info: EdgeInfo,
    node: Node,
) -> tuple[DataFrame, DataFrame, list[DataFrame]]:
    """The sides' rows whose `on` keys hold no None, and the rows with a None key that the
    join emits, laid out as unmatched rows.

    A row with a None key never matches, and an outer side emits it at once
    (the model's rule, `transforms.join`). Spark's stream-stream join would
    keep it in its state instead: its state matches a None key with a None key
    (a full join pairs them), and emits an outer side's only when the watermark
    passes it. So these rows go around the join: the side's own stateless
    branch, in the same micro-batch.
    """
    schemas = (left_info.schema, right_info.schema)
    frames = [left, right]
    keyless: list[DataFrame] = []
    for port, side in enumerate("lr"):
        none_key = functools.reduce(
            lambda a, b: a | b, [F.col(f"__{side}_{k}").isNull() for k in transform.on]
        )
        if port in KEEPS_UNMATCHED[transform.how]:
            rows = frames[port].filter(none_key)
            other = "lr"[1 - port]
            for name, kind in schemas[1 - port].fields:
                spark_type = spark_schema(Schema(((name, kind),)), node.label).fields[0].dataType
                rows = rows.withColumn(f"__{other}_{name}", F.lit(None).cast(spark_type))
            keyless.append(rows.select(*join_output(transform, schemas[0], schemas[1], node.label)))
        frames[port] = frames[port].filter(~none_key)
    return frames[0], frames[1], keyless


@streaming(Session, state_store=always)
def session(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> DataFrame:
    run = _streaming(translation)
    transform = node.transform
    assert isinstance(transform, Session)
    schema = run.nodes[node.inputs[0]].info.schema
    judge = run.exact_judge(node, transform.column)
    gap = transform.gap_units(schema, node.label)
    bounds = run.window_bounds(schema.type_of(transform.column))
    checked = session_in_range(inputs[0], transform.column, gap, bounds, node.label, schema)
    frame = stateful(checked, [judge(F.col(transform.column))])
    return session_stream(frame, schema, transform.column, gap, transform.keys, judge, node.label)


def _judges_union(run: StreamingTranslation, node: Node) -> bool:
    """A `Union` where watermarks of several `WithWatermark`s meet under `policy="max"` or
    with an idle input: its late rows are judged by the current watermark."""
    transform = node.transform
    assert isinstance(transform, Union)
    meets = len(run.origins[node.id]) > 1
    return meets and (transform.policy == "max" or may_idle(run, node))


@streaming(Union, state_store=_judges_union)
def union(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> Made:
    """Under `policy="max"` with watermarks of several `WithWatermark`s, the query keeps the
    latest of them (`MAX_POLICY`): the rows below it on a watermarked column are late here,
    judged against the current batch's watermark (`exact.late_filter`)."""
    run = _streaming(translation)
    require_separable_origins(run, node)
    merged = TRANSLATORS[Union](translation, node, inputs)
    transform = node.transform
    assert isinstance(transform, Union)
    if len(run.origins[node.id]) < 2:
        return Made(merged)  # the latest of one watermark is the earliest: no row is late here
    if not _judges_union(run, node):
        return Made(merged, policy=transform.policy)
    judges = {}
    for column in sorted(node.info.watermarked):
        for port in range(len(node.inputs)):
            judges[column] = run.exact_judge(node, column, port)
    assert union_columns_apart(run.judges, node) is None, "refused by the plan"
    schema = node.info.schema
    late = [judges[column].late(column) for column in schema.names if column in judges]
    output = schema.with_columns((LATE_WATERMARK, schema.type_of(late[0].column)))
    late_rows = late_against_current_watermark(merged, schema, late, output, node.label)
    counted = merged.observe(Observation("in", node.id).name(), F.count(F.lit(1)).alias(ROWS))
    kept = not_late(run, counted, schema, [entry.judge for entry in late], node.label)
    out = kept.observe(Observation("out", node.id).name(), F.count(F.lit(1)).alias(ROWS))
    return Made(out, late=late_rows, policy=transform.policy)


def _judges_late_rows(run: StreamingTranslation, node: Node) -> bool:
    """Late rows of a `WithWatermark` whose filter left them in its judged rows."""
    transform, source = node.transform, run.nodes[node.inputs[0]]
    assert isinstance(transform, DroppedRows)
    if transform.kind == INVALID or run.made[source.id].late is not None:
        return False
    return isinstance(source.transform, WithWatermark)


@streaming(DroppedRows, state_store=_judges_late_rows)
def dropped_rows(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> DataFrame:
    """Invalid rows: the `WithWatermark`'s input rows with no event time. Late rows: the rows
    its filter (or a `Union`'s under `policy="max"`) drops, judged the same way."""
    run = _streaming(translation)
    transform = node.transform
    assert isinstance(transform, DroppedRows)
    source = run.nodes[node.inputs[0]]
    assert source.id not in run.staged, "refused by the plan (`plan.queries`)"
    made = run.made[source.id]
    if transform.kind == INVALID:
        assert made.invalid is not None
        return made.invalid
    schema = node.info.schema
    if made.late is not None:
        return made.late
    if isinstance(source.transform, WithWatermark):
        column = source.transform.column
        judge = own_judge(source.info.schema.type_of(column))
        late = [replace(judge.late(column), judge=F.col(JUDGE))]
        assert made.judged is not None
        frame = made.judged
    else:  # policy="min" (the only policy of a Join on Spark streaming): nothing is late
        kind = spark_schema(schema, node.label)[LATE_WATERMARK].dataType
        return inputs[0].filter(F.lit(False)).withColumn(LATE_WATERMARK, F.lit(None).cast(kind))
    return late_against_current_watermark(frame, source.info.schema, late, schema, node.label)
