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
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQueryListener

from sparkbeam.runners.spark.session.shipping import is_connect

LOGGER = logging.getLogger("sparkbeam.spark")

Fold = Callable[[Any], object]
"""What takes one progress report of a followed query (`Stage.fold`)."""


class LiveProgress(StreamingQueryListener):
    """Hands each progress report of a followed query to its fold."""

    def __init__(self) -> None:
        self.followed: dict[str, Fold] = {}

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        progress = event.progress
        fold = self.followed.get(str(progress.id))
        if fold is None:
            return
        try:
            fold(progress)
        except Exception:  # Spark's listener bus must go on; the recent reports still count
            LOGGER.warning("could not count a progress report", exc_info=True)

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        pass


_LOCK = threading.Lock()
_LISTENERS: dict[int, tuple[SparkSession, LiveProgress]] = {}
"""The listener of each session that has followed queries, by the session's id."""


def follow(spark: SparkSession, query: Any, fold: Fold) -> None:
    """Hand every progress report of `query` (a live query of `spark`) to `fold` from now on."""
    with _LOCK:
        entry = _LISTENERS.get(id(spark))
        if entry is None:
            listener = LiveProgress()
            spark.streams.addListener(listener)
            _LISTENERS[id(spark)] = (spark, listener)
        else:
            listener = entry[1]
        listener.followed[str(query.id)] = fold


def unfollow(spark: SparkSession, query: Any) -> None:
    """Stop following `query`; the session's listener goes with its last followed query."""
    with _LOCK:
        entry = _LISTENERS.get(id(spark))
        if entry is None:
            return
        listener = entry[1]
        listener.followed.pop(str(query.id), None)
        if not listener.followed:
            del _LISTENERS[id(spark)]
            spark.streams.removeListener(listener)
            _drain(spark)


DRAIN_MS = 5_000


def _drain(spark: SparkSession) -> None:
    """Wait, `DRAIN_MS` at most, until Spark's listener bus has handed over the events already
    posted. One may be on its way to the listener just removed: a Python process that exits
    meanwhile (a job's last line is often `stop()`) would leave Spark to log the call it
    could not make, an error in the job's log about nothing. On Spark Connect the listener
    runs in this process, and there is nothing to wait for."""
    if is_connect(spark):
        return
    with contextlib.suppress(Exception):  # the wait is a courtesy to the logs
        spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(DRAIN_MS)
