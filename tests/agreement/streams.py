"""Unbounded pipelines (TestStreams) both runners must agree on, epoch by epoch.

Each builder returns the PCollections to compare and the `WithWatermark`
outputs whose late and invalid counts must match.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

import sparkbeam as sb
from sparkbeam.runners.spark.execute.queries import SIDE_BY_SIDE
from tests.transforms.test_combine import eowc_stream

T0 = datetime(2026, 4, 1, 10, 0)
StreamOutputs = tuple[dict[str, sb.PCollection], list[sb.PCollection]]


def at(minutes: float, microseconds: int = 0) -> datetime:
    return T0 + timedelta(minutes=minutes, microseconds=microseconds)


class KeysSeen(sb.CombineFn):
    """A user CombineFn: the sorted distinct keys of the group, joined."""

    output_type = str

    def create_accumulator(self) -> set[str]:
        return set()

    def add_input(self, accumulator: set[str], element: dict[str, Any]) -> set[str]:
        return accumulator | {element["k"]}

    def merge_accumulators(self, accumulators: Any) -> set[str]:
        return set().union(*accumulators)

    def extract_output(self, accumulator: set[str]) -> str:
        return ",".join(sorted(accumulator))


class IdsSeen(sb.CombineFn):
    """A user CombineFn: the sorted distinct `id`s of the group, joined (importable by Spark's
    Python workers, unlike a function of a test module outside a package)."""

    output_type = str

    def create_accumulator(self) -> set[int]:
        return set()

    def add_input(self, accumulator: set[int], element: dict[str, Any]) -> set[int]:
        return accumulator | {element["id"]}

    def merge_accumulators(self, accumulators: Any) -> set[int]:
        return set().union(*accumulators)

    def extract_output(self, accumulator: set[int]) -> str:
        return ",".join(map(str, sorted(accumulator)))


def orders_stream() -> sb.TestStream:
    """Out of order, with rows exactly at, just below and just above the watermark."""
    return (
        sb.TestStream()
        .add_epoch([{"k": "a", "v": 1, "t": at(10)}, {"k": "b", "v": 2, "t": at(8)}])
        .add_epoch(
            [
                {"k": "a", "v": 3, "t": at(5)},  # == watermark 10:05: kept
                {"k": "b", "v": 4, "t": at(5, -1)},  # one microsecond below: late
                {"k": "b", "v": 5, "t": at(5, 1)},
                {"k": "c", "v": 6, "t": None},  # no event time: invalid
            ]
        )
        .add_epoch([])
        .add_epoch([{"k": "a", "v": 7, "t": at(12.5)}, {"k": "c", "v": 8, "t": at(21)}])
        .add_epoch([{"k": "b", "v": 9, "t": at(14)}, {"k": "a", "v": 10, "t": at(16, 999)}])
    )


def windows(p: sb.Pipeline) -> StreamOutputs:
    w = (p | orders_stream()).with_watermark("t", "5 minutes")
    keys = ["k", "window_start", "window_end"]
    return {
        "rows": w,
        "tumble": w.tumble("t", "2 minutes").combine_per_key(
            keys, n=sb.Count(), total=sb.Sum("v"), mean=sb.Mean("v"), last=sb.Max("t")
        ),
        "hop": w.hop("t", "4 minutes", "1 minute").combine_per_key(
            ["window_start", "window_end"], n=sb.Count()
        ),
        "by_end": w.tumble("t", "3 minutes", offset="1 minute").combine_per_key(
            ["window_end"], n=sb.Count()
        ),
        "user_fn": w.tumble("t", "5 minutes").combine_per_key(
            ["window_start"], seen=KeysSeen(), n=sb.Count()
        ),
    }, [w]


def derived(p: sb.Pipeline) -> StreamOutputs:
    w = (p | orders_stream()).with_watermark("t", "3 minutes")
    shifted = w.select("k", "v", later=sb.col("t") + "90 seconds", t="t")
    minute = shifted.select("k", "v", m=sb.col("later").truncate("1 minute") - "10 seconds")
    both = w.union(w.filter(lambda row: row["v"] % 2 == 0))
    return {
        "per_minute": minute.combine_per_key(["m"], n=sb.Count(), total=sb.Sum("v")),
        "union": both.tumble("t", "5 minutes").combine_per_key(["window_start"], n=sb.Count()),
        "mapped": w.map(lambda row: {**row, "v": row["v"] * 10}, keeps=["t"])
        .tumble("t", "1 minute")
        .combine_per_key(["window_end"], total=sb.Sum("v")),
    }, [w]


def integer_time(p: sb.Pipeline) -> StreamOutputs:
    stream = sb.TestStream()
    for epoch in range(4):
        stream.add_epoch(
            [{"sensor": f"s{i % 3}", "t": epoch * 20 + (i * 7) % 30 - 10, "x": i} for i in range(8)]
        )
    w = (p | stream).with_watermark("t", 4)
    return {
        "tumble": w.tumble("t", 10).combine_per_key(
            ["sensor", "window_start"], n=sb.Count(), top=sb.Max("x")
        ),
        "rows": w,
    }, [w]


def two_streams(p: sb.Pipeline) -> StreamOutputs:
    """Two sources whose branches never meet: each keeps its own watermark."""
    fast = sb.TestStream()
    slow = sb.TestStream()
    for epoch in range(4):
        fast.add_epoch([{"t": at(epoch * 10 + i), "v": i} for i in range(3)])
        slow.add_epoch([{"t": at(epoch + i / 2), "v": i} for i in range(3)] if epoch < 3 else [])
    a = (p | "fast" >> fast).with_watermark("t", "2 minutes")
    b = (p | "slow" >> slow).with_watermark("t", "2 minutes")
    return {
        "fast": a.tumble("t", "5 minutes").combine_per_key(["window_start"], n=sb.Count()),
        "slow": b.tumble("t", "1 minute").combine_per_key(["window_start"], n=sb.Count()),
    }, [a, b]


def sorted_stream(p: sb.Pipeline) -> StreamOutputs:
    """RisingWave's Sort: rows at 16:51 with a 5-minute delay wait for a row at 16:56:01."""
    at_16 = datetime(2026, 1, 1, 16, 0)

    def t(minute: int, second: int = 0, micro: int = 0) -> datetime:
        return at_16 + timedelta(minutes=minute, seconds=second, microseconds=micro)

    stream = (
        sb.TestStream()
        .add_epoch(
            [
                {"t": t(51), "k": "a", "v": 1},
                {"t": t(50), "k": "b", "v": 2},
                {"t": t(51), "k": "b", "v": 3},
            ]
        )
        .add_epoch([{"t": t(56), "k": "a", "v": 4}, {"t": t(51), "k": "a", "v": 5}])
        .add_epoch([{"t": t(56, 1), "k": "b", "v": 6}, {"t": t(52, 0, 500), "k": "a", "v": 7}])
        .add_epoch([{"t": t(60), "k": "a", "v": 8}])
    )
    w = (p | stream).with_watermark("t", "5 minutes")
    return {"sorted": w.sort("t")}, [w]


def merged_origins(p: sb.Pipeline) -> StreamOutputs:
    """A Union of two sources with their own watermarks: each judges its own late rows."""
    fast = (
        sb.TestStream()
        .add_epoch([{"src": "f", "t": at(10)}])
        .add_epoch([{"src": "f", "t": at(20)}, {"src": "f", "t": at(6)}])  # late for fast only
        .add_epoch([{"src": "f", "t": at(16)}, {"src": "f", "t": at(30)}])
        .add_epoch([])
    )
    slow = (
        sb.TestStream()
        .add_epoch([{"src": "s", "t": at(1)}])
        .add_epoch([{"src": "s", "t": at(3)}])
        .add_epoch([{"src": "s", "t": at(2)}, {"src": "s", "t": at(5)}])
    )
    a = (p | "fast" >> fast).with_watermark("t", "2 minutes")
    b = (p | "slow" >> slow).with_watermark("t", "2 minutes")
    merged = a.union(b).tumble("t", "5 minutes")
    return {"windows": merged.combine_per_key(["src", "window_start"], n=sb.Count())}, [a, b]


def joins(p: sb.Pipeline) -> StreamOutputs:
    """Clicks and purchases, each with its own watermark: a window join and an interval join."""
    noon = datetime(2026, 4, 1, 12, 0)

    def t(minute: int) -> datetime:
        return noon + timedelta(minutes=minute)

    clicks = (
        sb.TestStream()
        .add_epoch(
            [
                {"user": "a", "ad": "x", "click_time": t(0)},
                {"user": "b", "ad": "y", "click_time": t(1)},
            ]
        )
        .add_epoch(
            [
                {"user": "a", "ad": "z", "click_time": t(12)},
                {"user": "c", "ad": "w", "click_time": t(14)},
            ]
        )
        .add_epoch([{"user": "d", "ad": "v", "click_time": t(30)}])
        .add_epoch([])
    )
    buys = (
        sb.TestStream()
        .add_epoch([{"user": "a", "item": "i1", "buy_time": t(3)}])
        .add_epoch(
            [
                {"user": "b", "item": "i2", "buy_time": t(13)},
                {"user": "a", "item": "i3", "buy_time": t(15)},
            ]
        )
        .add_epoch([{"user": "e", "item": "i4", "buy_time": t(31)}])
    )
    c = (p | "clicks" >> clicks).with_watermark("click_time", "1 minute")
    b = (p | "buys" >> buys).with_watermark("buy_time", "1 minute")
    cw = c.tumble("click_time", "10 minutes").select("user", "ad", "window_start")
    bw = b.tumble("buy_time", "10 minutes").select("user", "item", "window_start")
    return {
        "window_full": cw.join(bw, on=["user", "window_start"], how="full"),
        "interval_left": c.join(
            b,
            on="user",
            how="left",
            times=("click_time", "buy_time"),
            within=("0 minutes", "10 minutes"),
        ),
    }, []


def sessions(p: sb.Pipeline) -> StreamOutputs:
    """Sessions per user (rows at most 10 s apart), closed by the watermark, then counted."""
    base = datetime(2026, 4, 1, 16, 0)

    def t(seconds: int) -> datetime:
        return base + timedelta(seconds=seconds)

    stream = (
        sb.TestStream()
        .add_epoch([{"u": "a", "t": t(0)}, {"u": "a", "t": t(10)}, {"u": "b", "t": t(5)}])
        .add_epoch([{"u": "a", "t": t(31)}, {"u": "b", "t": t(14)}, {"u": "a", "t": t(20)}])
        .add_epoch([{"u": "a", "t": t(60)}, {"u": "b", "t": t(61)}])
        .add_epoch([{"u": "a", "t": t(75)}, {"u": "a", "t": t(200)}])
    )
    w = (p | stream).with_watermark("t", "15 seconds")
    per_session = w.session("t", "10 seconds", keys="u").combine_per_key(
        ["u", "window_start", "window_end"], n=sb.Count()
    )
    return {"per_session": per_session}, []


def hourly(p: sb.Pipeline) -> StreamOutputs:
    """RisingWave's EOWC case (tests/transforms/test_combine.py checks its exact epochs)."""
    w = (p | eowc_stream()).with_watermark("t", "5 minutes")
    windows = w.tumble("t", "1 hour").combine_per_key(["window_start"], n=sb.Count())
    return {"hourly": windows}, [w]


def file_epochs(p: sb.Pipeline, directory: str) -> StreamOutputs:
    """A directory of JSON files read as a stream: one epoch per file, in name order."""
    files = sb.ReadFiles(
        directory, format="json", schema={"k": str, "v": int, "t": datetime}, streaming=True
    )
    w = (p | files).with_watermark("t", "5 minutes")
    windows = w.tumble("t", "2 minutes").combine_per_key(["window_start"], total=sb.Sum("v"))
    return {"windows": windows}, [w]


def essentials(p: sb.Pipeline) -> StreamOutputs:
    """One short source through each kind of streaming operator the Spark runner builds, in
    few queries and no Python function (Spark Connect's tests): a watermark with late and
    invalid rows, a window sum, a sort, sessions counted, a window join, the late rows."""
    stream = (
        sb.TestStream()
        .add_epoch([{"k": "a", "v": 1, "t": at(10)}, {"k": "b", "v": 2, "t": at(8)}])
        .add_epoch(
            [
                {"k": "a", "v": 3, "t": at(5)},  # == watermark 10:05: kept
                {"k": "b", "v": 4, "t": at(5, -1)},  # one microsecond below: late
                {"k": "b", "v": 5, "t": at(5, 1)},
                {"k": "c", "v": 6, "t": None},  # no event time: invalid
                {"k": "a", "v": 7, "t": at(12.5)},
            ]
        )
        .add_epoch([{"k": "c", "v": 8, "t": at(21)}, {"k": "a", "v": 9, "t": at(16, 999)}])
    )
    w = (p | stream).with_watermark("t", "5 minutes")
    windows = w.tumble("t", "2 minutes")
    amounts = windows.select("k", "v", "window_start")
    times = windows.select("k", "t", "window_start")
    return {
        "sums": windows.combine_per_key(["k", "window_start"], total=sb.Sum("v")),
        "sorted": w.sort("t"),
        "sessions": w.session("t", "3 minutes", keys="k").combine_per_key(
            ["k", "window_start", "window_end"], n=sb.Count()
        ),
        "joined": amounts.join(times, on=["k", "window_start"]),
        "late": w.late_rows(),
    }, [w]


STREAM_BUILDERS: dict[str, Any] = {
    "hourly": hourly,
    "sessions": sessions,
    "joins": joins,
    "merged_origins": merged_origins,
    "sorted": sorted_stream,
    "windows": windows,
    "derived": derived,
    "integer_time": integer_time,
    "two_streams": two_streams,
}


def side_by_side(runs: Mapping[str, Callable[[], Any]]) -> dict[str, Any]:
    """Each of the named Spark `runs`, `SIDE_BY_SIDE` at once: what it returned, or the error
    it raised (each test reads its own through `outcome`)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=SIDE_BY_SIDE) as pool:
        futures = {name: pool.submit(run) for name, run in runs.items()}
        return {name: future.exception() or future.result() for name, future in futures.items()}


def outcome(results: Mapping[str, Any], name: str) -> Any:
    """What the run `name` of `side_by_side` returned (its error raised here, if it raised
    one)."""
    found = results[name]
    if isinstance(found, BaseException):
        raise found
    return found
