"""What Spark prints that a user of the runner does not need, kept off the terminal.

Five sources, each silenced where it starts and nowhere else:

- The Python process that plans a `transformWithState` (pyspark's
  `transform_with_state_driver_worker`, once per query) `print`s five lines
  ("Streaming TransformWithStateInPandas Python worker ..."). The JVM copies
  a Python worker's stdout to its own stderr, past log4j, so no log level
  reaches them. A session the runner starts on a local master gives its Python workers this
  package's `worker_site` directory on `PYTHONPATH` (`spark.executorEnv`):
  its `sitecustomize` drops exactly those lines from the worker's stdout.
- Spark's WARN lines on every streaming query ("Disabling AQE ...", "Failed
  to cancel job group ...") and the per-task failure reports printed before a
  failure reaches the driver (the driver raises it: the runner turns it into
  a `DataError` or names the transform). A session the runner starts sets
  those loggers' levels (`LOGGER_LEVELS`); a query that fails unattended
  (a live sink) is still reported at ERROR (`QUERY_END`).
- Spark's default state store warns once per store on every restart from a
  checkpoint that it reads the state back (`RESTART_NOTICE`): under a logger
  name of its own per store, so a session the runner starts drops that one
  message with a log4j filter.
- Spark warns that a window function over all rows moves them into one
  partition, for every such function it evaluates: several lines per job of
  a `Session` without keys. The runner warns once per such `Session`, naming
  it and what to do; a session the runner starts drops Spark's message with
  a log4j filter (`ONE_PARTITION_NOTICE`).
- pyspark logs a JSON ERROR line ("SQLQueryContextLogger") as it converts
  each engine exception. While the runner waits on its own queries
  (`converting`), those records are dropped: the runner raises the error.

A session the user started keeps its logging as it is.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import weakref
from collections.abc import Iterator
from typing import Any

from pyspark.logger import PySparkLogger

from sparkbeam.runners.spark.session.sessions import local_cores

WORKER_SITE = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "worker_site"
)
"""The directory whose `sitecustomize` quiets the `transformWithState` planning worker."""

QUERY_END = "org.apache.spark.sql.execution.streaming.runtime.MicroBatchExecution"
"""Reports at ERROR a query that ended with an error: the one report of a live query's failure
nobody waits on; off while the runner waits on a replayed run's query (`converting`)."""

RESTART_NOTICE = ".*doesn't exist in loadedMaps\\..*"
"""Spark's default state store (`HDFSBackedStateStoreProvider`) warns "The state for version N
doesn't exist in loadedMaps. Reading snapshot file and delta files if needed...Note that this
is normal for the first batch of starting query" once per store (operator and partition) of a
query started again from its checkpoint: it reads its state back from the checkpoint, which
is what a restart does. It logs under a name of its own per store (`HDFSBackedStateStoreProvider
StateStoreProviderId[...]`), which no logger level reaches but its whole package's: a session
the runner starts drops this message alone (`quiet_session`); the store's other warnings (a
snapshot or clean-up that failed) still show."""

ONE_PARTITION_NOTICE = "No Partition Defined for Window operation!.*"
"""Spark warns "No Partition Defined for Window operation! Moving all data to a single
partition, this can cause serious performance degradation." for each window function over all
rows it evaluates: a `Session` without keys gives several per job. The runner warns once per
such transform, naming it and what to do (`translate.session.warn_one_task`); a session the
runner starts drops Spark's message (`quiet_session`)."""

LOGGER_LEVELS = {
    # WARN on every streaming query: AQE off for streaming, and for stateful workloads
    "org.apache.spark.sql.execution.streaming.runtime.ResolveWriteToStream": "ERROR",
    QUERY_END: "ERROR",
    # WARN "Failed to cancel job group ..." as a query stops
    "org.apache.spark.scheduler.DAGScheduler": "ERROR",
    # WARN "No more data to read from the socket", "... doesn't contain a value"
    "org.apache.spark.sql.execution.python.streaming.TransformWithStateInPySparkStateServer": (
        "ERROR"
    ),
    # A failed task's stack trace and "aborting job": the job's failure reaches the driver
    # with the same exception, which the runner raises.
    "org.apache.spark.executor.Executor": "OFF",
    "org.apache.spark.scheduler.TaskSetManager": "OFF",
    # WARN "Interrupted while joining on ..." as a failed stage's tasks are cancelled
    "org.apache.hadoop.util.Shell": "ERROR",
}


QUERY_CONTEXT_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")
"""pyspark's loggers that print each engine exception as JSON when it is converted."""


def session_conf(conf: dict[str, str], master: str) -> dict[str, str]:
    """The settings of a session the runner starts, with `WORKER_SITE` on its Python workers'
    `PYTHONPATH` (after any the user's `conf` gives) on a local master: elsewhere the
    executors' own environment is left alone (and their output is not the user's terminal)."""
    if local_cores(master) is None:
        return conf
    key = "spark.executorEnv.PYTHONPATH"
    given = conf.get(key)
    return {**conf, key: WORKER_SITE if not given else f"{given}{os.pathsep}{WORKER_SITE}"}


def _levels(spark: Any) -> tuple[Any, Any] | None:
    """log4j's `Configurator` and `Level` on a classic session's JVM (None on Spark Connect)."""
    jvm = getattr(getattr(spark, "sparkContext", None), "_jvm", None)
    if jvm is None:
        return None
    return jvm.org.apache.logging.log4j.core.config.Configurator, jvm.org.apache.logging.log4j.Level


_QUIET: weakref.WeakSet[Any] = weakref.WeakSet()
"""The sessions the runner started (`quiet_session`)."""


def quiet_session(spark: Any) -> None:
    """Set `LOGGER_LEVELS` on a classic session the runner started."""
    levels = _levels(spark)
    if levels is None:
        return
    configurator, level = levels
    for name, value in LOGGER_LEVELS.items():
        configurator.setLevel(name, level.toLevel(value))
    _drop(spark.sparkContext._jvm, RESTART_NOTICE, ONE_PARTITION_NOTICE)
    _QUIET.add(spark)


def _drop(jvm: Any, *messages: str) -> None:
    """Drop every log record whose whole message matches one of the regular expressions
    `messages`: a log4j `RegexFilter` each on the root logger's configuration (that of every
    logger with no configuration of its own), added once per JVM."""
    log4j = jvm.org.apache.logging.log4j
    context = log4j.LogManager.getContext(False)
    root = context.getConfiguration().getRootLogger()
    present = root.getFilter()
    added = str(present.toString()) if present is not None else ""
    missing = [message for message in messages if message not in added]
    if not missing:
        return
    result = log4j.core.Filter.Result
    regex = log4j.core.filter.RegexFilter
    for message in missing:
        root.addFilter(regex.createFilter(message, None, False, result.DENY, result.NEUTRAL))
    context.updateLoggers()


class _WhileConverting(logging.Filter):
    """Drops records while the runner waits on its own queries (`converting`)."""

    def __init__(self) -> None:
        super().__init__()
        self.depth = 0
        self.lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        return self.depth == 0


_FILTER = _WhileConverting()


@contextlib.contextmanager
def converting(spark: Any) -> Iterator[None]:
    """While the runner waits on a query whose failure it raises itself (a replayed run):
    pyspark's JSON lines for converted exceptions are dropped (any thread: a `foreachBatch`
    function runs in a py4j thread), and on a session the runner started, so is Spark's
    ERROR report of the query's end (`QUERY_END`)."""
    for name in QUERY_CONTEXT_LOGGERS:
        logger = PySparkLogger.getLogger(name)  # pyspark's class: it logs with extra fields
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
    levels = _levels(spark) if spark in _QUIET else None
    with _FILTER.lock:
        _FILTER.depth += 1
        if levels is not None:
            levels[0].setLevel(QUERY_END, levels[1].OFF)
    try:
        yield
    finally:
        with _FILTER.lock:
            _FILTER.depth -= 1
            if levels is not None and not _FILTER.depth:
                levels[0].setLevel(QUERY_END, levels[1].toLevel(LOGGER_LEVELS[QUERY_END]))
