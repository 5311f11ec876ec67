"""The result of an unbounded pipeline on Spark: its sinks' queries, and one query per
collected PCollection, run when first asked for.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from pyspark.sql import SparkSession

from sparkbeam.errors import PipelineError
from sparkbeam.graph import Node
from sparkbeam.metrics import PipelineMetrics, TransformMetrics
from sparkbeam.paths import join
from sparkbeam.results import ResultViews
from sparkbeam.runners.shared.alignment import AlignmentGraph
from sparkbeam.runners.shared.writes import refuse_existing_output
from sparkbeam.runners.spark.exact.judges import Judge
from sparkbeam.runners.spark.execute.live_merges import slug
from sparkbeam.runners.spark.execute.progress import counted, say
from sparkbeam.runners.spark.execute.queries import (
    SIDE_BY_SIDE,
    LiveStages,
    ReplayedStages,
    StreamingRun,
    replay,
)
from sparkbeam.runners.spark.plan.ancestry import ancestors
from sparkbeam.runners.spark.plan.keys import INVALID_ROWS, ROWS, MetricKey, Observation
from sparkbeam.runners.spark.plan.queries import refuse_query
from sparkbeam.runners.spark.session.engine_errors import spark_errors
from sparkbeam.runners.spark.translate.observed import (
    derived_watermarks,
    streaming_watermarks,
    watermark_estimates,
)
from sparkbeam.runners.spark.translate.sources import sink_of
from sparkbeam.schema import Row
from sparkbeam.transforms.connectors import ForEachBatch
from sparkbeam.transforms.files import WriteFiles
from sparkbeam.transforms.join import Join
from sparkbeam.transforms.late import DroppedRows
from sparkbeam.transforms.union import Union
from sparkbeam.transforms.watermark import WithWatermark

AWAIT_POLL_SECONDS = 1.0
"""How often `await_termination` looks at the queries it is not waiting on: a query that
failed there stops the run within this time."""


def _filtered_out(counts: dict[str, int], node_id: int) -> int:
    """Rows into the late-row filter of node `node_id` minus rows out of it (on all its
    inputs), over the micro-batches; 0 where it has none."""

    def total(kind: str) -> int:
        keys = {key: MetricKey.parse(key) for key in counts}
        return sum(
            counts[key]
            for key, parsed in keys.items()
            if parsed is not None
            and parsed.field == ROWS
            and (parsed.observation.kind, parsed.observation.node_id) == (kind, node_id)
        )

    return total("in") - total("out")


def _is_filtered_rows(key: str, node_id: int) -> bool:
    """Whether metric `key` counts rows out of node `node_id`'s late-row filter."""
    parsed = MetricKey.parse(key)
    return (
        parsed is not None
        and parsed.field == ROWS
        and parsed.observation.kind == "out"
        and parsed.observation.node_id == node_id
    )


def _of_node(key: str, node_id: int) -> bool:
    """Whether metric `key` is one of node `node_id`'s observations."""
    parsed = MetricKey.parse(key)
    return parsed is not None and parsed.observation.node_id == node_id


WORKER_NOT_BACK = "Python worker failed to connect back"
"""Spark gives a Python process it starts a fixed 10 seconds to connect back; on a loaded
machine the one a `transformWithState` query starts on the driver to plan its state
(pre-init) can miss that, and nothing retries it (tasks are retried). A replayed run has
no state of its own (fresh checkpoint, same epochs), so the runner runs it again once."""

if TYPE_CHECKING:
    from sparkbeam.pipeline import PCollection, Pipeline


class SparkStreamingResult(ResultViews):
    """The results of an unbounded pipeline: each PCollection's query runs when first asked for.

    A query replays every epoch of the sources, one micro-batch per epoch,
    then the end-of-input flush; `collect_by_epoch` gives the rows each epoch
    (its data batch and no-data batch) emitted, then those of the flush.
    """

    def __init__(
        self,
        pipeline: Pipeline,
        session: Callable[[], SparkSession],
        staging: str | None = None,
    ) -> None:
        self.pipeline = pipeline
        self.node_count = len(pipeline.nodes)
        self._session = session
        self._spark: SparkSession | None = None
        self.staging = staging
        """Where runs over replayed sources keep their epoch files (`SparkRunner`)."""
        self.runs: dict[int, StreamingRun] = {}
        self.sinks: dict[int, StreamingRun] = {}
        """The production queries, one per sink (`WriteFiles`, `ForEachBatch`)."""
        self.live_stages: LiveStages | None = None
        """The stage queries of live merges, shared by the sinks (`live_merges`)."""

    @property
    def spark(self) -> SparkSession:
        """The session the queries run on (`open_session`)."""
        return self.open_session()

    def open_session(self) -> SparkSession:
        """Get (or start) the session, once: `p.run()` does where the run has sinks or the
        runner has its session already; else the first collected PCollection's queries do,
        once the plan has not refused them (no Spark starts for a refused one)."""
        if self._spark is None:
            self._spark = self._session()
        return self._spark

    def start_sinks(self, checkpoint_location: str | None, trigger: str | None) -> None:
        """One query per sink. Over replayed sources (`TestStream`, `Create`) it runs every
        epoch and the end-of-input flush, then stops; over live ones (`ReadFromSpark`,
        `ReadFiles(streaming=True)`) it is started and left running. Every sink's queries are
        planned and translated before any starts, so a refusal leaves nothing started."""
        planned: list[tuple[Node, StreamingRun]] = []
        self.live_stages = LiveStages(self.spark, checkpoint_location, self.staging)
        try:
            for node in self.pipeline.nodes:
                if not isinstance(node.transform, (WriteFiles, ForEachBatch)):
                    continue
                directory = None
                if checkpoint_location is not None:
                    directory = join(checkpoint_location, slug(node.label))
                run = StreamingRun(
                    self.spark,
                    self.pipeline.nodes,
                    node,
                    sink=sink_of(node),
                    directory=directory,
                    live=True,
                    trigger=trigger,
                    staging=self.staging,
                    shared=self.live_stages,
                )
                planned.append((node, run))
                run.translate()
            for node, run in planned:  # every run: an earlier one may have written the path
                written = node.transform
                fresh = not run.resumed
                if isinstance(written, WriteFiles) and written.mode == "error" and fresh:
                    refuse_existing_output(node.label, written.path, run.paths)
        except BaseException:
            for _, run in planned:
                run.stop()
            self.live_stages.cleanup()
            raise
        for node, run in planned:
            transform = node.transform
            # A query resumed from its checkpoint appends instead.
            fresh = not run.resumed
            if isinstance(transform, WriteFiles) and transform.mode == "overwrite" and fresh:
                run.paths.delete(transform.path)
            with spark_errors(self.pipeline.nodes, node):
                run.execute()
            self.sinks[node.id] = run
        self.live_stages.files.start()

    @property
    def queries(self) -> list[Any]:
        """The running Spark `StreamingQuery`s of live sinks, each once, every stage query
        before the final queries that read it."""
        queries = [s.query for run in self.sinks.values() if run.live for s in run.stages]
        return list({id(query): query for query in queries}.values())

    def process_all_available(self) -> None:
        """Block until the live queries have processed every row available now (tests), then
        delete the stage files of live merges that every reader committed. A query that
        failed stops the run (`_fail`)."""
        say("processing what the live sources hold now")
        for query in self.queries:
            try:
                query.processAllAvailable()
            except Exception as exc:
                self._fail(query, exc)
        if self.live_stages is not None:
            self.live_stages.files.clean()

    def await_termination(self, timeout: float | None = None) -> bool:
        """Wait until every live query has stopped (True), or `timeout` seconds in all (False,
        the queries still running). A query that fails stops the run: the others are stopped
        (their checkpoints stay) and its error is raised (`_fail`), so a job waiting here
        ends, for its scheduler to start it again, rather than wait on with a sink stopped."""
        say("waiting for the live queries to end")
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            active = []
            for query in self.queries:
                if query.isActive:
                    active.append(query)
                elif query.exception() is not None:
                    self._fail(query)
            if not active:
                return True
            wait = AWAIT_POLL_SECONDS
            if deadline is not None:
                wait = min(wait, deadline - time.monotonic())
                if wait <= 0:
                    return False
            try:
                active[0].awaitTermination(wait)  # wakes as soon as that query ends
            except Exception as exc:  # it failed
                self._fail(active[0], exc)

    def _fail(self, query: Any, error: Exception | None = None) -> NoReturn:
        """`query` failed (raising `error`, or, stopped, its own): stop every query of the
        run (a pipeline fails as a whole, as a Beam or Flink job does) and raise the error,
        named by the transforms it concerns."""
        self.stop()
        with spark_errors(self.pipeline.nodes):
            if error is not None:
                raise error
            query.awaitTermination()  # raises the query's error
        raise PipelineError(f"a query of the run failed: {query.exception()}")

    def stop(self) -> None:
        """Stop the live queries; their checkpoints stay, to start again from."""
        if self.sinks:
            say("stopping %s", counted(len(self.sinks), "sink query", "sink queries"))
        for run in self.sinks.values():
            run.stop()
        if self.live_stages is not None:
            self.live_stages.cleanup()

    def _run(self, pcoll: PCollection) -> StreamingRun:
        return self._run_node(self.of_run(pcoll).node)

    def _run_node(self, node: Node) -> StreamingRun:
        """The query of `node` over the replayed epochs, run once (`_run_together`)."""
        if node.id not in self.runs:
            self._run_together([node])
        return self.runs[node.id]

    def _run_together(self, targets: Sequence[Node]) -> None:
        """The queries of `targets` over the replayed epochs, fed together (`replay`: their
        stage queries shared), once; and once more from the start when Spark's Python
        worker did not start in time (`WORKER_NOT_BACK`)."""
        nodes = self.pipeline.nodes
        for node in targets:
            refuse_query(nodes, node, sink=False, live=False)
        for attempt in range(2):
            together = ReplayedStages(self.spark, self.staging) if len(targets) > 1 else None
            runs: list[StreamingRun] = []
            try:
                with spark_errors(nodes, targets[0] if len(targets) == 1 else None):
                    for node in targets:
                        with spark_errors(nodes, node):
                            run = StreamingRun(
                                self.spark, nodes, node, staging=self.staging, together=together
                            )
                            runs.append(run)
                            run.translate()
                    replay(runs)
                break
            except Exception as exc:
                for run in runs:
                    run.stop()
                if attempt or WORKER_NOT_BACK not in f"{exc} {getattr(exc, 'spark_error', '')}":
                    raise
            finally:
                if together is not None:
                    together.cleanup()
        for node, run in zip(targets, runs, strict=True):
            self.runs[node.id] = run

    def prepare(self, *pcolls: PCollection) -> None:
        """Run the queries of `pcolls` side by side, so that collecting them is immediate.

        Each query spends most of a micro-batch waiting on Spark's scheduling,
        so several at once take little longer than one.
        """
        for pcoll in pcolls:
            self.of_run(pcoll)
        self._prepare_nodes(list({pcoll.node.id: pcoll.node for pcoll in pcolls}.values()))

    def collect(self, pcoll: PCollection) -> list[Row]:
        return [row for epoch in self.collect_by_epoch(pcoll) for row in epoch]

    def collect_by_epoch(self, pcoll: PCollection) -> list[list[Row]]:
        return self._run(pcoll).epochs

    def _counts(self, pcoll: PCollection) -> dict[str, int]:
        """The observed counts of a query that ran `pcoll`'s late-row filter (its own query's
        when none did yet); a live sink's query counts the micro-batches run so far."""
        self.of_run(pcoll)

        # A query of a WithWatermark's late rows runs only its input: not that one.
        for run in [*self.sinks.values(), *self.runs.values()]:
            metrics = run.metrics
            if any(_is_filtered_rows(key, pcoll.node.id) for key in metrics):
                return metrics
        return self._run(pcoll).metrics

    def late_count(self, pcoll: PCollection) -> int:
        """Rows into the late-row filter minus rows out of it, summed over micro-batches.

        A `Union` or `Join` under `policy="min"` with no idle input upstream
        drops none (no row is below its watermark) and runs no query for it."""
        node = self.of_run(pcoll).node
        transform = node.transform
        if not isinstance(transform, (WithWatermark, Union, Join)):
            raise PipelineError(
                f"{node.label}: late rows are counted by WithWatermark (and by Union and "
                "Join); pass the PCollection that .with_watermark(...) returned"
            )
        if isinstance(transform, (Union, Join)) and transform.policy == "min":
            nodes = self.pipeline.nodes
            upstream = [nodes[i].transform for i in ancestors(nodes, node)]
            if not any(isinstance(t, WithWatermark) and t.idle_after is not None for t in upstream):
                return 0
        return _filtered_out(self._counts(pcoll), node.id)

    def invalid_count(self, pcoll: PCollection) -> int:
        if not isinstance(self.of_run(pcoll).node.transform, WithWatermark):
            raise PipelineError(
                f"{pcoll.node.label}: rows with no event time are counted by WithWatermark; "
                "pass the PCollection that .with_watermark(...) returned"
            )
        return self._counts(pcoll).get(Observation("in", pcoll.node.id).field(INVALID_ROWS), 0)

    def metrics(self) -> PipelineMetrics:
        """Per transform (by label, in graph order): rows in and out, drops, watermarks, lag.

        Read from the queries that ran (the sinks' and the collected
        PCollections'; a live query's counts so far), from Spark's observed
        metrics and `StreamingQueryProgress`: every query counts the rows each
        of its transforms emits and the largest value of each watermarked
        column. Where those queries already count every transform, nothing
        runs. Otherwise this runs one more pass: for the transforms no query
        counted yet, the queries of some of the pipeline's last PCollections
        (greedily, the one reading the most of them first, until all are
        read: `_uncounted_leaves`), side by side, each replaying every epoch
        once. A query that ran is never run again, and a transform only a
        live query reads is reported as that query counted it so far.
        Watermarks are Spark's after the last epoch before the end of
        input, moved back through each column's judge and derivation, as the
        direct runner reports them; state sizes are None (Spark's state
        operators do not map one to one onto transforms).
        """
        nodes = self.pipeline.nodes
        found = self._observed()
        leaves = self._uncounted_leaves(found[0])
        if leaves:
            self._prepare_nodes(leaves)
            found = self._observed()
        counts, marks = found
        out = PipelineMetrics()
        for node in nodes:
            rows_out = counts.get(Observation("n", node.id).rows(), 0)
            rows_in = sum(counts.get(Observation("n", i).rows(), 0) for i in node.inputs)
            if isinstance(node.transform, DroppedRows):
                rows_in = rows_out
            invalid = counts.get(Observation("in", node.id).field(INVALID_ROWS), 0)
            late = 0
            if isinstance(node.transform, (WithWatermark, Union)):
                late = rows_in - rows_out - invalid
            elif isinstance(node.transform, Join):  # a join's rows out are not its rows in
                late = _filtered_out(counts, node.id)
            watermarks, lags = streaming_watermarks(node, counts, marks.get(node.id))
            upstream = None
            if len(node.inputs) == 1 and not isinstance(node.transform, WithWatermark):
                upstream = out.get(nodes[node.inputs[0]].label)
                if upstream is not None:
                    derived, lagging = derived_watermarks(node, upstream.watermarks, counts)
                    watermarks, lags = {**watermarks, **derived}, {**lags, **lagging}
            estimates = watermark_estimates(
                node, watermarks, {} if upstream is None else upstream.watermark_estimates, counts
            )
            out[node.label] = TransformMetrics(
                rows_in=rows_in,
                rows_out=rows_out,
                late_rows=late,
                invalid_rows=invalid,
                watermarks=watermarks,
                watermark_lag=lags,
                watermark_estimates=estimates,
            )
        return out

    def _uncounted_leaves(self, counts: dict[str, int]) -> list[Node]:
        """Last PCollections whose queries read every transform not in `counts` (the one reading
        the most of them first), never one whose query ran (collected, or a sink); a transform
        that only a live query reads is left to it (it counts as its batches come)."""
        nodes = self.pipeline.nodes
        ran = set(self.runs) | set(self.sinks)
        live = set().union(
            *(ancestors(nodes, nodes[n]) for n, run in self.sinks.items() if run.live)
        )
        missing = {n.id for n in nodes if Observation("n", n.id).rows() not in counts} - live
        consumed = {i for node in nodes for i in node.inputs}
        reach = {n.id: ancestors(nodes, n) for n in nodes if n.id not in consumed | ran}
        chosen: list[Node] = []
        while missing:
            best = max(reach, key=lambda leaf: (len(reach[leaf] & missing), -leaf), default=None)
            if best is None or not reach[best] & missing:
                break  # what is left no query counts (none reads it)
            chosen.append(nodes[best])
            missing -= reach.pop(best)
        return chosen

    def _observed(self) -> tuple[dict[str, int], dict[int, tuple[int, Mapping[str, Judge]]]]:
        """Each node's observed counts and Spark watermark, from the first query that ran it."""
        counts: dict[str, int] = {}
        marks: dict[int, tuple[int, Mapping[str, Judge]]] = {}
        for run in [*self.sinks.values(), *self.runs.values()]:
            metrics = run.metrics
            watermarks = run.watermarks()
            for node in self.pipeline.nodes:
                rows = Observation("n", node.id).rows()
                if rows in counts or rows not in metrics:
                    continue
                counts.update({k: v for k, v in metrics.items() if _of_node(k, node.id)})
                if node.id in watermarks:
                    marks[node.id] = watermarks[node.id]
        return counts, marks

    def _prepare_nodes(self, nodes: Sequence[Node]) -> None:
        """Run the queries of `nodes`: fed together (`_run_together`), or where watermark
        alignment holds sources back (each run decides that itself), `SIDE_BY_SIDE` runs at
        a time."""
        waiting = [node for node in nodes if node.id not in self.runs]
        if not waiting:
            return
        if AlignmentGraph.of(self.pipeline.nodes) is None:
            self._run_together(waiting)
            return
        workers = max(1, min(len(waiting), SIDE_BY_SIDE))
        with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
            for future in [pool.submit(self._run_node, node) for node in waiting]:
                future.result()
