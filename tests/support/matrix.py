"""The support matrix: one small pipeline per feature, and what each mode does with it.

A mode is a runner and the input it reads (`MODES`): the direct runner with
one unit or parallel units over `TestStream`s, the Spark runner on bounded
input (`Create`), over `TestStream`s it replays, and over live sources
(`ReadFiles(streaming=True)`) into sinks. Each `Feature` builds its pipeline
for a mode and declares, for every mode, `Runs` (it gives the direct runner's
rows) or `Refused` with the runners' catalogue entry
(`sparkbeam/runners/*/limits.py`). `test_support_matrix.py` checks every
declaration; `table.py` renders them as the docs' "Where each runs" (docs/support.md).
"""

from __future__ import annotations

import datetime
import json
import os
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import pyarrow as pa
import pyarrow.parquet as pq

import sparkbeam as sb
from sparkbeam.graph import EdgeInfo, PrimitiveTransform
from sparkbeam.runners.direct import limits as direct_limits
from sparkbeam.runners.shared.refusals import (
    BATCH,
    DIRECT,
    LIVE,
    PARALLEL,
    STREAMING,
    Refusal,
)
from sparkbeam.runners.spark import limits as spark_limits
from sparkbeam.transforms.validation import single_input
from tests.agreement.streams import KeysSeen

SCHEMA = {"k": str, "t": int, "v": int}
Rows = list[dict[str, Any]]

A: list[Rows] = [
    [{"k": "a", "t": 1, "v": 1}, {"k": "b", "t": 6, "v": 2}],
    # t=4 is below the watermark 6 (late); t=None is invalid
    [{"k": "a", "t": 12, "v": 3}, {"k": "b", "t": 4, "v": 4}, {"k": "c", "t": None, "v": 5}],
]
B: list[Rows] = [[{"k": "a", "t": 2, "v": 6}], [{"k": "b", "t": 11, "v": 7}]]


@attrs.frozen
class Runs:
    """The mode runs the feature: the same rows as the direct runner on the same input
    (on live sources: planned and started without a refusal)."""

    text: str = "yes"
    """The table's cell."""
    compared: bool = True
    """Whether its rows are the direct runner's. Not where the mode is allowed to differ
    (parallel units judge `policy="max"` per unit): then only that it runs is checked."""


@attrs.frozen
class Refused:
    """The mode refuses the feature with `refusal`, before any query runs."""

    refusal: Refusal
    at: str = "run"
    """When: `"run"` (`p.run()`), or `"collect"` (collecting the output: the query of a
    PCollection is planned when it is first asked for)."""


Outcome = Runs | Refused


@attrs.frozen
class Mode:
    """A runner and the kind of input its sources are: how a feature's pipeline is built."""

    name: str
    directory: str
    """Where files for live sources and connectors go."""
    reference: bool = False
    """Built for the direct runner's reference rows (sources of the mode's kind, no
    connector)."""

    @property
    def kind(self) -> str:
        """`"bounded"` (`Create`), `"live"` (`ReadFiles(streaming=True)`) or `"stream"`."""
        return {BATCH: "bounded", LIVE: "live"}.get(self.name, "stream")

    def source(self, p: sb.Pipeline, label: str, epochs: Sequence[Rows]) -> sb.PCollection:
        """Rows by epoch, as this mode's sources give them."""
        if self.kind == "bounded":
            return p | label >> sb.Create([row for rows in epochs for row in rows], SCHEMA)
        if self.kind == "live":
            path = self._files(label, epochs)
            return p | label >> sb.ReadFiles(path, "json", schema=SCHEMA, streaming=True)
        return self.replayed(p, label, epochs)

    def replayed(self, p: sb.Pipeline, label: str, epochs: Sequence[Rows]) -> sb.PCollection:
        """A source the runner replays: a `Create` on bounded input, else a `TestStream`."""
        if self.kind == "bounded":
            return self.source(p, label, epochs)
        stream = sb.TestStream(SCHEMA)
        for rows in epochs:
            stream.add_epoch(rows)
        return p | label >> stream

    def connector(self, p: sb.Pipeline, label: str, epochs: Sequence[Rows]) -> sb.PCollection:
        """A `ReadFromSpark` of JSON files (bounded on bounded input and where the other
        sources are replayed; the reference reads the rows as the mode's source)."""
        if self.reference:
            return self.source(p, label, epochs)
        path = self._files(label, epochs)
        bounded = self.kind != "live"
        read = sb.ReadFromSpark("json", {"path": path}, schema=SCHEMA, bounded=bounded)
        return p | label >> read

    def _files(self, label: str, epochs: Sequence[Rows]) -> str:
        path = os.path.join(self.directory, label)
        os.makedirs(path, exist_ok=True)
        for index, rows in enumerate(epochs):
            with open(os.path.join(path, f"part-{index:03d}.json"), "w") as handle:
                handle.writelines(json.dumps(row) + "\n" for row in rows)
        return path


class Unknown(PrimitiveTransform):
    """A primitive transform no runner knows (a user's own)."""

    def infer(self, inputs: Sequence[EdgeInfo], label: str) -> EdgeInfo:
        return single_input(inputs, label)


Build = Callable[[sb.Pipeline, Mode], list[sb.PCollection]]


@attrs.frozen
class Feature:
    """One row of the matrix: a feature, its pipeline, and each mode's outcome."""

    name: str
    """The row's name in docs/support.md (Markdown)."""
    build: Build
    """The pipeline for a mode; returns the PCollections to compare."""
    outcomes: dict[str, Outcome]
    metrics: bool = False
    """Compare `metrics()` counts as well as the rows."""


def _outcomes(default: Outcome = Runs(), **modes: Outcome) -> dict[str, Outcome]:
    return {mode: modes.get(mode, default) for mode in (DIRECT, PARALLEL, BATCH, STREAMING, LIVE)}


def watermarked(p: sb.Pipeline, mode: Mode, label: str = "a", epochs: Any = A) -> sb.PCollection:
    return mode.source(p, label, epochs).with_watermark("t", 0)


def two_watermarked(p: sb.Pipeline, mode: Mode) -> tuple[sb.PCollection, sb.PCollection]:
    return watermarked(p, mode, "a", A), watermarked(p, mode, "b", B)


def window_sides(
    p: sb.Pipeline, mode: Mode, right_size: int = 10
) -> tuple[sb.PCollection, sb.PCollection]:
    a, b = two_watermarked(p, mode)
    left = a.tumble("t", 10).select("window_start", left="v")
    right = b.tumble("t", right_size).select("window_start", right="v")
    return left, right


def transforms(p: sb.Pipeline, mode: Mode) -> list[sb.PCollection]:
    """Row-wise transforms, windows and aggregates in one query."""
    w = watermarked(p, mode)
    kept = w.filter(lambda row: row["v"] != 3)
    scaled = kept.map(lambda row: {**row, "v": row["v"] * 10}, schema=SCHEMA, keeps=("t",))
    shifted = scaled.select("k", "v", t=sb.col("t") + 5)
    windows = shifted.tumble("t", 10).union(shifted.hop("t", 10, 5))
    aggregates = {"n": sb.Count(), "total": sb.Sum("v"), "seen": KeysSeen()}
    return [windows.combine_per_key(["window_start"], **aggregates)]


def flat_and_set_aggregates(p: sb.Pipeline, mode: Mode) -> list[sb.PCollection]:
    """`FlatMap`, `Partition` and SPEC section 7's aggregates in one query."""
    w = watermarked(p, mode)
    twice = w.flat_map(lambda row: [row, {**row, "v": -row["v"]}], keeps=("t",))
    small, large = twice.partition(lambda row, n: int(row["v"] > 2), 2)
    aggregates = {
        "distinct": sb.CountDistinct("k"),
        "keys": sb.CollectSet("k"),
        "first": sb.MinBy("k", "v"),
        "last": sb.MaxBy("k", "v"),
        "any": sb.Any("positive"),
        "all": sb.All("positive"),
    }
    flagged = small.union(large).map(
        lambda row: {**row, "positive": row["v"] > 0},
        schema={**SCHEMA, "positive": bool},
        keeps=("t",),
    )
    return [large, flagged.tumble("t", 10).combine_per_key(["window_start"], **aggregates)]


def emit_event(p: sb.Pipeline, mode: Mode) -> list[sb.PCollection]:
    return [mode.source(p, "a", A).with_watermark("t", 0, emit="event")]


def update_mode(p: sb.Pipeline, mode: Mode) -> list[sb.PCollection]:
    """Early results of windows, and their final rows."""
    windows = watermarked(p, mode).tumble("t", 10)
    aggregates = {"n": sb.Count(), "total": sb.Sum("v")}
    updates = windows.combine_per_key(["window_start"], emit="update", **aggregates)
    return [updates, updates.finals()]


def update_session_start(p: sb.Pipeline, mode: Mode) -> list[sb.PCollection]:
    sessions = watermarked(p, mode).session("t", 3, keys="k")
    return [sessions.combine_per_key(["k", "window_start"], emit="update", n=sb.Count())]


def update_without_watermark(p: sb.Pipeline, mode: Mode) -> list[sb.PCollection]:
    return [mode.source(p, "a", A).combine_per_key("k", emit="update", n=sb.Count())]


def update_lateness_apart(p: sb.Pipeline, mode: Mode) -> list[sb.PCollection]:
    a = mode.source(p, "a", A).with_watermark("t", 0, allowed_lateness=5)
    b = mode.source(p, "b", B).with_watermark("t", 0)
    windows = a.union(b).tumble("t", 10)
    return [windows.combine_per_key(["window_start"], emit="update", n=sb.Count())]


def update_after_merge(p: sb.Pipeline, mode: Mode) -> list[sb.PCollection]:
    """Early results of the windows of a Union of two `WithWatermark`s."""
    a, b = two_watermarked(p, mode)
    windows = a.union(b).tumble("t", 10)
    return [windows.combine_per_key(["window_start"], emit="update", n=sb.Count())]


def update_after_session(p: sb.Pipeline, mode: Mode) -> list[sb.PCollection]:
    """A running count of each key's sessions' rows: the sessions still open when the
    input ends reach it only then."""
    sessions = watermarked(p, mode).session("t", 3, keys="k")
    return [sessions.combine_per_key(["k"], emit="update", n=sb.Count())]


def sort_session(p: sb.Pipeline, mode: Mode) -> list[sb.PCollection]:
    return [watermarked(p, mode).sort("t").session("t", 3, keys="k")]


def session_start_downstream(p: sb.Pipeline, mode: Mode) -> list[sb.PCollection]:
    return [watermarked(p, mode).session("t", 3, keys="k").sort("window_start")]


def merges(p: sb.Pipeline, mode: Mode, policy: str = "min") -> list[sb.PCollection]:
    """A `Union` of two `WithWatermark`s, then a window `Join` with one of them."""
    a, b = two_watermarked(p, mode)
    left = a.union(b, policy=policy).tumble("t", 10).select("window_start", left="v")
    right = b.tumble("t", 10).select("window_start", right="v")
    return [left.join(right, on="window_start", how="full", policy=policy)]


def interval_join(p: sb.Pipeline, mode: Mode) -> list[sb.PCollection]:
    """Both sides of one `WithWatermark` (one query)."""
    w = watermarked(p, mode)
    later = w.select("k", u="t", r="v")
    return [w.join(later, on="k", times=("t", "u"), within=(0, 10))]


LATER_UNMATCHED = Runs(
    "yes; a row that finds no match may come out micro-batches later than on the direct "
    "runner (when the other side's watermark is ahead: Spark waits for the minimum of both)",
    compared=False,
)


def outer_interval_join_meet(p: sb.Pipeline, mode: Mode) -> list[sb.PCollection]:
    a, b = two_watermarked(p, mode)
    return [a.join(b, on="k", how="left", times=("t", "t"), within=(0, 10))]


def interval_join_max(p: sb.Pipeline, mode: Mode) -> list[sb.PCollection]:
    a, b = two_watermarked(p, mode)
    return [a.join(b, on="k", times=("t", "t"), within=(0, 10), policy="max")]


def dropped_rows(p: sb.Pipeline, mode: Mode) -> list[sb.PCollection]:
    """Late and invalid rows in one output (an invalid row's `late_watermark` is None)."""
    w = watermarked(p, mode)
    late_schema = {**SCHEMA, "late_watermark": int}
    invalid = w.invalid_rows().map(lambda row: {**row, "late_watermark": None}, late_schema)
    return [w.late_rows().union(invalid)]


def dropped_rows_meeting(p: sb.Pipeline, mode: Mode) -> list[sb.PCollection]:
    a, b = two_watermarked(p, mode)
    late = a.late_rows().select("k", "t", "v")
    return [late.union(a.union(b))]


def policies_meet(p: sb.Pipeline, mode: Mode) -> list[sb.PCollection]:
    a, b = two_watermarked(p, mode)
    return [a.union(b, policy="max").union(b.union(a))]


def union_derived_apart(p: sb.Pipeline, mode: Mode) -> list[sb.PCollection]:
    a, b = two_watermarked(p, mode)
    return [a.select("k", t=sb.col("t") + 5, v="v").union(b, policy="max")]


def join_key_derived_apart(p: sb.Pipeline, mode: Mode) -> list[sb.PCollection]:
    left, right = window_sides(p, mode, right_size=20)
    return [left.join(right, on="window_start")]


def merged_derived_apart(p: sb.Pipeline, mode: Mode) -> list[sb.PCollection]:
    a, b = two_watermarked(p, mode)
    windows = a.tumble("t", 10).union(b.tumble("t", 5))
    return [windows.combine_per_key(["window_end"], n=sb.Count())]


def chained(p: sb.Pipeline, mode: Mode) -> list[sb.PCollection]:
    a = watermarked(p, mode)
    return [a.union(a.with_watermark("t", 5))]


def idle_epochs(p: sb.Pipeline, mode: Mode) -> list[sb.PCollection]:
    a = watermarked(p, mode)
    b = mode.source(p, "b", B[:1]).with_watermark("t", 0, idle_after=1)
    return [a.union(b).tumble("t", 10).combine_per_key(["window_start"], n=sb.Count())]


def idle_time(p: sb.Pipeline, mode: Mode) -> list[sb.PCollection]:
    return [mode.source(p, "a", A).with_watermark("t", 0, idle_after="30 seconds")]


FAST: list[Rows] = [
    [{"k": "f", "t": 1, "v": 1}],
    [{"k": "f", "t": 20, "v": 2}],
    [{"k": "f", "t": 30, "v": 3}],
]
SLOW: list[Rows] = [
    [{"k": "s", "t": 0, "v": 4}],
    [{"k": "s", "t": 2, "v": 5}],
    [{"k": "s", "t": 4, "v": 6}],
]


def drifting(p: sb.Pipeline, mode: Mode, idle_after: int | None = None) -> list[sb.PCollection]:
    """After epoch 1 the fast source is 18 ahead of the slow one: its epoch 2 waits."""
    fast = mode.source(p, "fast", FAST).with_watermark("t", 0, max_drift=5)
    slow = mode.source(p, "slow", SLOW).with_watermark("t", 0, idle_after=idle_after)
    fast.union(slow)
    return [fast]


def drifting_and_idle(p: sb.Pipeline, mode: Mode) -> list[sb.PCollection]:
    return drifting(p, mode, idle_after=1)


def metrics(p: sb.Pipeline, mode: Mode) -> list[sb.PCollection]:
    return [watermarked(p, mode).tumble("t", 10)]


def object_column(p: sb.Pipeline, mode: Mode) -> list[sb.PCollection]:
    rows = mode.source(p, "a", A)
    payload = {"k": str, "payload": object}
    return [rows.map(lambda row: {"k": row["k"], "payload": [row["v"]]}, schema=payload)]


def parquet_nanoseconds(p: sb.Pipeline, mode: Mode) -> list[sb.PCollection]:
    """A parquet file of nanosecond timestamps (pyarrow's and pandas' own unit)."""
    path = os.path.join(mode.directory, "nanoseconds")
    os.makedirs(path, exist_ok=True)
    times = pa.array([datetime.datetime(2026, 4, 1, 10, 0, 0, 5)], pa.timestamp("ns"))
    pq.write_table(pa.table({"k": ["a"], "t": times}), os.path.join(path, "part-000.parquet"))
    return [p | sb.ReadFiles(path, streaming=mode.kind != "bounded")]


def parquet_unsigned(p: sb.Pipeline, mode: Mode) -> list[sb.PCollection]:
    """A parquet file of unsigned 64-bit integers."""
    path = os.path.join(mode.directory, "unsigned")
    os.makedirs(path, exist_ok=True)
    table = pa.table({"k": ["a"], "v": pa.array([7], pa.uint64())})
    pq.write_table(table, os.path.join(path, "part-000.parquet"))
    return [p | sb.ReadFiles(path, streaming=mode.kind != "bounded")]


def connector(p: sb.Pipeline, mode: Mode) -> list[sb.PCollection]:
    return [mode.connector(p, "json", A).union(mode.source(p, "a", B))]


def collected(p: sb.Pipeline, mode: Mode) -> list[sb.PCollection]:
    """On live sources: a connector (`ReadFiles(streaming=True)` is replayed for `collect`)."""
    source = mode.connector if mode.name == LIVE else mode.source
    return [source(p, "a", A).with_watermark("t", 0)]


def live_and_replayed(p: sb.Pipeline, mode: Mode) -> list[sb.PCollection]:
    return [mode.source(p, "a", A).union(mode.replayed(p, "b", B))]


def unknown(p: sb.Pipeline, mode: Mode) -> list[sb.PCollection]:
    return [mode.source(p, "a", A) | Unknown()]


S = spark_limits
D = direct_limits
ONE_EPOCH = Runs("accepted, changes nothing (one epoch)")

FEATURES: tuple[Feature, ...] = (
    Feature(
        "`Map`, `Filter`, `Select`, `Tumble`, `Hop`, `CombinePerKey` (built-in aggregates "
        "and a `CombineFn`)",
        transforms,
        _outcomes(),
    ),
    Feature(
        "`FlatMap`, `Partition`, `CombinePerKey` with `CountDistinct`, `CollectSet`, `MinBy`, "
        "`MaxBy`, `Any`, `All`",
        flat_and_set_aggregates,
        _outcomes(),
    ),
    Feature("`Sort`, `Session`", sort_session, _outcomes()),
    Feature(
        "`Union` of two `WithWatermark`s, window `Join` (on a window key watermarked on both "
        "sides)",
        merges,
        _outcomes(live=Runs("yes (a stage query per `WithWatermark`)")),
    ),
    Feature("interval `Join` (`times=`, `within=`)", interval_join, _outcomes()),
    Feature(
        "`late_rows()`, `invalid_rows()`",
        dropped_rows,
        _outcomes(batch=Runs("yes (late rows: none in one epoch)")),
    ),
    Feature(
        "`late_rows()` of a `WithWatermark` whose watermark meets another's in the same query",
        dropped_rows_meeting,
        _outcomes(
            streaming=Refused(S.DROPPED_ROWS_MEET, at="collect"),
            live=Refused(S.DROPPED_ROWS_MEET),
        ),
    ),
    Feature(
        '`policy="max"` on `Union` and window `Join`',
        lambda p, mode: merges(p, mode, "max"),
        _outcomes(batch=ONE_EPOCH),
    ),
    Feature(
        '`policy="max"` on an interval `Join`',
        interval_join_max,
        _outcomes(
            batch=ONE_EPOCH,
            streaming=Refused(S.INTERVAL_JOIN_MAX),
            live=Refused(S.INTERVAL_JOIN_MAX),
        ),
    ),
    Feature(
        "an outer interval `Join` of two `WithWatermark`s",
        outer_interval_join_meet,
        _outcomes(
            streaming=LATER_UNMATCHED,
            live=LATER_UNMATCHED,
        ),
    ),
    Feature(
        '`policy="max"` and `policy="min"` merges in one query',
        policies_meet,
        _outcomes(
            batch=ONE_EPOCH,
            streaming=Refused(S.POLICIES_MEET),
            live=Refused(S.POLICIES_MEET),
        ),
    ),
    Feature(
        '`Union` under `policy="max"` of a column derived differently on its inputs',
        union_derived_apart,
        _outcomes(
            batch=ONE_EPOCH,
            streaming=Refused(S.UNION_DERIVED_APART),
            live=Refused(S.UNION_DERIVED_APART),
        ),
    ),
    Feature(
        "window `Join` on a key derived differently on its two sides",
        join_key_derived_apart,
        _outcomes(
            streaming=Refused(S.JOIN_KEY_DERIVED_APART),
            live=Refused(S.JOIN_KEY_DERIVED_APART),
        ),
    ),
    Feature(
        "`CombinePerKey` on `window_end` after a `Union` of windows of different sizes over two "
        "`WithWatermark`s",
        merged_derived_apart,
        _outcomes(
            streaming=Refused(S.MERGED_DERIVED_APART),
            live=Refused(S.MERGED_DERIVED_APART),
        ),
    ),
    Feature(
        "`Union` of watermarks of `WithWatermark`s chained one after another",
        chained,
        _outcomes(streaming=Refused(S.CHAINED_WATERMARKS), live=Refused(S.CHAINED_WATERMARKS)),
    ),
    Feature(
        "`Session`'s `window_start` keyed downstream (here by `Sort`; a `CombinePerKey` "
        "right after the `Session` runs)",
        session_start_downstream,
        _outcomes(streaming=Refused(S.HELD_WINDOW_START), live=Refused(S.HELD_WINDOW_START)),
    ),
    Feature(
        "`idle_after` (epochs)",
        idle_epochs,
        _outcomes(
            batch=ONE_EPOCH,
            live=Refused(S.IDLE_LIVE_MERGE),
        ),
    ),
    Feature(
        '`idle_after="30 seconds"` (processing time)',
        idle_time,
        _outcomes(
            direct=Refused(D.IDLE_PROCESSING_TIME),
            parallel=Refused(D.IDLE_PROCESSING_TIME),
            batch=ONE_EPOCH,
            streaming=Refused(S.IDLE_PROCESSING_TIME),
            live=Refused(S.IDLE_PROCESSING_TIME),
        ),
    ),
    Feature(
        "`max_drift`",
        drifting,
        _outcomes(
            batch=ONE_EPOCH,
            live=Refused(S.MAX_DRIFT_LIVE),
        ),
    ),
    Feature(
        "`max_drift` and `idle_after` in one pipeline",
        drifting_and_idle,
        _outcomes(
            batch=ONE_EPOCH,
            streaming=Refused(S.MAX_DRIFT_WITH_IDLE, at="collect"),
            live=Refused(S.MAX_DRIFT_LIVE),
        ),
    ),
    Feature(
        "`metrics()` (compared: rows in and out, late and invalid rows)",
        metrics,
        _outcomes(
            direct=Runs("all fields"),
            parallel=Runs("all fields, over units"),
            batch=Runs("rows, drops, the `WithWatermark`s' watermarks; state `None`"),
            streaming=Runs("rows, drops, every watermark; state `None`"),
            live=Runs("yes (the queries' counts so far)"),
        ),
        metrics=True,
    ),
    Feature(
        '`emit="event"`',
        emit_event,
        _outcomes(
            batch=Refused(S.EMIT_EVENT),
            streaming=Refused(S.EMIT_EVENT),
            live=Refused(S.EMIT_EVENT),
        ),
    ),
    Feature(
        '`CombinePerKey(emit="update")` (early results) and `finals()`',
        update_mode,
        _outcomes(
            streaming=Runs("yes (replayed sources: the same rows in the same epochs)"),
            live=Runs("yes (the direct runner's change rows, as a multiset)"),
        ),
    ),
    Feature(
        '`CombinePerKey(emit="update")` keyed on a `Session`\'s `window_start`',
        update_session_start,
        _outcomes(
            batch=Refused(S.UPDATE_AFTER_HELD_ROWS),
            streaming=Refused(S.UPDATE_HELD_KEY),
            live=Refused(S.UPDATE_HELD_KEY),
        ),
    ),
    Feature(
        '`CombinePerKey(emit="update")` with no `WithWatermark` upstream (a running aggregate)',
        update_without_watermark,
        _outcomes(
            streaming=Refused(S.UPDATE_WITHOUT_WATERMARK),
            live=Refused(S.UPDATE_WITHOUT_WATERMARK),
        ),
    ),
    Feature(
        '`CombinePerKey(emit="update")` over `WithWatermark`s with different `allowed_lateness`',
        update_lateness_apart,
        _outcomes(
            streaming=Refused(S.UPDATE_LATENESS_APART),
            live=Refused(S.UPDATE_LATENESS_APART),
        ),
    ),
    Feature(
        '`CombinePerKey(emit="update")` after a `Union` or `Join` of two `WithWatermark`s',
        update_after_merge,
        _outcomes(live=Refused(S.UPDATE_LIVE_MERGE)),
    ),
    Feature(
        '`CombinePerKey(emit="update")` downstream of a `Session` (or a `Sort`, a '
        "`CombinePerKey`, an outer `Join`)",
        update_after_session,
        _outcomes(
            batch=Refused(S.UPDATE_AFTER_HELD_ROWS),
            streaming=Refused(S.UPDATE_AFTER_HELD_ROWS),
            live=Refused(S.UPDATE_AFTER_HELD_ROWS),
        ),
    ),
    Feature(
        "a column of type `object`",
        object_column,
        _outcomes(
            batch=Refused(S.OBJECT_COLUMN),
            streaming=Refused(S.OBJECT_COLUMN),
            live=Refused(S.OBJECT_COLUMN),
        ),
    ),
    Feature(
        "parquet files of nanosecond timestamps (pandas' `to_parquet` default)",
        parquet_nanoseconds,
        _outcomes(live=Refused(S.PARQUET_LIVE_NANOSECONDS)),
    ),
    Feature(
        "parquet files of unsigned 64-bit integers",
        parquet_unsigned,
        _outcomes(batch=Refused(S.PARQUET_UINT64), live=Refused(S.PARQUET_UINT64)),
    ),
    Feature(
        "`ReadFromSpark` (Spark's connectors: bounded in a batch job, else live)",
        connector,
        _outcomes(
            direct=Refused(D.READ_FROM_SPARK),
            parallel=Refused(D.READ_FROM_SPARK),
            streaming=Refused(S.BOUNDED_READ_IN_STREAM),
        ),
    ),
    Feature(
        "`collect` (and the other results) of a PCollection (live: of `ReadFromSpark`; "
        "`ReadFiles(streaming=True)` is replayed)",
        collected,
        _outcomes(live=Refused(S.COLLECT_LIVE, at="collect")),
    ),
    Feature(
        "a live and a replayed source in one query",
        live_and_replayed,
        _outcomes(live=Refused(S.LIVE_AND_REPLAYED)),
    ),
    Feature(
        "a primitive transform of one's own",
        unknown,
        _outcomes(
            direct=Refused(D.NO_OPERATOR),
            parallel=Refused(D.NO_OPERATOR),
            batch=Refused(S.NO_TRANSLATION),
            streaming=Refused(S.NO_TRANSLATION),
            live=Refused(S.NO_TRANSLATION),
        ),
    ),
)
