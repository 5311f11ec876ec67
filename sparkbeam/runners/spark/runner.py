"""`SparkRunner`: the pipeline as a PySpark job on any Spark cluster (`local[*]` by default)."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

from pyspark.sql import SparkSession

from sparkbeam.arrow import from_arrow
from sparkbeam.errors import PipelineError
from sparkbeam.runners.shared.writes import refuse_existing_outputs, refuse_overlapping_writes
from sparkbeam.runners.spark import plan
from sparkbeam.runners.spark.execute.progress import Clock, say, show_progress
from sparkbeam.runners.spark.parts.arrow import require_spark_types
from sparkbeam.runners.spark.results.results import SparkResult
from sparkbeam.runners.spark.results.streaming_results import SparkStreamingResult
from sparkbeam.runners.spark.session.engine_errors import spark_errors
from sparkbeam.runners.spark.session.options import (
    check_conf,
    check_location,
    check_master,
    check_spark,
    check_trigger,
    start_failure,
)
from sparkbeam.runners.spark.session.paths import SparkPaths
from sparkbeam.runners.spark.session.quiet import quiet_session, session_conf
from sparkbeam.runners.spark.session.sessions import (
    active_session,
    differing_conf,
    own_conf,
    unapplied_conf,
    warn_crowded_partitions,
)
from sparkbeam.runners.spark.session.shipping import ship_package
from sparkbeam.runners.spark.translate.families import Translation
from sparkbeam.runners.spark.translate.sources import file_options, nullable
from sparkbeam.schema import columns_to_rows
from sparkbeam.transforms.connectors import ForEachBatch, call_batch
from sparkbeam.transforms.files import WriteFiles

if TYPE_CHECKING:
    from sparkbeam.pipeline import Pipeline


DEFAULT_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.ui.showConsoleProgress": "false",
}


class SparkRunner:
    """Translates the pipeline into PySpark.

    Every option is checked when the runner is made (`options`: the form of
    `master`, `conf` values Spark's type for them is known of, `trigger`,
    the locations), without starting Spark. Uses `spark` when given, as it
    is: a `conf` that differs from its settings is refused. Otherwise, when a session is already
    active (the one `SparkSession.builder.getOrCreate()` would return), it
    uses that one, also as it is: the runner did not start it, so it changes
    none of its settings (a `conf` that differs from them is reported in a
    warning). Otherwise it starts a session on `master` with `conf` (session
    time zone UTC and, on a local master, one shuffle partition per core
    unless `conf` names `spark.sql.shuffle.partitions`: `sessions`). Bounded
    input runs as a batch job: Spark computes a PCollection when it is
    collected (or written).
    """

    def __init__(
        self,
        spark: SparkSession | None = None,
        master: str = "local[*]",
        conf: Mapping[str, str] | None = None,
        checkpoint_location: str | os.PathLike[str] | None = None,
        trigger: str | None = None,
        ship_package: bool = True,
        staging_location: str | os.PathLike[str] | None = None,
        progress: bool | None = None,
    ) -> None:
        check_spark(spark)
        self._spark = spark
        self.started_session = False
        """Whether the runner started its session itself (else it changes none of its
        settings: per-query settings are set only while each query starts)."""
        self.master = check_master(master)
        self.conf = check_conf(conf)
        if spark is not None and self.conf:
            differing = differing_conf(spark, self.conf)
            if differing:
                raise PipelineError(
                    "SparkRunner: conf= is not applied to a session passed with spark= (the "
                    "runner changes no setting of a session it did not start), and that "
                    f"session has {', '.join(differing)}; set them on it first "
                    "(spark.conf.set(key, value), or its builder), or leave spark= out for the "
                    "runner to start a session with conf"
                )
        self.checkpoint_location = check_location(checkpoint_location, "checkpoint_location")
        """Where the streaming queries of sinks keep their checkpoints, one directory per sink
        (by its label): a query started again on the same location goes on where it stopped."""
        self.trigger = check_trigger(trigger)
        """Processing-time trigger interval of live queries (`"10 seconds"`); None: Spark's
        default, a micro-batch as soon as the last one ended."""
        if not isinstance(ship_package, bool):
            raise PipelineError(f"SparkRunner: ship_package={ship_package!r}; use True or False")
        self.ship_package = ship_package
        """Whether to add this sparkbeam to the session's Python workers (`shipping`); turn it
        off where the cluster's Python has sparkbeam installed."""
        self.staging_location = check_location(staging_location, "staging_location")
        """Where the epoch files of replayed sources (`TestStream`, `Create`, `ReadFiles`
        collected) and the temporary checkpoints of their queries go: any URI Spark reaches.
        None: a local temporary directory, which only a local master can use (elsewhere
        replayed sources are refused, asking for this)."""
        if progress is not None and not isinstance(progress, bool):
            raise PipelineError(f"SparkRunner: progress={progress!r}; use True, False or None")
        self.progress = progress
        """Whether the runner's progress lines (starting Spark, each query, each replayed
        epoch) show on stderr (`progress`): None, when stderr is a terminal and no logging is
        configured for `sparkbeam`; True, also otherwise; False, only through `logging`."""
        self.paths = SparkPaths(lambda: self.spark)
        """Every path the runner touches, and those `ReadFiles`/`WriteFiles` ask about when
        applied (`sparkbeam.paths.current`): local ones on this machine, URIs through the
        session's Hadoop file systems (`runners.spark.paths`)."""

    @property
    def spark(self) -> SparkSession:
        if self._spark is None:
            active = active_session()
            if active is not None:
                unapplied_conf(active, self.conf)
                self._spark = active
                return active
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            builder = SparkSession.builder.master(self.master).appName("sparkbeam")
            settings = session_conf(own_conf(self.master, DEFAULT_CONF, self.conf), self.master)
            for key, value in settings.items():
                builder = builder.config(key, value)
            clock = Clock()
            say("starting Spark on %s (a JVM starts: some seconds)", self.master)
            try:
                self._spark = builder.getOrCreate()
            except Exception as exc:  # PySparkRuntimeError, Py4JJavaError, ...
                raise start_failure(self.master, self.conf, exc) from None
            quiet_session(self._spark)
            say("Spark started (%s)", clock)
            self.started_session = True
        return self._spark

    def _shipped_session(self) -> SparkSession:
        """The session, with sparkbeam shipped to its Python workers (`ship_package`)."""
        spark = self.spark
        if self.ship_package:
            ship_package(spark)
        return spark

    def _streaming_session(self, pipeline: Pipeline) -> SparkSession:
        """The session of `pipeline`'s streaming run, sparkbeam shipped to it, crowded
        partitions warned of: got at `p.run()` where the run has sinks or the runner has its
        session already, else when a collected PCollection's first query is planned (a run
        refused then starts no Spark)."""
        spark = self._shipped_session()
        if not self.started_session:
            warn_crowded_partitions(spark)
        say("translating %d transforms into Structured Streaming queries", len(pipeline.nodes))
        return spark

    def run(self, pipeline: Pipeline) -> SparkResult | SparkStreamingResult:
        """Run `pipeline`; every exception is sparkbeam's: Spark's and any
        other become `DataError`s or `PipelineError`s naming a transform
        (`engine_errors.spark_errors`: the one being translated or computed, else the
        pipeline's last), the original their cause."""
        show_progress(self.progress)
        with spark_errors(pipeline.nodes):
            return self._run(pipeline)

    def _run(self, pipeline: Pipeline) -> SparkResult | SparkStreamingResult:
        plan.refuse(pipeline.nodes)
        refuse_overlapping_writes(pipeline.nodes)
        for node in pipeline.nodes:
            require_spark_types(node.info.schema, node.label, node.transform)
        plan.refuse_translation(pipeline.nodes)
        if any(not node.info.bounded for node in pipeline.nodes):
            session = functools.partial(self._streaming_session, pipeline)
            result = SparkStreamingResult(pipeline, session, self.staging_location)
            sinks = any(isinstance(n.transform, (WriteFiles, ForEachBatch)) for n in pipeline.nodes)
            if sinks or self._spark is not None:
                result.open_session()
            if sinks:
                result.start_sinks(self.checkpoint_location, self.trigger)
            return result
        spark = self._shipped_session()
        refuse_existing_outputs(pipeline.nodes, self.paths)
        translation = Translation(spark, pipeline.nodes)
        say("translating %d transforms into a Spark batch job", len(pipeline.nodes))
        translation.run()
        for node, frame in translation.writes:
            transform = node.transform
            if isinstance(transform, ForEachBatch):
                schema = node.info.schema
                say("computing the rows of %s", node.label)
                with spark_errors(pipeline.nodes, node):
                    table = frame.toArrow()
                rows = columns_to_rows(from_arrow(table, schema), schema)
                if rows:
                    call_batch(transform.fn, rows, 0, node.label)
                continue
            assert isinstance(transform, WriteFiles)
            mode = "overwrite" if transform.mode == "overwrite" else "error"
            writer = nullable(frame).write.mode(mode)
            writer = writer.format(transform.format)
            writer = writer.options(**file_options(transform.format, write=True))
            say("writing %s", node.label)
            with spark_errors(pipeline.nodes, node):
                writer.save(transform.path)
        return SparkResult(pipeline, translation)
