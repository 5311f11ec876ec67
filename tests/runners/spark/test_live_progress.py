"""How the runner follows its live queries' progress on Spark Connect
(`runners/spark/execute/live_progress.py`): by reading their recent reports from a thread of
its own, since removing a Connect session's last listener can hang (no Spark runs; the
classic session's listener is checked by the footers' agreement run)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from sparkbeam.runners.spark.execute import live_progress


class Query:
    """A live query as far as the runner's follower reads it."""

    def __init__(self, name: str, reports: list[dict[str, Any]]) -> None:
        self.id = name
        self.recentProgress = reports


def test_a_connect_sessions_followed_queries_are_read_until_the_last_is_unfollowed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(live_progress, "POLL_SECONDS", 0.01)
    monkeypatch.setattr(live_progress, "is_connect", lambda spark: True)
    session = object()  # a Connect session: no listener is ever added to it
    folded: dict[str, list[int]] = {"a": [], "b": []}
    both_read = threading.Event()

    def fold_of(name: str) -> live_progress.Fold:
        def fold(report: dict[str, Any]) -> None:
            folded[name].append(report["batchId"])
            if folded["a"] and folded["b"]:
                both_read.set()

        return fold

    first, second = Query("a", [{"batchId": 0}, {"batchId": 1}]), Query("b", [{"batchId": 7}])
    live_progress.follow(session, first, fold_of("a"))  # type: ignore[arg-type]
    live_progress.follow(session, second, fold_of("b"))  # type: ignore[arg-type]
    _, follower = live_progress._LISTENERS[id(session)]
    assert isinstance(follower, live_progress.RecentReports)
    assert both_read.wait(5)
    assert folded["a"][:2] == [0, 1] and folded["b"][0] == 7
    live_progress.unfollow(session, first)  # type: ignore[arg-type]
    assert id(session) in live_progress._LISTENERS  # still following `second`
    live_progress.unfollow(session, second)  # type: ignore[arg-type]
    assert id(session) not in live_progress._LISTENERS
    follower._thread.join(5)
    assert not follower._thread.is_alive()
    done = {name: len(batches) for name, batches in folded.items()}
    time.sleep(0.05)
    assert {name: len(batches) for name, batches in folded.items()} == done  # read no more
