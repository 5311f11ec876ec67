"""`SparkRunner`: the pipeline as a PySpark job on any Spark cluster (`local[*]` by default)."""

from __future__ import annotations

import concurrent.futures
import contextlib
import datetime as _dt
import io
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sparkbeam.arrow import from_arrow
from sparkbeam.errors import DataError, PipelineError
from sparkbeam.graph import Node
from sparkbeam.metrics import TransformMetrics
from sparkbeam.runners.spark.late_filter import mark as mark_of
from sparkbeam.runners.spark.limits import refuse_streaming_limits
from sparkbeam.runners.spark.python_functions import DATA_ERROR_MARK
from sparkbeam.runners.spark.streaming import (
    Judge,
    StreamingRun,
    StreamingTranslation,
    ancestors,
    sink_of,
)
from sparkbeam.runners.spark.translate import Translation, file_options
from sparkbeam.schema import Row, columns_to_rows
from sparkbeam.time import ONE_MICROSECOND, from_micros
from sparkbeam.transforms.connectors import ForEachBatch
from sparkbeam.transforms.files import ReadFiles, WriteFiles
from sparkbeam.transforms.join import Join
from sparkbeam.transforms.late import DroppedRows
from sparkbeam.transforms.union import Union
from sparkbeam.transforms.watermark import WithWatermark

if TYPE_CHECKING:
    from sparkbeam.pipeline import PCollection, Pipeline

DEFAULT_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.ui.showConsoleProgress": "false",
}


class SparkRunner:
    """Translates the pipeline into PySpark.

    Uses `spark` when given, else starts (or reuses) a session on `master`
    with `conf` (session time zone UTC). Bounded input runs as a batch job:
    Spark computes a PCollection when it is collected (or written). The
    settings a streaming query needs (`STATE_STORE`, ...) are set on the
    session only while the query starts, then put back as they were.
    """

    def __init__(
        self,
        spark: SparkSession | None = None,
        master: str = "local[*]",
        conf: Mapping[str, str] | None = None,
        checkpoint_location: str | os.PathLike[str] | None = None,
        trigger: str | None = None,
    ) -> None:
        self._spark = spark
        self.master = master
        self.conf = dict(conf or {})
        self.checkpoint_location = (
            None if checkpoint_location is None else os.fspath(checkpoint_location)
        )
        """Where the streaming queries of sinks keep their checkpoints, one directory per sink
        (by its label): a query started again on the same location goes on where it stopped."""
        self.trigger = trigger
        """Processing-time trigger interval of live queries (`"10 seconds"`); None: Spark's
        default, a micro-batch as soon as the last one ended."""

    @property
    def spark(self) -> SparkSession:
        if self._spark is None:
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            builder = SparkSession.builder.master(self.master).appName("sparkbeam")
            for key, value in {**DEFAULT_CONF, **self.conf}.items():
                builder = builder.config(key, value)
            self._spark = builder.getOrCreate()
        return self._spark

    def run(self, pipeline: Pipeline) -> SparkResult | SparkStreamingResult:
        if any(not node.info.bounded for node in pipeline.nodes):
            refuse_streaming_limits(pipeline.nodes)
            check = StreamingTranslation(self.spark, pipeline.nodes, tempfile.mkdtemp())
            try:
                check.run()  # refuses what Spark cannot do now, before any query runs
            finally:
                shutil.rmtree(check.directory, ignore_errors=True)
            result = SparkStreamingResult(pipeline, self.spark)
            result.start_sinks(self.checkpoint_location, self.trigger)
            return result
        translation = Translation(self.spark, pipeline.nodes)
        translation.run()
        for node, frame in translation.writes:
            transform = node.transform
            if isinstance(transform, ForEachBatch):
                schema = node.info.schema
                with spark_errors():
                    table = frame.toArrow()
                rows = columns_to_rows(from_arrow(table, schema), schema)
                if rows:
                    transform.fn(rows, 0)
                continue
            assert isinstance(transform, WriteFiles)
            writer = frame.write.mode("overwrite" if transform.mode == "overwrite" else "error")
            writer = writer.format(transform.format)
            writer = writer.options(**file_options(transform.format, write=True))
            with spark_errors():
                writer.save(transform.path)
        return SparkResult(pipeline, translation)


_DATA_ERROR = re.compile(re.escape(DATA_ERROR_MARK) + r"(.*?)(?:\s*SQLSTATE: \w+)?\s*$", re.M)
_ENGINE_LINE = re.compile(r"\[[\w.]+\]\s*(.*?)\s*(?:SQLSTATE: \w+)?\s*$")
_ENGINE_ERRORS: list[tuple[tuple[str, ...], type[ValueError], str]] = [
    (
        ("PARQUET_COLUMN_DATA_TYPE_MISMATCH", "SCHEMA_COLUMN_CONVERT"),
        DataError,
        "ReadFiles: a parquet file's column type differs from the schema (a file added after "
        "the pipeline was built?)",
    ),
    (
        (
            "MALFORMED_RECORD",
            "FAILFAST",
            "MALFORMED_CSV_RECORD",
            "CANNOT_PARSE",
            "FAILED_READ_FILE",
        ),
        DataError,
        "ReadFiles: a file holds a value that does not match schema= (fix the file or the schema)",
    ),
    (
        ("PATH_NOT_FOUND",),
        PipelineError,
        "ReadFiles: the path no longer exists; check it",
    ),
    (
        ("ModuleNotFoundError",),
        PipelineError,
        "a function of the pipeline (Map, Filter, CombineFn) lives in a module Spark's "
        "Python workers cannot import; define it in an installed module, or register its "
        "module with cloudpickle.register_pickle_by_value",
    ),
]


@contextlib.contextmanager
def spark_errors(labels: Sequence[str] = ()) -> Iterator[None]:
    """Errors of a Spark job as sparkbeam's: a `DataError` raised in a Python worker, and
    the engine's errors about files and functions, named by `labels` (the sources)."""
    try:
        yield
    except DataError:
        raise
    except Exception as exc:
        text = str(exc)
        for match in _DATA_ERROR.finditer(text):
            # A streaming query's error also prints its plan, where the check's message
            # appears unevaluated: only a message with its row in it was raised.
            if "to_json(struct(" not in match.group(1):
                raise DataError(match.group(1).strip()) from None
        for marks, kind, advice in _ENGINE_ERRORS:
            lines = [line.strip() for line in text.splitlines() if any(m in line for m in marks)]
            if lines:
                where = f"{', '.join(labels)}: " if labels else ""
                said = _ENGINE_LINE.search(lines[0])
                detail = said.group(1) if said else lines[0]
                raise kind(f"{where}{advice}. Spark: {detail[:600]}") from None
        raise


def _slug(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", label).strip("_") or "sink"


SIDE_BY_SIDE = 3
"""How many queries `prepare` runs at once: each spends most of a micro-batch waiting on
Spark's scheduling, but each also starts Python workers (functions, `transformWithState`),
and too many starting at once on a small machine miss Spark's connect-back timeout."""


class SparkStreamingResult:
    """The results of an unbounded pipeline: each PCollection's query runs when first asked for.

    A query replays every epoch of the sources, one micro-batch per epoch,
    then the end-of-input flush; `collect_by_epoch` gives the rows each epoch
    (its data batch and no-data batch) emitted, then those of the flush.
    """

    def __init__(self, pipeline: Pipeline, spark: SparkSession) -> None:
        self.pipeline = pipeline
        self.spark = spark
        self.runs: dict[int, StreamingRun] = {}
        self.sinks: dict[int, StreamingRun] = {}
        """The production queries, one per sink (`WriteFiles`, `ForEachBatch`)."""

    def start_sinks(self, checkpoint_location: str | None, trigger: str | None) -> None:
        """One query per sink. Over replayed sources (`TestStream`, `Create`) it runs every
        epoch and the end-of-input flush, then stops; over live ones (`ReadFromSpark`,
        `ReadFiles(streaming=True)`) it is started and left running."""
        for node in self.pipeline.nodes:
            if not isinstance(node.transform, (WriteFiles, ForEachBatch)):
                continue
            directory = None
            if checkpoint_location is not None:
                directory = os.path.join(checkpoint_location, _slug(node.label))
            run = StreamingRun(
                self.spark,
                self.pipeline.nodes,
                node,
                sink=sink_of(node),
                directory=directory,
                live=True,
                trigger=trigger,
            )
            transform = node.transform
            if isinstance(transform, WriteFiles) and transform.mode == "overwrite":
                fresh = not run.resumed and os.path.exists(transform.path)
                if fresh:  # a query resumed from its checkpoint appends instead
                    shutil.rmtree(transform.path)
            run.translate()
            with spark_errors():
                run.execute()
            self.sinks[node.id] = run

    @property
    def queries(self) -> list[Any]:
        """The running Spark `StreamingQuery`s of live sinks."""
        return [s.query for run in self.sinks.values() if run.live for s in run.stages]

    def process_all_available(self) -> None:
        """Block until the live queries have processed every row available now (tests)."""
        with spark_errors():
            for query in self.queries:
                query.processAllAvailable()

    def await_termination(self, timeout: float | None = None) -> bool:
        """Wait for the live queries to end (all of them, within `timeout` seconds each)."""
        with spark_errors():
            return all(query.awaitTermination(timeout) is not False for query in self.queries)

    def stop(self) -> None:
        """Stop the live queries; their checkpoints stay, to start again from."""
        for run in self.sinks.values():
            run.stop()

    def _run(self, pcoll: PCollection) -> StreamingRun:
        if pcoll.pipeline is not self.pipeline:
            raise PipelineError(f"{pcoll.node.label}: that PCollection is of another pipeline")
        return self._run_node(pcoll.node)

    def _run_node(self, node: Node) -> StreamingRun:
        run = self.runs.get(node.id)
        if run is None:
            run = StreamingRun(self.spark, self.pipeline.nodes, node)
            run.translate()
            with spark_errors():
                run.execute()
            self.runs[node.id] = run
        return run

    def prepare(self, *pcolls: PCollection) -> None:
        """Run the queries of `pcolls` side by side, so that collecting them is immediate.

        Each query spends most of a micro-batch waiting on Spark's scheduling,
        so several at once take little longer than one.
        """
        for pcoll in pcolls:
            if pcoll.pipeline is not self.pipeline:
                raise PipelineError(f"{pcoll.node.label}: that PCollection is of another pipeline")
        self._prepare_nodes(list({pcoll.node.id: pcoll.node for pcoll in pcolls}.values()))

    def collect(self, pcoll: PCollection) -> list[Row]:
        return [row for epoch in self.collect_by_epoch(pcoll) for row in epoch]

    def collect_by_epoch(self, pcoll: PCollection) -> list[list[Row]]:
        return self._run(pcoll).epochs

    def _counts(self, pcoll: PCollection) -> dict[str, int]:
        """The observed counts of a query that ran `pcoll`'s late-row filter (its own query's
        when none did yet); a live sink's query counts the micro-batches run so far."""
        if pcoll.pipeline is not self.pipeline:
            raise PipelineError(f"{pcoll.node.label}: that PCollection is of another pipeline")
        filtered = re.compile(rf"out_{pcoll.node.id}(_\d)?\.rows")
        # A query of a WithWatermark's late rows runs only its input: not that one.
        for run in [*self.sinks.values(), *self.runs.values()]:
            metrics = run.metrics
            if any(filtered.fullmatch(key) for key in metrics):
                return metrics
        return self._run(pcoll).metrics

    def late_count(self, pcoll: PCollection) -> int:
        """Rows into the late-row filter minus rows out of it, summed over micro-batches.

        A `Union` or `Join` under `policy="min"` with no idle input upstream
        drops none (no row is below its watermark) and runs no query for it."""
        node = pcoll.node
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
        counts = self._counts(pcoll)

        def total(kind: str) -> int:
            mine = re.compile(rf"{kind}_{node.id}(_\d)?\.rows")
            return sum(value for key, value in counts.items() if mine.fullmatch(key))

        return total("in") - total("out")

    def invalid_count(self, pcoll: PCollection) -> int:
        if not isinstance(pcoll.node.transform, WithWatermark):
            raise PipelineError(
                f"{pcoll.node.label}: rows with no event time are counted by WithWatermark; "
                "pass the PCollection that .with_watermark(...) returned"
            )
        return self._counts(pcoll).get(f"in_{pcoll.node.id}.invalid", 0)

    def metrics(self) -> dict[str, TransformMetrics]:
        """Per transform (by label, in graph order): rows in and out, drops, watermarks, lag.

        Read from the queries that ran (the sinks' and the collected
        PCollections'; a live query's counts so far), from Spark's observed
        metrics and `StreamingQueryProgress`: every query counts the rows each
        of its transforms emits and the largest value of each watermarked
        column. A transform no query ran yet is counted by running the
        queries of the pipeline's last PCollections (each replays every
        epoch). Watermarks are Spark's after the last epoch before the end of
        input, moved back through each column's judge and derivation, as the
        direct runner reports them; state sizes are None (Spark's state
        operators do not map one to one onto transforms).
        """
        nodes = self.pipeline.nodes
        found = self._observed()
        missing = [n for n in nodes if f"n_{n.id}.rows" not in found[0]]
        if missing:
            consumed = {i for node in nodes for i in node.inputs}
            leaves = [n for n in nodes if n.id not in consumed]
            self._prepare_nodes(leaves)
            found = self._observed()
        counts, marks = found
        out: dict[str, TransformMetrics] = {}
        for node in nodes:
            rows_out = counts.get(f"n_{node.id}.rows", 0)
            rows_in = sum(counts.get(f"n_{i}.rows", 0) for i in node.inputs)
            if isinstance(node.transform, DroppedRows):
                rows_in = rows_out
            invalid = counts.get(f"in_{node.id}.invalid", 0)
            late = 0
            if isinstance(node.transform, (WithWatermark, Union, Join)):
                late = rows_in - rows_out - invalid
            watermarks, lags = _streaming_watermarks(node, counts, marks.get(node.id))
            out[node.label] = TransformMetrics(
                rows_in=rows_in,
                rows_out=rows_out,
                late_rows=late,
                invalid_rows=invalid,
                watermarks=watermarks,
                watermark_lag=lags,
            )
        return out

    def _observed(self) -> tuple[dict[str, int], dict[int, tuple[int, dict[str, Judge]]]]:
        """Each node's observed counts and Spark watermark, from the first query that ran it."""
        counts: dict[str, int] = {}
        marks: dict[int, tuple[int, dict[str, Judge]]] = {}
        for run in [*self.sinks.values(), *self.runs.values()]:
            metrics = run.metrics
            watermarks = run.watermarks()
            for node in self.pipeline.nodes:
                if f"n_{node.id}.rows" in counts or f"n_{node.id}.rows" not in metrics:
                    continue
                mine = re.compile(rf"(n|in|out)_{node.id}(_\d)?\.\w+")
                counts.update({k: v for k, v in metrics.items() if mine.fullmatch(k)})
                if node.id in watermarks:
                    marks[node.id] = watermarks[node.id]
        return counts, marks

    def _prepare_nodes(self, nodes: Sequence[Node]) -> None:
        """Run the queries of `nodes`, `SIDE_BY_SIDE` at a time."""
        waiting = [node for node in nodes if node.id not in self.runs]
        if len(waiting) == 1:
            self._run_node(waiting[0])
            return
        workers = max(1, min(len(waiting), SIDE_BY_SIDE))
        with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
            for future in [pool.submit(self._run_node, node) for node in waiting]:
                future.result()


def _streaming_watermarks(
    node: Node, counts: Mapping[str, int], mark: tuple[int, dict[str, Judge]] | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A node's watermark and lag per column from Spark's watermark `mark` (ms) and judges."""
    if mark is None:
        return {}, {}
    watermark_ms, judges = mark
    watermarks: dict[str, Any] = {}
    lags: dict[str, Any] = {}
    schema = node.info.schema
    for i, column in enumerate(sorted(node.info.watermarked)):
        judge = judges.get(column)
        if judge is None:
            continue
        kind = schema.type_of(column)
        late = judge.late(column)
        spark = watermark_ms * 1000 if late.is_datetime else watermark_ms
        value = mark_of(spark - late.shift, late.steps)
        latest = counts.get(f"n_{node.id}.latest_{i}")
        if kind is _dt.datetime:
            watermarks[column] = from_micros(value)
            if latest is not None:
                lags[column] = (latest - value) * ONE_MICROSECOND
        else:
            watermarks[column] = value
            if latest is not None:
                lags[column] = latest - value
    return watermarks, lags


class SparkResult:
    """The DataFrames of a translated pipeline, and what a run reports."""

    def __init__(self, pipeline: Pipeline, translation: Translation) -> None:
        self.pipeline = pipeline
        self.translation = translation
        self._metrics: dict[str, TransformMetrics] | None = None

    def to_dataframe(self, pcoll: PCollection) -> DataFrame:
        """The Spark DataFrame of `pcoll`, to go on with in Spark."""
        if pcoll.pipeline is not self.pipeline:
            raise PipelineError(f"{pcoll.node.label}: that PCollection is of another pipeline")
        return self.translation.frames[pcoll.node.id]

    def collect(self, pcoll: PCollection) -> list[Row]:
        """Every row of `pcoll`, as the same Python values the direct runner gives."""
        schema = pcoll.schema
        with spark_errors(self._sources()):
            table = self.to_dataframe(pcoll).toArrow()
        return columns_to_rows(from_arrow(table, schema), schema)

    def _sources(self) -> list[str]:
        return [n.label for n in self.pipeline.nodes if isinstance(n.transform, ReadFiles)]

    def explain(self, pcoll: PCollection, mode: str = "formatted") -> str:
        """Spark's plan for `pcoll`."""
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            self.to_dataframe(pcoll).explain(mode=mode)
        return out.getvalue()

    def _watermark_node(self, pcoll: PCollection) -> Any:
        if not isinstance(pcoll.node.transform, WithWatermark):
            raise PipelineError(
                f"{pcoll.node.label}: rows with no event time are counted by WithWatermark; "
                "pass the PCollection that .with_watermark(...) returned"
            )
        return pcoll.node

    def late_count(self, pcoll: PCollection) -> int:
        """Rows dropped as late. Bounded input is one epoch, judged before any watermark: 0."""
        if not isinstance(pcoll.node.transform, (WithWatermark, Union, Join)):
            raise PipelineError(
                f"{pcoll.node.label}: late rows are counted by WithWatermark (and by Union and "
                "Join); pass the PCollection that .with_watermark(...) returned"
            )
        return 0

    def invalid_count(self, pcoll: PCollection) -> int:
        """Rows dropped by that `WithWatermark` because their event time was `None`."""
        node = self._watermark_node(pcoll)
        with spark_errors():
            return int(self.translation.invalid[node.id].count())

    def metrics(self) -> dict[str, TransformMetrics]:
        """Per transform (by label, in graph order): rows in and out, drops, watermarks, lag.

        Counted by Spark jobs when called (one per transform, cached). A batch
        job is one epoch: no late rows; the watermark of a `WithWatermark` is
        the one the direct runner reaches after its epoch (`floor_to_ms(max) -
        delay`), with its lag; other transforms report none (a batch plan
        carries no watermarks), and state sizes are None (a batch job keeps no
        state between epochs).
        """
        if self._metrics is None:
            self._metrics = self._measure()
        return dict(self._metrics)

    def _measure(self) -> dict[str, TransformMetrics]:
        nodes = self.pipeline.nodes
        frames = self.translation.frames
        with spark_errors(self._sources()):
            rows = [int(frames[node.id].count()) for node in nodes]
            out: dict[str, TransformMetrics] = {}
            for node in nodes:
                transform = node.transform
                rows_in = rows[node.id]
                if not isinstance(transform, DroppedRows):
                    rows_in = sum(rows[i] for i in node.inputs)
                invalid = 0
                marks: dict[str, Any] = {}
                lags: dict[str, Any] = {}
                if isinstance(transform, WithWatermark):
                    invalid = int(self.translation.invalid[node.id].count())
                    mark, lag = _batch_watermark(frames[node.id], transform, node)
                    if mark is not None:
                        marks[transform.column], lags[transform.column] = mark, lag
                out[node.label] = TransformMetrics(
                    rows_in=rows_in,
                    rows_out=rows[node.id],
                    invalid_rows=invalid,
                    watermarks=marks,
                    watermark_lag=lags,
                )
        return out


def _batch_watermark(frame: DataFrame, transform: WithWatermark, node: Node) -> tuple[Any, Any]:
    """`(watermark, lag)` a `WithWatermark` reaches after one epoch, or `(None, None)`."""
    schema = node.info.schema
    kind = schema.type_of(transform.column)
    is_datetime = kind is _dt.datetime
    column = F.col(transform.column)
    (top,) = frame.agg(F.max(F.unix_micros(column) if is_datetime else column)).first() or (None,)
    if top is None:
        return None, None
    mark = transform.watermark_function(schema)(int(top))
    if is_datetime:
        return from_micros(mark), (int(top) - mark) * ONE_MICROSECOND
    return mark, int(top) - mark
