"""Starting and feeding the streaming queries of one PCollection: stage queries where
watermarks of different `WithWatermark`s meet, the final query, and the epoch loop (idle
inputs, watermark alignment, the end-of-input flush).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import datetime as _dt
import json
import operator
import re
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from sparkbeam.arrow import from_arrow, to_arrow
from sparkbeam.graph import Node
from sparkbeam.paths import join, read_text
from sparkbeam.runners.shared.alignment import AlignmentGraph
from sparkbeam.runners.spark.exact.fed import FedWatermark
from sparkbeam.runners.spark.exact.judges import Judge
from sparkbeam.runners.spark.execute.epochs import (
    Channel,
    SourceEpochs,
    epoch_count,
    put_sentinel,
)
from sparkbeam.runners.spark.execute.live_merges import (
    StagedFiles,
    delete_unlisted,
    slug,
    stage_sink,
)
from sparkbeam.runners.spark.execute.live_progress import follow, unfollow
from sparkbeam.runners.spark.execute.progress import Clock, counted, say
from sparkbeam.runners.spark.execute.streaming import StreamingTranslation
from sparkbeam.runners.spark.plan.ancestry import ancestors
from sparkbeam.runners.spark.plan.keys import (
    INVALID_ROWS,
    ROWS,
    ChannelKey,
    MetricKey,
    Observation,
    model_watermark,
)
from sparkbeam.runners.spark.plan.late_filters import Role
from sparkbeam.runners.spark.plan.queries import is_live, is_replayed, staged_origins
from sparkbeam.runners.spark.plan.settings import MAX_POLICY
from sparkbeam.runners.spark.session.engine_errors import spark_errors
from sparkbeam.runners.spark.session.paths import paths_of, require_staging, scratch_directory
from sparkbeam.runners.spark.session.quiet import converting
from sparkbeam.runners.spark.session.shipping import is_connect
from sparkbeam.runners.spark.translate.live_footers import (
    read_counts,
    resolved_directories,
    sources_started,
)
from sparkbeam.runners.spark.translate.observed import observed_fields
from sparkbeam.runners.spark.translate.sources import Sink
from sparkbeam.schema import columns_to_rows
from sparkbeam.transforms.watermark import WithWatermark

_STARTING = threading.Lock()

SIDE_BY_SIDE = 3
"""How many queries run a micro-batch at once (`side_by_side`, `prepare`): each spends most
of one waiting on Spark's scheduling, but each also starts Python workers (functions,
`transformWithState`), and too many starting at once on a small machine miss Spark's
connect-back timeout."""

_RUNNING = threading.BoundedSemaphore(SIDE_BY_SIDE)
"""Held while a replayed query runs an epoch: at most `SIDE_BY_SIDE` at once in the process,
however many runs are fed from how many threads."""


SEEN_BATCHES = 100_000
"""How many of a query's latest micro-batch ids `fold` keeps to count each once; older ones
are taken as counted. Spark offers a report again only while it is among the query's recent
reports (`spark.sql.streaming.numRecentProgressUpdates`, 100 by default)."""


class Stage:
    """One streaming query: the ancestors of `target`, with a sink that keeps each epoch's rows
    (or the production `sink`: files, or the user's callback).

    The rows of each epoch also go to the channels of `outputs`: the feeds of
    the final queries that read this stage's target (one per run it serves).
    """

    def __init__(
        self,
        translation: StreamingTranslation,
        target: Node,
        outputs: Sequence[Channel] = (),
        sink: Sink | None = None,
    ) -> None:
        self.translation = translation
        self.target = target
        self.outputs = list(outputs)
        self.sink = sink
        self.tables: list[pa.Table] = []
        self.epochs: list[list[dict[str, Any]]] = []
        self.metrics: dict[str, int] = {}
        self.counted: dict[str, int] = {}
        """The observed metrics of the last epoch's micro-batches."""
        self.latest: int | None = None
        """The latest event time (in units) among the rows emitted, for a `WithWatermark`."""
        self.seen_batches: set[int] = set()
        """The micro-batches counted (`fold`), but none before `forgotten_before`."""
        self.forgotten_before = -1
        self._folding = threading.Lock()
        """Held while `fold` adds a progress report's counts to `metrics`."""
        self.watermark_ms: int | None = None
        """Spark's watermark after the last epoch before the end of input (`record_watermark`)."""
        self.query: Any = None
        self.memory: str | None = None
        """On Spark Connect, the memory sink's table that keeps the query's rows."""
        self.memory_rows = 0
        """How many rows of the memory sink's table earlier epochs took."""
        self.checkpoint: str | None = None
        """Where the query keeps its checkpoint (`StreamingRun` sets it)."""
        self.shared = False
        """A stage of `LiveStages` or `ReplayedStages`: translated, started and stopped once
        for all the runs it serves."""

    def start(self, trigger: str | None = None) -> None:
        assert self.checkpoint is not None
        checkpoint = self.checkpoint
        self.translation.prefetch()  # the epochs are read and checked while the query starts
        tables = self.tables

        def keep(batch: DataFrame, batch_id: int) -> None:
            tables.append(batch.toArrow())

        frame = self.translation.frames[self.target.id]
        if self.sink is None and is_connect(self.translation.spark):
            # Spark Connect runs a foreachBatch function in a Python process of the server,
            # not here: keep the rows in the server's memory sink and read them from there.
            self.memory = f"sparkbeam_{uuid.uuid4().hex}"
            writer = frame.writeStream.format("memory").queryName(self.memory)
        elif self.sink is None:
            writer = frame.writeStream.foreachBatch(keep)
        else:
            writer = self.sink(frame.select(*self.target.info.schema.names))
        writer = writer.outputMode("append").option("checkpointLocation", checkpoint)
        if trigger is not None:
            writer = writer.trigger(processingTime=trigger)
        # A query keeps the session's settings as it starts: set this query's only while it
        # starts, and start one query at a time (`prepare` starts them from several threads).
        conf = self.translation.spark.conf
        with _STARTING:
            before = {key: conf.get(key, None) for key in self.translation.settings}
            for key, value in self.translation.settings.items():
                conf.set(key, value)
            try:
                self.query = writer.start()
                say("started the query of %s", self.target.label)
                if self.translation.marked_sources - set(self.translation.sources):
                    sources_started(self.query)  # one footer reader's Python at a time
            finally:
                for key, old in before.items():
                    if old is None:
                        conf.unset(key)
                    else:
                        conf.set(key, old)

    def feed(self, reads: dict[int, int] | None) -> None:
        """Write the next epoch's file: source `s`'s epoch `reads[s]` (a source not in `reads`
        brings no rows), or with `reads=None` the end of input."""
        translation = self.translation
        if reads is not None:
            for node_id, source in translation.sources.items():
                if node_id in reads:
                    source.put_table(translation.epoch_of(node_id, reads[node_id]))
            for origin, (node_id, mark) in translation.epoch_marks.items():
                if node_id not in translation.sources:
                    continue  # a live source whose reader writes them (`footers`)
                # the watermark this epoch's rows are judged by: the model's after the last
                watermark = model_watermark(translation.nodes[origin], self.metrics)
                translation.sources[node_id].mark_values[mark] = watermark
        else:
            for node_id, sentinel in translation.sentinels.items():
                node = translation.nodes[node_id]
                transform = node.transform
                assert isinstance(transform, WithWatermark)
                put_sentinel(sentinel, transform.column, node.info.schema.type_of(transform.column))
        translation.feed.write()

    def process(self) -> None:
        """Run every micro-batch the new files allow; keep their rows as one epoch."""
        schema = self.target.info.schema
        start = len(self.tables)
        with _RUNNING, converting(self.translation.spark):
            self.query.processAllAvailable()
        if self.memory is not None:
            # the memory sink appends each micro-batch's rows to its table, in batch order
            table = self.translation.spark.table(self.memory).toArrow()
            self.tables.append(table.slice(self.memory_rows))
            self.memory_rows = table.num_rows
        columns: dict[str, list[Any]] = {name: [] for name in schema.names}
        for table in self.tables[start:]:
            for name, values in from_arrow(table, schema).items():
                columns[name].extend(values)
        self.epochs.append(columns_to_rows(columns, schema))
        if self.outputs:
            table = to_arrow(columns, schema, self.target.label)
            for output in self.outputs:
                output.put_table(table)
        transform = self.target.transform
        if isinstance(transform, WithWatermark):
            # columns hold times in their units (datetimes as microseconds)
            times = [v for v in columns[transform.column] if v is not None]
            if times:
                self.latest = max(times) if self.latest is None else max(self.latest, *times)
        self.counted = self.collect_metrics()

    def step(self, reads: dict[int, int]) -> None:
        """Feed one epoch (`feed`), run it, keep Spark's watermark after it."""
        self.feed(reads)
        self.process()
        self.record_watermark()

    def end(self) -> None:
        """Feed the end of input and run it."""
        self.feed(None)
        self.process()
        if not self.stateful():
            # No stateful operator, no no-data batch: the watermark after the last epoch
            # shows first in the progress of the end of input's batch.
            self.record_watermark()

    def collect_metrics(self) -> dict[str, int]:
        """Add up the counts of the micro-batches not counted yet (and return them), from the
        query's recent progress reports (a live query's others came through `fold` as Spark
        posted them: `live_progress`)."""
        counted: dict[str, int] = {}
        for progress in self.query.recentProgress:
            for key, value in (self.fold(progress) or {}).items():
                counted[key] = counted.get(key, 0) + value
        with self._folding:
            for derive in self.translation.derived.values():  # in graph order
                self.metrics.update(derive(self.metrics))
        return counted

    def fold(self, progress: Any) -> dict[str, int] | None:
        """Add the counts of one progress report to `metrics`, once per micro-batch: what
        Spark observed, and what the footer sources' readers counted (`read_counts`). Its row
        counts, or None for a report of a batch already counted or of none run."""
        # A trigger that found nothing to run reports the next batch's id with no observed
        # metrics and no new offsets, before that batch reports its own: count only batches
        # run.
        batch = progress["batchId"]
        if batch in self.seen_batches or batch < self.forgotten_before:
            return None  # counted: the recent reports come again at every ask
        observed = progress.get("observedMetrics") or {}
        read = read_counts(progress)
        if not (observed or read):
            return None
        fields: dict[str, Any] = dict(read)
        for name, metric in observed.items():
            for field, value in observed_fields(metric).items():
                key = field if "." in field else f"{name}.{field}"  # fields named by key
                fields[key] = value
        for key, value in list(fields.items()):
            parsed = MetricKey.parse(key)
            if parsed is not None and parsed.field == ROWS:
                also = self.translation.counted_as.get(parsed.observation)
                if also is not None:
                    fields[also.rows()] = value
        counted: dict[str, int] = {}
        with self._folding:
            if batch in self.seen_batches or batch < self.forgotten_before:
                return None  # the listener's thread and the asking one both had it
            self.seen_batches.add(batch)
            if len(self.seen_batches) > 2 * SEEN_BATCHES:  # a long-running live query
                self.forgotten_before = batch - SEEN_BATCHES
                self.seen_batches = {b for b in self.seen_batches if b >= self.forgotten_before}
            self.add_counts(fields, counted)
        return counted

    def metrics_now(self) -> dict[str, int]:
        """A copy of `metrics` (a listener's thread may be adding to it: `fold`)."""
        with self._folding:
            return dict(self.metrics)

    def add_counts(self, fields: dict[str, Any], counted: dict[str, int]) -> None:
        """Add one micro-batch's (or epoch's) observed fields, by key, to `metrics` (a largest
        value stays the largest so far; None: no rows) and its row counts to `counted`."""
        for key, value in fields.items():
            parsed = MetricKey.parse(key)
            if parsed is not None and parsed.is_latest:
                if value is not None:
                    before = self.metrics.get(key)
                    self.metrics[key] = value if before is None else max(before, value)
                continue
            self.metrics[key] = self.metrics.get(key, 0) + int(value)
            counted[key] = counted.get(key, 0) + int(value)

    def stateful(self) -> bool:
        """Whether the query has a stateful operator (Spark runs a no-data batch after a data
        batch that moves the watermark only then)."""
        progress = self.query.lastProgress or {}
        return bool(progress.get("stateOperators"))

    def record_watermark(self) -> None:
        """Keep Spark's watermark after the epoch just run (milliseconds of Spark time)."""
        progress = self.query.lastProgress or {}
        text = (progress.get("eventTime") or {}).get("watermark")
        if text:
            self.watermark_ms = spark_time_ms(text)


class FedStage(Stage):
    """A stage the runner runs itself, with no query: a `WithWatermark` read straight from a
    replayed source (`StreamingTranslation.epoch_marks`), judged on each epoch's Arrow rows
    (`exact.fed`). Its translation is planned as a stage query's (the same refusals and
    judges) but never started."""

    def __init__(
        self, translation: StreamingTranslation, target: Node, outputs: Sequence[Channel]
    ) -> None:
        super().__init__(translation, target, outputs)
        source_id, _ = translation.epoch_marks[target.id]
        self.source_id = source_id
        self.fed = FedWatermark(translation.nodes[source_id], target)

    def start(self, trigger: str | None = None) -> None:
        self.translation.prefetch()

    def step(self, reads: dict[int, int]) -> None:
        if self.source_id in reads:
            table = self.translation.epoch_of(self.source_id, reads[self.source_id])
        else:  # held back or ended: an epoch with no rows
            table = self.fed.no_rows()
        passed, fields = self.fed.judge(table, self.metrics)
        for output in self.outputs:
            output.put_table(passed)
        self.counted = {}
        self.add_counts(fields, self.counted)
        self.latest = self.fed.emitted_latest
        self.record_watermark()

    def end(self) -> None:
        for output in self.outputs:  # the end of input brings no rows of this stage
            output.put_table(self.fed.no_rows())

    def record_watermark(self) -> None:
        self.watermark_ms = self.fed.spark_watermark_ms()

    def collect_metrics(self) -> dict[str, int]:
        return self.counted


def stage_of(
    translation: StreamingTranslation, target: Node, outputs: Sequence[Channel] = ()
) -> Stage:
    """The stage of origin `target`: a `FedStage` where the plan judges it without a query
    (`Strategy.FED`: it reads nothing but the replayed source it judges), else a query."""
    if translation.late_filters.fed(target.id):
        return FedStage(translation, target, outputs)
    return Stage(translation, target, outputs)


_SPARK_TIME = re.compile(r"^([+-]?\d{4,})-(\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)(Z|[+-]\d\d:\d\d)?$")
_DAYS_PER_400_YEARS = 146_097


def spark_time_ms(text: str) -> int:
    """Milliseconds since 1970 of a time Spark reports in a query's progress
    (`2026-04-01T10:00:00.000Z`). The runner's shift (`judges.SHIFT_MICROS`) puts times of
    the years after 8030 past 9999 inside Spark, which writes them as `+10968-01-01...`:
    read through Python's calendar by moving them back by whole 400-year cycles (the
    Gregorian calendar repeats every 146,097 days)."""
    match = _SPARK_TIME.match(text.strip())
    if match is None:
        raise ValueError(f"cannot read Spark's time {text!r}")
    year, rest, zone = int(match.group(1)), match.group(2), match.group(3) or "+00:00"
    cycles = (year - 2000) // 400
    moment = _dt.datetime.fromisoformat(
        f"{year - 400 * cycles:04d}-{rest}{'+00:00' if zone == 'Z' else zone}"
    )
    epoch = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
    shifted = moment - epoch + _dt.timedelta(days=_DAYS_PER_400_YEARS * cycles)
    return shifted // _dt.timedelta(milliseconds=1)


class StreamingRun:
    """Runs the queries of one PCollection epoch by epoch and keeps what each epoch emitted.

    Spark keeps one watermark per query. When watermarks of different
    `WithWatermark`s meet (a `Union` or `Join`), each of those runs as its own
    stage query, so its late rows are judged against its own watermark; its
    output is fed, epoch by epoch, to the final query, which declares the same
    watermark again on the surviving rows (their maximum is the same, since
    late rows lie below the watermark) and takes the minimum where they meet.

    With a production `sink` (`WriteFiles`, `ForEachBatch`) the final query
    writes there instead. With `live`, `ReadFiles(streaming=True)` is Spark's
    own file source; a query that reads a live source (that or a
    `ReadFromSpark`) is started and left running (`stop` ends it), with its
    checkpoint and state under `directory`, so that a query started again on
    the same directory goes on where the last one stopped. Where watermarks
    of different `WithWatermark`s meet over live sources, the stage queries
    write to file sinks that the final query reads, and are shared by the
    pipeline's sinks (`LiveStages`; why that is exact: `live_merges`), unless
    each of them reads straight from a live parquet source whose reader
    judges its rows by the files' footers: then the final query reads the
    sources itself, each filter comparing with its own watermark, and no
    stage runs (`plan.queries.staged_origins`).

    Its target's queries were refused, if at all, before it is made
    (`plan.refuse_query`: by `p.run()` for a sink, by the result for a
    collected PCollection).
    """

    def __init__(
        self,
        spark: SparkSession,
        nodes: Sequence[Node],
        target: Node,
        sink: Sink | None = None,
        directory: str | None = None,
        live: bool = False,
        trigger: str | None = None,
        staging: str | None = None,
        shared: LiveStages | None = None,
        together: ReplayedStages | None = None,
    ) -> None:
        self.spark = spark
        self.paths = paths_of(spark)
        self.trigger = trigger
        self.live_run = live
        """Whether `ReadFiles(streaming=True)` is Spark's own file source (a run with sinks)."""
        upstream = ancestors(nodes, target)
        replayed = [nodes[n].label for n in sorted(upstream) if is_replayed(nodes[n], live)]
        self.live = any(is_live(nodes[n], live) for n in upstream)
        self.keep = directory is not None and self.live
        """A replayed run always starts afresh: its checkpoint is temporary."""
        if replayed:
            require_staging(spark, staging, target.label, replayed[0])
        self.directory = (
            directory
            if directory is not None and self.live
            else scratch_directory(self.paths, staging, "sparkbeam-stream-")
        )
        """Epoch files and checkpoints: the sink's checkpoint directory, else a new directory
        under the staging location (a local temporary one by default)."""
        checkpoint = join(self.directory, "checkpoint-0")
        self.resumed = self.keep and self.paths.kind(checkpoint) is not None
        """Whether the query goes on from the checkpoint of an earlier one."""
        resolved = resolved_directories(spark, nodes, upstream) if live else {}
        staged = staged_origins(nodes, target, live, resolved)
        needed = ancestors(nodes, target, stop=staged)
        self.stages: list[Stage] = []
        self.own_stages: LiveStages | None = None
        """Live merges planned without a pipeline's `LiveStages`: the run's own, which
        `stop` cleans up."""
        staged_paths: dict[int, str] = {}
        if self.live and staged:
            # Live merges: a stage query per origin writing to a file sink, shared by the
            # pipeline's sinks (`live_merges`; refused with idle inputs or alignment).
            if shared is None:  # a run of its own: its stages are its own too
                shared = LiveStages(spark, self.directory if self.keep else None, staging)
                self.own_stages = shared
            for origin in sorted(staged):
                stage = shared.stage(nodes, nodes[origin])
                staged_paths[origin] = shared.rows(nodes[origin])
                self.stages.append(stage)
        # A sink's run checks every epoch before feeding the first (`SourceEpochs`).
        whole = sink is not None
        epochs = together.epochs if together is not None else SourceEpochs(self.paths, whole)
        final = StreamingTranslation(
            spark,
            nodes,
            join(self.directory, "final"),
            needed,
            staged,
            live,
            staged_paths,
            epochs,
            back_to_back=self.live,
            resolved=resolved,
        )
        if not staged_paths:
            for origin in sorted(staged):
                node = nodes[origin]
                output = final.channel(ChannelKey("staged", origin).name())
                if together is not None:  # one stage query for every run fed together
                    stage = together.stage(nodes, node)
                    stage.outputs.append(output)
                    self.stages.append(stage)
                    continue
                directory = join(self.directory, f"stage-{origin}")
                translation = StreamingTranslation(
                    spark, nodes, directory, ancestors(nodes, node), epochs=epochs, role=Role.STAGE
                )
                self.stages.append(stage_of(translation, node, [output]))
        self.alignment = AlignmentGraph.of(nodes)
        """Watermark alignment (`max_drift`): which sources to hold back after each epoch."""
        if self.alignment is not None:
            assert together is None, "runs with watermark alignment are fed alone"
            self._shadow_stages(spark, nodes, staged | needed, epochs)
        self.final = Stage(final, target, sink=sink)
        self.stages.append(self.final)
        own = [stage for stage in self.stages if not stage.shared]
        for index, stage in enumerate(own):
            stage.checkpoint = join(self.directory, f"checkpoint-{index}")
        if shared is not None and staged_paths:
            final_stage = self.final
            assert final_stage.checkpoint is not None
            for rows in staged_paths.values():
                shared.files.read_by(rows, final_stage.checkpoint, lambda: final_stage.query)

    def _shadow_stages(
        self,
        spark: SparkSession,
        nodes: Sequence[Node],
        observed: set[int],
        epochs: SourceEpochs,
    ) -> None:
        """A stage query for each `WithWatermark` of the alignment this run's queries do not
        hold: its watermark decides which sources are held back, as on the direct runner
        (over replayed sources with no idle input: `plan.queries.refuse_query`)."""
        assert self.alignment is not None
        group = set(self.alignment.drift).union(*self.alignment.peers.values())
        for origin in sorted(group - observed):
            node = nodes[origin]
            directory = join(self.directory, f"shadow-{origin}")
            translation = StreamingTranslation(
                spark, nodes, directory, ancestors(nodes, node), epochs=epochs, role=Role.SHADOW
            )
            self.stages.append(Stage(translation, node))

    def _watermark(self, origin: int) -> int | None:
        """The model's watermark of `origin` (a `WithWatermark`) after the epochs run so far."""
        node = self.final.translation.nodes[origin]
        transform = node.transform
        assert isinstance(transform, WithWatermark)
        index = sorted(node.info.watermarked).index(transform.column)
        for stage in self.stages:
            latest = stage.metrics.get(Observation("n", origin).latest(index))
            if latest is not None:
                return transform.watermark_function(node.info.schema)(latest)
        return None

    @property
    def epochs(self) -> list[list[dict[str, Any]]]:
        return self.final.epochs

    @property
    def metrics(self) -> dict[str, int]:
        merged: dict[str, int] = {}
        for stage in self.stages:
            if self.live:
                stage.collect_metrics()
            for key, value in stage.metrics_now().items():
                merged[key] = merged.get(key, 0) + value
        return merged

    def watermarks(self) -> dict[int, tuple[int, Mapping[str, Judge]]]:
        """For each node a stage query counts: Spark's watermark there (after the last epoch
        before the end of input; a live query's now) and its columns' judges."""
        out: dict[int, tuple[int, Mapping[str, Judge]]] = {}
        for stage in self.stages:
            if self.live:
                stage.record_watermark()
            if not stage.watermark_ms:  # none yet (Spark's starts at 0)
                continue
            translation = stage.translation
            for node_id in translation.selected - translation.staged:
                out[node_id] = (stage.watermark_ms, translation.judges.get(node_id, {}))
        return out

    def translate(self) -> None:
        for stage in self.stages:
            if not stage.shared:  # `LiveStages` and `ReplayedStages` translate their own, once
                stage.translation.run()

    def start(self) -> None:
        """Start the run's queries (a stage query another run started already runs for both)."""
        for stage in self.stages:
            if stage.query is None:
                stage.start(self.trigger)

    def execute(self) -> None:
        """Replayed sources: every epoch, the end-of-input flush, then stop (`replay`). Live:
        start."""
        if not self.live:
            replay([self])
            return
        try:
            self.start()
            for stage in self.stages:  # every micro-batch counted (`live_progress`)
                if stage.query is not None:
                    follow(self.spark, stage.query, stage.fold)
        except BaseException:
            self.stop()
            raise
        if self.own_stages is not None:
            self.own_stages.files.start()

    def stop(self) -> None:
        """Stop the run's queries (all of a live merge's stages too: the sinks stop together)
        and delete its directory where it was temporary."""
        for stage in self.stages:
            if stage.query is not None:
                stage.query.stop()
                if self.live:
                    unfollow(self.spark, stage.query)
            if stage.memory is not None:
                self.spark.catalog.dropTempView(stage.memory)
        if self.own_stages is not None:
            self.own_stages.cleanup()
        if not self.keep:
            with contextlib.suppress(Exception):  # a cleanup: the run's outcome is what counts
                self.paths.delete(self.directory)


def replay(runs: Sequence[StreamingRun]) -> None:
    """Feed the replayed sources' epochs to the queries of `runs` (of one pipeline) in step,
    then the end of input; stop them.

    As many epochs as the pipeline's longest source, as on the direct runner,
    also where that source is not one a query reads; more where sources are
    held back (watermark alignment: a run of its own). Each epoch runs the
    stage queries first, each once however many runs it serves
    (`ReplayedStages`), then every run's final query; queries of one step run
    side by side (`SIDE_BY_SIDE` at a time): none reads what another of its
    step writes.
    """
    try:
        first = runs[0]
        nodes = first.final.translation.nodes
        for run in runs:
            with spark_errors(nodes, run.final.target):
                run.start()
        stages = {id(s): s for run in runs for s in run.stages if s is not run.final}
        finals = [run.final for run in runs]
        counts = {
            n.id: epoch_count(n, first.paths) for n in nodes if is_replayed(n, first.live_run)
        }
        read = dict.fromkeys(counts, 0)
        say(
            "replaying %s through %s, a micro-batch each, then the end of input",
            counted(max(counts.values(), default=0), "epoch", "epochs"),
            counted(len(runs), "query", "queries"),
        )
        fed, clock = 0, Clock()
        held: set[int] = set()
        idles = [IdleInputs(run.stages[:-1], run.final.translation) for run in runs]
        while any(read[s] < counts[s] for s in counts):
            reads = {s: read[s] for s in counts if s not in held and read[s] < counts[s]}
            step = operator.methodcaller("step", reads)
            side_by_side(list(stages.values()), step, nodes)
            for idle in idles:
                idle.mark()
            side_by_side(finals, step, nodes)
            for source in reads:
                read[source] += 1
            fed += 1
            say("epoch %d run (%s)", fed, clock)
            if first.alignment is not None:
                running = {s for s in counts if read[s] < counts[s]}
                held = first.alignment.held(running, first._watermark, lambda origin: False)
        end = operator.methodcaller("end")
        side_by_side(list(stages.values()), end, nodes)
        side_by_side(finals, end, nodes)
        say("end of input run; stopping the queries")
    finally:
        for run in runs:
            run.stop()


def side_by_side(
    stages: Sequence[Stage], work: Callable[[Stage], None], nodes: Sequence[Node]
) -> None:
    """`work` on each stage, `SIDE_BY_SIDE` at a time; the first error raised, once all ended,
    naming the stage's target where Spark's error names no transform (`spark_errors`)."""

    def named(stage: Stage) -> None:
        with spark_errors(nodes, stage.target):
            work(stage)

    if len(stages) <= 1:
        for stage in stages:
            named(stage)
        return
    with concurrent.futures.ThreadPoolExecutor(min(len(stages), SIDE_BY_SIDE)) as pool:
        for future in [pool.submit(named, stage) for stage in stages]:
            future.result()


class IdleInputs:
    """`WithWatermark(idle_after=n)` where watermarks meet: which stage queries' inputs are
    idle, and the marker rows that leave them out of the final query's minimum.

    As on the direct runner, an origin whose input brought no rows (counted by
    its stage query) for `n` epochs in a row is idle until its next row. Each
    epoch it is idle, its channel of the final query gets a marker row (the
    end-of-input sentinel's kind, filtered out after the watermark) that lifts
    its watermark to the minimum of the active origins' (computed from the
    rows each stage emitted, as the model does). Spark's minimum is then the
    model's; when the origin comes back, Spark's watermark stays where the
    markers put it until the origin's own passes it, which is what the model's
    merge emits (it never goes back), and its rows below it are the merge's
    late rows. Under `policy="max"` an idle input changes nothing Spark
    emits.
    """

    def __init__(self, stages: Sequence[Stage], final: StreamingTranslation) -> None:
        self.final = final
        self.stages = [s for s in stages if isinstance(s.target.transform, WithWatermark)]
        self.empty = {stage.target.id: 0 for stage in self.stages}

    def mark(self) -> None:
        """After the stage queries ran an epoch: put the final query's marker rows."""
        if self.final.settings.get(MAX_POLICY[0]) == MAX_POLICY[1]:
            return
        idle, active = [], []
        for stage in self.stages:
            transform = stage.target.transform
            assert isinstance(transform, WithWatermark)
            schema = stage.target.info.schema
            after = transform.idle_epochs(stage.target.label)
            node_id = stage.target.id
            seen = stage.counted.get(Observation("in", node_id).rows(), 0)
            seen += stage.counted.get(Observation("in", node_id).field(INVALID_ROWS), 0)
            self.empty[node_id] = 0 if seen else self.empty[node_id] + 1
            mark = None
            if stage.latest is not None:
                mark = transform.watermark_function(schema)(stage.latest)
            if after is not None and self.empty[node_id] >= after:
                idle.append((stage, transform, schema))
            else:
                active.append(mark)
        if not idle or not active or any(mark is None for mark in active):
            return
        lowest = min(mark for mark in active if mark is not None)
        for stage, transform, schema in idle:
            delay = transform.watermark_delay_units(schema, stage.target.label)
            kind = schema.type_of(transform.column)
            channel = self.final.sentinels[stage.target.id]
            put_sentinel(channel, transform.column, kind, lowest + delay)


class SharedStages:
    """Stage queries that several runs share, one per origin, with their files under `root`:
    a checkpoint location that stays, or (None) a temporary directory made when first needed
    and deleted by `cleanup`."""

    def __init__(self, spark: SparkSession, root: str | None, staging: str | None) -> None:
        self.spark = spark
        self.paths = paths_of(spark)
        self.keep = root is not None
        self.root = root
        self.staging = staging
        self.stages: dict[int, Stage] = {}

    def stop(self) -> None:
        for stage in self.stages.values():
            if stage.query is not None:
                stage.query.stop()

    def cleanup(self) -> None:
        """Stop every stage; delete the temporary directory (not a checkpoint location)."""
        self.stop()
        if not self.keep and self.root is not None:
            with contextlib.suppress(Exception):  # a cleanup: the run's outcome is what counts
                self.paths.delete(self.root)


class ReplayedStages(SharedStages):
    """The stage queries of replayed merges, one per origin, shared by the runs `replay` feeds
    together (`SparkStreamingResult.prepare`), with their sources' epochs: where four
    collected PCollections read the same two `WithWatermark`s, two stage queries instead of
    eight. Their files live in one temporary directory under the staging location, deleted
    by `cleanup` once every run stopped."""

    def __init__(self, spark: SparkSession, staging: str | None) -> None:
        super().__init__(spark, None, staging)
        self.epochs = SourceEpochs(self.paths, whole=False)  # their outputs are collected

    def stage(self, nodes: Sequence[Node], node: Node) -> Stage:
        """The stage query of origin `node`, planned and translated on first use."""
        stage = self.stages.get(node.id)
        if stage is not None:
            return stage
        if self.root is None:
            self.root = scratch_directory(self.paths, self.staging, "sparkbeam-stages-")
        directory = join(self.root, f"stage-{node.id}")
        translation = StreamingTranslation(
            self.spark,
            nodes,
            directory,
            ancestors(nodes, node),
            epochs=self.epochs,
            role=Role.STAGE,
        )
        translation.run()
        stage = stage_of(translation, node, [])
        stage.checkpoint = join(self.root, f"checkpoint-{node.id}")
        stage.shared = True
        self.stages[node.id] = stage
        return stage


class LiveStages(SharedStages):
    """The stage queries of a pipeline's live merges, one per origin, shared by its sinks.

    Each writes the rows its `WithWatermark` passes with Spark's file sink
    (`live_merges`), under `root`: the runner's checkpoint location, so that
    a pipeline started again on it goes on where its stages stopped, or a
    temporary directory under the staging location (`cleanup` deletes it once
    every query stopped). A stage's directory is named after its origin's
    label (`stage-<label>`: `checkpoint`, `rows`, `feed`), which a pipeline
    built again keeps. Each run reading a stage registers its final query
    with `files`, which deletes the stage's files once all have committed
    them.
    """

    def __init__(self, spark: SparkSession, root: str | None, staging: str | None) -> None:
        super().__init__(spark, root, staging)
        self.files = StagedFiles(self.paths)
        """Deletes the stage files every final query reading them committed."""

    def stop(self) -> None:
        self.files.stop()
        super().stop()

    def directory(self, node: Node) -> str:
        if self.root is None:
            self.root = scratch_directory(self.paths, self.staging, "sparkbeam-stages-")
        return join(self.root, f"stage-{slug(node.label)}")

    def rows(self, node: Node) -> str:
        """Where the stage of `node` (a `WithWatermark`) writes its rows."""
        return join(self.directory(node), "rows")

    def _running(self, checkpoint: str) -> bool:
        """Whether a query of this session runs on `checkpoint` already (its id, in the
        checkpoint's `metadata`, is active): then its files are not to be touched."""
        metadata = join(checkpoint, "metadata")
        if self.paths.kind(metadata) != "file":
            return False
        query_id = json.loads(read_text(self.paths, metadata).splitlines()[0])["id"]
        return any(str(query.id) == query_id for query in self.spark.streams.active)

    def stage(self, nodes: Sequence[Node], node: Node) -> Stage:
        """The stage query of origin `node`, planned and translated on first use."""
        stage = self.stages.get(node.id)
        if stage is not None:
            return stage
        directory = self.directory(node)
        feed = join(directory, "feed")
        # The late-row filter is the query's only stateful operator: it judges by the
        # current batch's watermark, the model's (`plan.late_filters`).
        translation = StreamingTranslation(
            self.spark, nodes, feed, ancestors(nodes, node), live=True, role=Role.LIVE_STAGE
        )
        translation.run()
        rows = self.rows(node)
        self.paths.mkdirs(rows)  # there before any query reads it
        checkpoint = join(directory, "checkpoint")
        if not self._running(checkpoint):
            delete_unlisted(self.paths, rows)  # a batch that never committed wrote them
        stage = Stage(translation, node, sink=stage_sink(rows))
        stage.checkpoint = checkpoint
        stage.shared = True
        self.stages[node.id] = stage
        return stage
