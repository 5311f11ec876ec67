"""`Session(col, gap, keys=())`: session windows on the direct runner.

Rule under test (SPEC section 4): per key, rows whose consecutive times are at
most `gap` apart form one session `[first, last + gap)`; a session is emitted
(each row with its `window_start`/`window_end`) once the watermark on `col`
passes `window_end` (a row at exactly `window_end` still joins), or at end of
input. Derivation: `W(window_end, t)`, `W(window_start, min(t, start of the
oldest open session))`.
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import sparkbeam as sb
from tests.agreement.streams import IdsSeen

SCHEMA = {"user": str, "t": int, "id": int}


def stream(
    *epochs: Sequence[dict[str, Any]], schema: dict[str, type] | None = None
) -> sb.TestStream:
    ts = sb.TestStream(schema)
    for rows in epochs:
        ts.add_epoch(rows)
    return ts


def row(user: str, t: int, id_: int = 0) -> dict[str, Any]:
    return {"user": user, "t": t, "id": id_}


def marks(result: Any, pcoll: sb.PCollection, column: str) -> list[Any]:
    return [w.value for w in result.watermarks(pcoll) if w.column == column]


def test_bounded_sessions_per_key(runner: Any) -> None:
    rows = [row("a", 0), row("a", 3), row("a", 20), row("b", 2), row("a", 7), row("b", 30)]
    with sb.Pipeline(runner=runner) as p:
        sessions = p | sb.Create(rows) | sb.Session("t", 5, keys="user")
    out = p.result.collect(sessions)
    assert Counter((r["user"], r["t"], r["window_start"], r["window_end"]) for r in out) == Counter(
        [
            ("a", 0, 0, 12),
            ("a", 3, 0, 12),
            ("a", 7, 0, 12),
            ("a", 20, 20, 25),
            ("b", 2, 2, 7),
            ("b", 30, 30, 35),
        ]
    )
    assert sessions.schema.names == ("user", "t", "id", "window_start", "window_end")


def test_rows_exactly_gap_apart_are_one_session(runner: Any) -> None:
    rows = [row("a", 0), row("a", 5), row("a", 11)]
    with sb.Pipeline(runner=runner) as p:
        sessions = p | sb.Create(rows) | sb.Session("t", 5, keys=["user"])
    out = {(r["t"], r["window_start"], r["window_end"]) for r in p.result.collect(sessions)}
    assert out == {(0, 0, 10), (5, 0, 10), (11, 11, 16)}


def test_without_keys_all_rows_share_sessions(runner: Any) -> None:
    rows = [row("a", 0), row("b", 4), row("c", 30)]
    with sb.Pipeline(runner=runner) as p:
        sessions = p | sb.Create(rows) | sb.Session("t", 5)
    out = {(r["user"], r["window_start"], r["window_end"]) for r in p.result.collect(sessions)}
    assert out == {("a", 0, 9), ("b", 0, 9), ("c", 30, 35)}


@pytest.mark.spark
def test_spark_says_once_that_a_session_without_keys_runs_in_one_task(spark_runner: Any) -> None:
    """A `Session` without keys is one sequence: Spark computes it in one task. The runner
    says so once, naming the transform and what to do; a keyed one is not named."""
    rows = [row("a", 0), row("b", 4), row("c", 30)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        p = sb.Pipeline(runner=spark_runner)
        source = p | sb.Create(rows)
        visits = source | "Visits" >> sb.Session("t", 5)
        per_user = source | "PerUser" >> sb.Session("t", 5, keys="user")
        result = p.run()
        collected = [result.collect(visits), result.collect(per_user)]
    assert [len(rows) for rows in collected] == [3, 3]
    told = [str(w.message) for w in caught if "Session without keys" in str(w.message)]
    assert len(told) == 1, told
    assert told[0].startswith("Visits: a Session without keys makes every row one sequence")
    assert "one task" in told[0] and "keys=" in told[0]


def test_datetime_sessions_with_interval_gap(runner: Any) -> None:
    t0 = datetime(2026, 4, 1, 10, 0)
    rows = [
        {"user": "u", "t": t0},
        {"user": "u", "t": t0 + timedelta(minutes=9)},
        {"user": "u", "t": t0 + timedelta(minutes=30)},
    ]
    with sb.Pipeline(runner=runner) as p:
        sessions = p | sb.Create(rows) | sb.Session("t", "10 minutes", keys="user")
    out = sorted((r["window_start"], r["window_end"]) for r in p.result.collect(sessions))
    assert out == [
        (t0, t0 + timedelta(minutes=19)),
        (t0, t0 + timedelta(minutes=19)),
        (t0 + timedelta(minutes=30), t0 + timedelta(minutes=40)),
    ]


def test_session_closes_only_when_the_watermark_passes_window_end() -> None:
    # gap 5, delay 0. Session a = [0, 5) after epoch 0.
    with sb.Pipeline() as p:
        source = p | stream(
            [row("a", 0, 1)],
            [row("b", 5, 2)],  # wm = 5 = window_end: a stays open
            [row("b", 6, 3)],  # wm = 6 > 5: a closes, in this epoch
        )
        sessions = source.with_watermark("t", 0).session("t", 5, keys="user")
    by_epoch = p.result.collect_by_epoch(sessions)
    assert by_epoch[0] == by_epoch[1] == []
    assert by_epoch[2] == [{**row("a", 0, 1), "window_start": 0, "window_end": 5}]
    assert sorted(r["id"] for r in by_epoch[3]) == [2, 3]
    assert {(r["window_start"], r["window_end"]) for r in by_epoch[3]} == {(5, 11)}
    assert p.result.state_size(sessions) == 0


def test_a_row_at_exactly_window_end_still_joins_the_session() -> None:
    # Epoch 0: a's session is [0, 5); b at 10 with delay 5 gives wm = 5 = window_end.
    # Epoch 1: a row of a at 5 is not late (5 >= 5) and extends the session to [0, 10).
    with sb.Pipeline() as p:
        watermarked = (
            p | stream([row("a", 0, 1), row("b", 10, 2)], [row("a", 5, 3)])
        ).with_watermark("t", 5)
        sessions = watermarked.session("t", 5, keys="user")
    result = p.result
    assert result.late_count(watermarked) == 0
    out = {r["id"]: (r["window_start"], r["window_end"]) for r in result.collect(sessions)}
    assert out == {1: (0, 10), 3: (0, 10), 2: (10, 15)}


def test_a_bridging_row_merges_two_open_sessions() -> None:
    # gap 4, delay 4. Epoch 0: sessions [0, 4) and [8, 12); wm 4.
    # Epoch 1: a row at 4 is within 4 of both: one session [0, 12).
    # Epoch 2: wm 13 > 12 closes it.
    with sb.Pipeline() as p:
        source = p | stream(
            [row("a", 0, 1), row("a", 8, 2)],
            [row("a", 4, 3)],
            [row("b", 17, 4)],
        )
        sessions = source.with_watermark("t", 4).session("t", 4, keys="user")
    by_epoch = p.result.collect_by_epoch(sessions)
    assert by_epoch[:2] == [[], []]
    assert {r["id"]: (r["window_start"], r["window_end"]) for r in by_epoch[2]} == {
        1: (0, 12),
        2: (0, 12),
        3: (0, 12),
    }
    assert [(r["id"], r["window_start"], r["window_end"]) for r in by_epoch[3]] == [(4, 17, 21)]


def test_a_bridging_row_merges_three_sessions_at_once() -> None:
    rows = [row("a", 0, 1), row("a", 10, 2), row("a", 20, 3)]
    with sb.Pipeline() as p:
        source = p | stream(rows, [row("a", 5, 4), row("a", 15, 5)])
        sessions = source.with_watermark("t", 100).session("t", 5, keys="user")
    out = {(r["window_start"], r["window_end"]) for r in p.result.collect(sessions)}
    assert out == {(0, 25)}


def test_derived_watermarks_follow_the_oldest_open_session() -> None:
    # gap 5, delay 0.
    with sb.Pipeline() as p:
        source = p | stream(
            [row("a", 0), row("b", 2)],  # wm 2: a [0, 5) and b [2, 7) open
            [row("a", 4), row("b", 20)],  # wm 20: a [0, 9), b [2, 7) close; b [20, 25) open
            [row("c", 22)],  # wm 22: b [20, 25) and c [22, 27) open
        )
        sessions = source.with_watermark("t", 0).session("t", 5, keys="user")
    result = p.result
    assert sessions.watermarked_columns == frozenset({"window_start", "window_end"})
    assert marks(result, sessions, "window_end") == [2, 20, 22]
    assert marks(result, sessions, "window_start") == [0, 20]
    assert marks(result, sessions, "t") == []
    by_epoch = result.collect_by_epoch(sessions)
    assert sorted((r["user"], r["t"]) for r in by_epoch[1]) == [("a", 0), ("a", 4), ("b", 2)]
    assert sorted((r["user"], r["t"]) for r in by_epoch[3]) == [("b", 20), ("c", 22)]


def test_session_then_combine_gives_one_row_per_session() -> None:
    with sb.Pipeline() as p:
        source = p | stream(
            [row("a", 0, 1), row("a", 3, 2), row("b", 1, 3)],
            [row("a", 6, 4), row("b", 30, 5)],
            [row("a", 40, 6)],
        )
        per_session = (
            source.with_watermark("t", 0)
            .session("t", 5, keys="user")
            .combine_per_key(["user", "window_start", "window_end"], n=sb.Count(), last=sb.Max("t"))
        )
    result = p.result
    rows = result.collect(per_session)
    assert sorted((r["user"], r["window_start"], r["window_end"], r["n"]) for r in rows) == [
        ("a", 0, 11, 3),
        ("a", 40, 45, 1),
        ("b", 1, 6, 1),
        ("b", 30, 35, 1),
    ]
    by_epoch = result.collect_by_epoch(per_session)
    # wm 30 after epoch 1 closes a [0, 11) and b [1, 6): each is one group, released at once.
    assert sorted((r["user"], r["n"]) for r in by_epoch[1]) == [("a", 3), ("b", 1)]
    assert result.state_size(per_session) == 0


def test_session_on_unbounded_input_needs_a_watermark() -> None:
    p = sb.Pipeline()
    source = p | stream([row("a", 0)])
    with pytest.raises(sb.PipelineError) as info:
        source | "visits" >> sb.Session("t", 5, keys="user")
    assert "visits" in str(info.value)
    assert ".with_watermark('t'" in str(info.value)


def test_session_argument_errors() -> None:
    p = sb.Pipeline()
    source = p | sb.Create([row("a", 0)])
    with pytest.raises(sb.PipelineError, match="gap must be positive"):
        source.session("t", 0)
    with pytest.raises(sb.PipelineError, match="unknown column 'nope'"):
        source.session("t", 5, keys="nope")
    with pytest.raises(sb.PipelineError, match="'user' is str"):
        source.session("user", 5)


# Property: Session output equals a brute-force reference.


def reference_sessions(rows: list[dict[str, Any]], gap: int) -> list[tuple[int, int, int]]:
    """`(id, window_start, window_end)` per row: sort per key, split where a gap exceeds `gap`."""
    out = []
    by_user: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_user.setdefault(r["user"], []).append(r)
    for user_rows in by_user.values():
        user_rows.sort(key=lambda r: r["t"])
        groups: list[list[dict[str, Any]]] = []
        for r in user_rows:
            if groups and r["t"] - groups[-1][-1]["t"] <= gap:
                groups[-1].append(r)
            else:
                groups.append([r])
        for group in groups:
            start, end = group[0]["t"], group[-1]["t"] + gap
            out.extend((r["id"], start, end) for r in group)
    return sorted(out)


def periodic_marks(epochs: list[list[dict[str, Any]]], delay: int) -> list[int | None]:
    marks_: list[int | None] = []
    top: int | None = None
    for rows in epochs:
        for r in rows:
            top = r["t"] if top is None else max(top, r["t"])
        marks_.append(None if top is None else top - delay)
    return marks_


epochs_strategy = st.lists(
    st.lists(st.tuples(st.sampled_from("xyz"), st.integers(0, 60)), max_size=7),
    min_size=1,
    max_size=6,
)


@given(raw=epochs_strategy, gap=st.integers(1, 8), delay=st.integers(0, 15))
def test_session_equals_brute_force_reference(
    raw: list[list[tuple[str, int]]], gap: int, delay: int
) -> None:
    epochs, n = [], 0
    for rows in raw:
        epochs.append([row(user, t, n + i) for i, (user, t) in enumerate(rows)])
        n += len(rows)
    with sb.Pipeline() as p:
        watermarked = p | stream(*epochs, schema=SCHEMA) | sb.WithWatermark("t", delay)
        sessions = watermarked | sb.Session("t", gap, keys="user")
    result = p.result
    kept = result.collect(watermarked)
    out = result.collect(sessions)
    expected = reference_sessions(kept, gap)
    assert sorted((r["id"], r["window_start"], r["window_end"]) for r in out) == expected
    by_id = {r["id"]: r for r in kept}
    assert all({k: r[k] for k in SCHEMA} == by_id[r["id"]] for r in out)
    # Each session is emitted in the first epoch whose watermark passes its end.
    epoch_marks = periodic_marks(epochs, delay)
    for index, emitted in enumerate(result.collect_by_epoch(sessions)):
        for r in emitted:
            first = next(
                (i for i, m in enumerate(epoch_marks) if m is not None and m > r["window_end"]),
                len(epochs),
            )
            assert index == first, (r, epoch_marks)
    assert result.state_size(sessions) == 0


def groups_on_window_start(p: sb.Pipeline) -> sb.PCollection:
    """Issue 20's case: sessions grouped on (user, window_start), no window_end.

    gap 5, delay 0. Epoch 1 (then wm 9) makes a [0, 14) and b [2, 8): b closes,
    but a's session, open, started at 0 < 2, so the model's window_start
    watermark stays at 0 and b's group waits. Epoch 2 (wm 30) closes a [0, 14)
    and c [12, 17): their groups and b's come out; a [30, 35) at the end.
    """
    source = p | stream(
        [row("a", 0, 1), row("b", 2, 2)],
        [row("a", 4, 3), row("b", 3, 4), row("a", 9, 5)],
        [row("c", 12, 6), row("a", 30, 7)],
        [],
    )
    return (
        source.with_watermark("t", 0)
        .session("t", 5, keys="user")
        .combine_per_key(["user", "window_start"], n=sb.Count(), ids=IdsSeen())
    )


def test_groups_on_window_start_wait_for_the_oldest_open_session() -> None:
    with sb.Pipeline() as p:
        groups = groups_on_window_start(p)
    by_epoch = p.result.collect_by_epoch(groups)
    flat = sorted((r["user"], r["window_start"], r["n"], r["ids"]) for e in by_epoch for r in e)
    assert flat == [("a", 0, 3, "1,3,5"), ("a", 30, 1, "7"), ("b", 2, 2, "2,4"), ("c", 12, 1, "6")]
    # b [2, 8) closes at wm 9 (epoch 1) but a [0, 14) is still open: b's group waits.
    assert by_epoch[1] == []
    assert sorted(r["user"] for r in by_epoch[2]) == ["a", "b", "c"]


@pytest.mark.spark
def test_groups_on_window_start_agree_on_spark_streaming(spark_runner: Any) -> None:
    """Spark follows the oldest-open-session cap (one operator over all keys), epoch by epoch."""
    results = []
    for runner in (sb.DirectRunner(), spark_runner):
        p = sb.Pipeline(runner=runner)
        groups = groups_on_window_start(p)
        by_epoch = p.run().collect_by_epoch(groups)
        results.append([sorted(tuple(sorted(r.items())) for r in epoch) for epoch in by_epoch])
    assert results[0] == results[1]
