"""The translation of a pipeline's nodes into PySpark DataFrames: what every family of
translators shares.

`TRANSLATORS` maps a transform's type to the function that builds its DataFrame from its
inputs' DataFrames on bounded input, `STREAMING_TRANSLATORS` to the one on unbounded input;
each family's module (`sources`, `elementwise`, `watermark`, `windows`, `combine`, `sort`,
`session`, `merges`) registers both side by side (`translates`, `streaming`), the streaming
one with when it builds a `transformWithState` (`streaming(kind, state_store=...)`).
`families` imports every one. A node type without an entry is refused by the plan before
anything runs (`plan.phases`).

Event times stay Spark `TIMESTAMP`s (or `LONG`s for integer time columns); window arithmetic
is done on integer microseconds (`unix_micros`), exactly as the direct runner does it, so
negative times and offsets agree.

Bounded input is one Spark batch job, and the end of input flushes everything: watermarks
decide only when rows would be emitted, never which (postponing or removing a watermark
keeps a stream valid), so a batch plan needs none of them. Bounded input is one epoch, so
no row is judged after a watermark: late rows are none (`late_rows()` is an empty
DataFrame), and `Union`/`Join` `policy`, `WithWatermark` `idle_after` (no input is idle for
an epoch) and `max_drift` (no later epoch to hold back) change nothing: they are accepted,
and the rows are those the direct runner gives.

On unbounded input a streaming translator reads the query it is translated into
(`StreamingContext`, built and run by `execute.streaming.StreamingTranslation`) and returns
what it made, `Made`: its DataFrame and what else it produced (its late rows, its rows
before the late-row filter); judges come from each node's watermark rule
(`exact.judges.derive_judges`). Every translator, bounded or not, returns a `Made`, and none
writes into the translation it reads: the loop records what each made (`views`)."""

from __future__ import annotations

import contextlib
import datetime as _dt
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sparkbeam.graph import Node
from sparkbeam.runners.spark.exact.judges import (
    INT_TIME_RANGE,
    INT_WINDOW_OUTSIDE,
    Judge,
)
from sparkbeam.runners.spark.parts.arrow import require_spark_types
from sparkbeam.runners.spark.parts.python_functions import fail_when
from sparkbeam.runners.spark.plan.keys import ChannelKey, Observation
from sparkbeam.runners.spark.plan.late_filters import LateFilters
from sparkbeam.runners.spark.plan.phases import (
    TRANSLATED,
    refuse_untranslated,
)
from sparkbeam.runners.spark.plan.streaming_query import QueryPlan
from sparkbeam.runners.spark.session.call_sites import without_call_sites
from sparkbeam.runners.spark.session.engine_errors import spark_errors
from sparkbeam.runners.spark.translate.observed import Derive
from sparkbeam.runners.spark.translate.views import ReadOnlyMapping, ReadOnlySet, Sealed
from sparkbeam.schema import INT64_MIN, Schema
from sparkbeam.transforms.windows import bounds_of


@dataclass(frozen=True)
class Made:
    """What a translator made for its node: its DataFrame and what else it made. Every
    translator returns one (`returned` checks it)."""

    frame: DataFrame
    judged: DataFrame | None = None
    """`WithWatermark`: its rows with their judge (`JUDGE`), before the late-row filter."""
    invalid: DataFrame | None = None
    """`WithWatermark`: its input rows with no event time."""
    written: bool = False
    """`WriteFiles`, `ForEachBatch`: the frame is written (or called) when a batch pipeline
    runs (a streaming query's sink writes its own)."""
    late: DataFrame | None = None
    """`Union`, `Join`: the rows it drops as late (`policy="max"`, idle inputs); a
    `WithWatermark` with a stateless filter: its late rows."""
    policy: str | None = None
    """`Union`, `Join` where watermarks of several `WithWatermark`s meet: their policy."""
    counts_as: Observation | None = None
    """The observation that also counts the node's output rows, counted once: a
    `WithWatermark`'s output (`n_<id>`) is what its late-row filter passed (`out_<id>`)."""


def returned(node: Node, made: object) -> Made:
    """What the translator of `node` returned, which must be a `Made` (else an
    `AssertionError` naming it: a bug of sparkbeam's, never taken for the pipeline's)."""
    if not isinstance(made, Made):
        raise AssertionError(
            f"the translator of {node.label} returned a {type(made).__name__}, not a Made: a "
            "translator returns what it made as a Made (its DataFrame alone: Made(frame))"
        )
    return made


Translator = Callable[["Translation", Node, Sequence[DataFrame]], Made]

TRANSLATORS: dict[type, Translator] = {}


BatchEntry = TypeVar("BatchEntry", bound=Translator)
StreamingEntry = TypeVar("StreamingEntry", bound="StreamingTranslator")


def translates(kind: type) -> Callable[[BatchEntry], BatchEntry]:
    """Register `kind`'s translator on bounded input."""

    def register(function: BatchEntry) -> BatchEntry:
        TRANSLATORS[kind] = function
        return function

    return register


class Translation(Sealed):
    """The DataFrame of every node of a pipeline, built in graph order.

    A translator reads it read-only (`views`): the loop (`run`) records what each made."""

    def __init__(self, spark: SparkSession, nodes: Sequence[Node]) -> None:
        self.spark = spark
        self.nodes: Sequence[Node] = tuple(nodes)
        self._frames: dict[int, DataFrame] = {}
        self.frames: Mapping[int, DataFrame] = ReadOnlyMapping("frames", self._frames)
        self._invalid: dict[int, DataFrame] = {}
        self.invalid: Mapping[int, DataFrame] = ReadOnlyMapping("invalid", self._invalid)
        """For each `WithWatermark`: its input rows whose event time is `None`."""
        self._writes: list[tuple[Node, DataFrame]] = []
        self._made: dict[int, Made] = {}
        self.made: Mapping[int, Made] = ReadOnlyMapping("made", self._made)
        """What each node's translator made (`Made`)."""

    @property
    def writes(self) -> tuple[tuple[Node, DataFrame], ...]:
        """The sinks (`WriteFiles`, `ForEachBatch`), written when the pipeline runs."""
        return tuple(self._writes)

    def window_bounds(self, kind: type) -> tuple[int, int, str]:
        """The least and greatest window bound a time column of type `kind` holds here, and
        the words of the `DataError` for a window beyond them (`bounds_of`)."""
        return bounds_of(kind)

    def run(self) -> None:
        """Translate the nodes in graph order; each translator reads the translation and
        returns what it made, which is recorded here."""
        self.seal()
        with without_call_sites():
            for node in self.nodes:
                self._run(node)

    def _run(self, node: Node) -> None:
        refuse_untranslated([node], TRANSLATED, "bounded")  # the plan's
        translate = TRANSLATORS[type(node.transform)]
        require_spark_types(node.info.schema, node.label, node.transform)
        inputs = [self._frames[i] for i in node.inputs]
        with translating(node):
            made = returned(node, translate(self, node, inputs))
        self._made[node.id] = made
        self._frames[node.id] = made.frame
        if made.invalid is not None:
            self._invalid[node.id] = made.invalid
        if made.written:
            self._writes.append((node, made.frame))


@contextlib.contextmanager
def translating(node: Node) -> Iterator[None]:
    """Translating `node`: an exception that is not sparkbeam's (a file's footer pyarrow
    cannot read, a function Spark cannot pickle, Spark's analysis) as a `PipelineError`
    naming it (`engine_errors.spark_errors`, with `node` as the target)."""
    with spark_errors((node,), node):
        yield


def input_schema(translation: Translation, node: Node, port: int = 0) -> Schema:
    return translation.nodes[node.inputs[port]].info.schema


def require_time(frame: DataFrame, column: str, label: str, schema: Schema) -> DataFrame:
    """Fail the job with a `DataError` naming the row if `column` is None (as the direct runner)."""
    message = (
        f"a row has no {column!r} (None), so it has no place in time; drop such rows first "
        f"(.with_watermark({column!r}, ...) drops and counts them, or use a Filter)"
    )
    checked = fail_when(F.col(column).isNull(), F.col(column), label, schema, message)
    return frame.withColumn(column, checked)


class StreamingContext(Translation):
    """What a streaming translator reads of the query it is translated into: its plan
    (`plan.streaming_query.QueryPlan`) and earlier nodes' results, read-only (`views`); a
    translator writes nothing into it and returns what it made (`Made`), which the loop
    records. `execute.streaming.StreamingTranslation` builds it, opens its feed and runs it."""

    def __init__(self, spark: SparkSession, nodes: Sequence[Node], plan: QueryPlan) -> None:
        super().__init__(spark, nodes)
        self.plan = plan
        self._judges: dict[int, Mapping[str, Judge]] = {}
        self.judges: Mapping[int, Mapping[str, Judge]] = ReadOnlyMapping("judges", self._judges)
        """Each translated node's judge per watermarked column."""
        self._origins: dict[int, frozenset[int]] = {}
        self.origins: Mapping[int, frozenset[int]] = ReadOnlyMapping("origins", self._origins)
        """For each node, the `WithWatermark` nodes its watermarks come from."""
        self._marked: dict[int, DataFrame] = {}
        self.marked: Mapping[int, DataFrame] = ReadOnlyMapping("marked", self._marked)
        """A source's frame with its epoch watermarks (`epoch_marks`), before they are
        dropped for its other readers."""

    @property
    def live(self) -> bool:
        """Whether `ReadFiles(streaming=True)` is Spark's own file source (a production run)
        rather than replayed epoch by epoch (`collect`)."""
        return self.plan.live

    @property
    def selected(self) -> frozenset[int]:
        """The nodes the query runs."""
        return ReadOnlySet(self.plan.selected)

    @property
    def staged(self) -> frozenset[int]:
        """`WithWatermark`s computed by an earlier stage: read their output instead."""
        return ReadOnlySet(self.plan.staged)

    @property
    def staged_paths(self) -> Mapping[int, str]:
        """Live merges: where a stage query writes each staged node's rows (its file sink),
        read as a file stream instead of a channel of the feed (`execute.live_merges`)."""
        return ReadOnlyMapping("staged_paths", self.plan.staged_paths)

    @property
    def late_filters(self) -> LateFilters:
        """How each `WithWatermark` and merge of the query drops late rows (the plan's)."""
        return self.plan.late_filters

    @property
    def epoch_marks(self) -> Mapping[int, tuple[int, str]]:
        """`WithWatermark`s the runner feeds straight from a replayed source: the source and
        the column of its epoch files that holds the watermark (`exact.late_filter`)."""
        return ReadOnlyMapping("epoch_marks", self.plan.epoch_marks)

    @property
    def marked_sources(self) -> frozenset[int]:
        """The sources of `epoch_marks`."""
        return ReadOnlySet(self.plan.marked_sources)

    @property
    def counts_source(self) -> Mapping[int, int]:
        """Sources a `WithWatermark` in `epoch_marks` counts (`n_<id>`) with its own input, in
        one observation: the first that reads each."""
        return ReadOnlyMapping("counts_source", self.plan.counts_source)

    @property
    def counted_inside(self) -> frozenset[int]:
        """Nodes counted by another's observation, not by one of their own (`observed`)."""
        return ReadOnlySet(self.plan.counted_inside)

    def window_bounds(self, kind: type) -> tuple[int, int, str]:
        """On an integer column, a window or session ends at most at the latest event time the
        runner holds on a stream (`INT_TIME_RANGE`): one ending later closes in Spark after
        the end of input, if ever, and its rows would be lost."""
        if kind is _dt.datetime:
            return super().window_bounds(kind)
        return INT64_MIN, INT_TIME_RANGE[1], INT_WINDOW_OUTSIDE

    def input_judges(self, node: Node, port: int = 0) -> Mapping[str, Judge]:
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

    def has_channel(self, key: ChannelKey) -> bool:
        """Whether the query's feed has the channel `key`: a query over live sources only has
        none (`plan.streaming_query`)."""
        return any(channel.key == key for channel in self.plan.channels)

    def frame(self, name: str) -> DataFrame:
        """The frame of the feed's channel `name` (`plan.keys.ChannelKey`)."""
        raise NotImplementedError


StreamingTranslator = Callable[[StreamingContext, Node, Sequence[DataFrame]], Made]

STREAMING_TRANSLATORS: dict[type, StreamingTranslator] = {}
"""Each kind's translator on unbounded input (a stateless kind's is its batch one)."""

StateStoreNeed = Callable[[StreamingContext, Node], bool]
"""Whether a node's translation builds a `transformWithState` (`keyed_state`), from what the
query knows before translating it: its late-row filters, origins, inputs' judges and `Made`s."""

STATE_STORE_NEEDS: dict[type, StateStoreNeed] = {}
"""The kinds whose translators may build a `transformWithState`, with the rule of when; a
query holding one of their nodes that needs it starts with `STATE_STORE`."""


def needs_state_store(run: StreamingContext, node: Node) -> bool:
    """Whether `node`'s translation in `run` builds a `transformWithState` (a staged node only
    reads what an earlier stage computed)."""
    need = STATE_STORE_NEEDS.get(type(node.transform))
    return node.id not in run.staged and need is not None and need(run, node)


def always(run: StreamingContext, node: Node) -> bool:
    """The need of a kind whose translator keys its state in a `transformWithState`."""
    return True


CountsFromInput = Callable[[Node, Node], Derive | None]
"""A node's counts from its input's metrics (`node, input -> Derive`; None where they do not
follow), so that it needs no observation of its own."""

COUNTS_FROM_INPUT: dict[type, CountsFromInput] = {}
"""The kinds whose counts follow from their input's where the input is computed in the same
query (`observed.Derive`)."""


def streaming(
    kind: type,
    state_store: StateStoreNeed | None = None,
    counts_from_input: CountsFromInput | None = None,
) -> Callable[[StreamingEntry], StreamingEntry]:
    """Register `kind`'s streaming translator, with when it builds a `transformWithState`
    and how its counts follow from its input's, if they do."""

    def register(function: StreamingEntry) -> StreamingEntry:
        STREAMING_TRANSLATORS[kind] = function
        if state_store is not None:
            STATE_STORE_NEEDS[kind] = state_store
        if counts_from_input is not None:
            COUNTS_FROM_INPUT[kind] = counts_from_input
        return function

    return register


def as_streaming(translation: Translation) -> StreamingContext:
    """`translation` as the streaming query it is (a streaming translator's)."""
    assert isinstance(translation, StreamingContext)
    return translation
