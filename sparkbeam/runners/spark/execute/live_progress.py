"""Every progress report of the live queries, as Spark posts them.

A streaming query keeps only its last 100 progress reports
(`spark.sql.streaming.numRecentProgressUpdates`), and those carry the counts
behind `metrics()`, `late_count` and `invalid_count`. A live query asked for
them less often than every 100 micro-batches (a dashboard polling every few
minutes, a job that reads them once a day) would silently leave out the
batches in between. So the runner follows its live queries with one listener
per session, which hands each report of a followed query to the query's
stage as Spark posts it (`Stage.fold`); the stage still reads the recent
reports when asked, for a report Spark has not posted yet, and counts each
micro-batch once. The listener is on the session only while a live query
is followed: the queries a replayed run feeds epoch by epoch are asked after
every epoch and need none.

On Spark Connect the runner reads each followed query's recent reports every
`POLL_SECONDS` instead (`RecentReports`): removing a Connect session's last
listener can hang for good (pyspark's client waits, holding its listener
bus's lock, for its event thread, which needs that lock to hand over an
event that came in meanwhile: a query's end, say). Reports are lost only if
a query ran more than 100 micro-batches within one second.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Callable
from typing import Any

from pyspark import SparkContext
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQueryListener
from pyspark.sql.streaming.listener import StreamingQueryProgress

from sparkbeam.runners.spark.session.shipping import is_connect

LOGGER = logging.getLogger("sparkbeam.spark")

Fold = Callable[[Any], object]
"""What takes one progress report of a followed query (`Stage.fold`)."""


Followed = dict[str, tuple[Any, Fold]]
"""The followed queries and their folds, by query id."""


class LiveProgress(StreamingQueryListener):
    """Hands each progress report of a followed query to its fold."""

    def __init__(self) -> None:
        self.followed: Followed = {}
        self._handle: Any = None

    @property
    def _jlistener(self) -> Any:
        """What the JVM calls (pyspark adds and removes it): `Reports`, which reads each
        report as its JSON, and only a followed query's, where pyspark's own turns every
        event into Python objects through the JVM first."""
        if self._handle is None:
            wrapper = SparkContext._jvm.PythonStreamingQueryListenerWrapper  # type: ignore[union-attr]
            self._handle = wrapper(Reports(self))
        return self._handle

    def stop(self, spark: SparkSession) -> None:
        spark.streams.removeListener(self)
        _drain(spark)

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        self.report(event.progress)

    def report(self, progress: Any) -> None:
        entry = self.followed.get(str(progress.id))
        if entry is None:
            return
        try:
            entry[1](progress)
        except Exception:  # Spark's listener bus must go on; the recent reports still count
            LOGGER.warning("could not count a progress report", exc_info=True)

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        pass


class Reports:
    """The JVM's side of `LiveProgress` (pyspark's `PythonStreamingQueryListener`).

    pyspark's own turns each event of every query in the session into Python
    objects through the JVM, a call per field, and each observed metric through
    a class looked up by name, which scans every jar on the classpath: on the
    live benchmark about 80 ms of CPU a micro-batch on Spark's listener thread
    and more in the driver's Python, beside a batch on a two-core machine. This
    reads a report as its JSON in one call and makes of it what a query's
    `recentProgress` gives (the fold reads both), for the followed queries'
    reports only.
    """

    def __init__(self, listener: LiveProgress) -> None:
        self.listener = listener

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        try:
            report = json.loads(event.progress().json())
            progress = None
            if report.get("id") in self.listener.followed:
                progress = StreamingQueryProgress.fromJson(report)
        except Exception:  # as `LiveProgress.report`: the recent reports still count
            LOGGER.warning("could not read a progress report", exc_info=True)
            return
        if progress is not None:
            self.listener.report(progress)

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        pass

    class Java:
        implements = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]


POLL_SECONDS = 1.0


class RecentReports:
    """On Spark Connect: hands each followed query's recent progress reports to its fold every
    `POLL_SECONDS`, from a thread of its own (the fold counts each micro-batch once)."""

    def __init__(self) -> None:
        self.followed: Followed = {}
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sparkbeam-progress", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stopped.wait(POLL_SECONDS):
            for key, (query, fold) in list(self.followed.items()):
                try:
                    for progress in query.recentProgress:
                        fold(progress)
                except Exception:  # the recent reports still count when asked
                    if key in self.followed:  # else stopped meanwhile: nothing to say
                        LOGGER.warning("could not count a progress report", exc_info=True)

    def stop(self, spark: SparkSession) -> None:
        self._stopped.set()


_LOCK = threading.Lock()
_LISTENERS: dict[int, tuple[SparkSession, LiveProgress | RecentReports]] = {}
"""What follows the live queries of each session that has some, by the session's id."""


def follow(spark: SparkSession, query: Any, fold: Fold) -> None:
    """Hand every progress report of `query` (a live query of `spark`) to `fold` from now on."""
    with _LOCK:
        entry = _LISTENERS.get(id(spark))
        if entry is not None:
            follower = entry[1]
        elif is_connect(spark):
            follower = RecentReports()
            _LISTENERS[id(spark)] = (spark, follower)
        else:
            follower = LiveProgress()
            spark.streams.addListener(follower)
            _LISTENERS[id(spark)] = (spark, follower)
        follower.followed[str(query.id)] = (query, fold)


def unfollow(spark: SparkSession, query: Any) -> None:
    """Stop following `query`; the session's listener goes with its last followed query."""
    with _LOCK:
        entry = _LISTENERS.get(id(spark))
        if entry is None:
            return
        follower = entry[1]
        follower.followed.pop(str(query.id), None)
        if not follower.followed:
            del _LISTENERS[id(spark)]
            follower.stop(spark)


DRAIN_MS = 5_000


def _drain(spark: SparkSession) -> None:
    """Wait, `DRAIN_MS` at most, until Spark's listener bus has handed over the events already
    posted. One may be on its way to the listener just removed: a Python process that exits
    meanwhile (a job's last line is often `stop()`) would leave Spark to log the call it
    could not make, an error in the job's log about nothing."""
    with contextlib.suppress(Exception):  # the wait is a courtesy to the logs
        spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(DRAIN_MS)
