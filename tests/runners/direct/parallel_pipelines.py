"""Random inputs and pipelines for the parallel-runner properties.

`Scenario`: two `TestStream`s of rows `{"t": int, "k": str, "v": int}` go
through a `WithWatermark` each (`a` with `emit` periodic or event, `b`
periodic) and then into every keyed shape: tumble + CombinePerKey, Sort
without and with keys, Session, Union + CombinePerKey, a full window join, a
left interval join, and a Sort after a CombinePerKey.

`Plan`: one to three sources and a random graph of every transform over them
(`plans`), compared epoch by epoch (`observe`, `assert_identical`).

Outputs are compared in a canonical form: as a multiset of rows, and, after
a `Sort`, also as the sequence of sort-column values within each key (ties
in the sort column have no defined order across units; SPEC and docs/testing.md).
All values are integers (no float sums to add in another order), except
`Mean`, which divides equal integer totals and counts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import attrs
from hypothesis import strategies as st

import sparkbeam as sb

Row = dict[str, Any]
SCHEMA = {"t": int, "k": str, "v": int}
HUGE_DELAY = 10**9
"""A delay larger than any time span drawn: a filter with it drops nothing."""

SORTED = {"sort": ("t", ()), "sort_by_key": ("t", ("k",)), "sorted_groups": ("window_start", ())}


@attrs.frozen
class Scenario:
    epochs_a: list[list[Row]]
    epochs_b: list[list[Row]]
    delay_a: int
    delay_b: int
    emit_a: str
    size: int
    gap: int
    within: tuple[int, int]

    @property
    def epochs(self) -> int:
        return max(len(self.epochs_a), len(self.epochs_b))


def _epochs(draw: st.DrawFn, count: int, drift: int, jitter: int) -> list[list[Row]]:
    epochs = []
    for epoch in range(count):
        rows = []
        for _ in range(draw(st.integers(0, 6))):
            t = (
                None
                if draw(st.integers(0, 15)) == 0
                else epoch * drift + draw(st.integers(-jitter, jitter))
            )
            rows.append({"t": t, "k": draw(st.sampled_from("abc")), "v": draw(st.integers(0, 9))})
        epochs.append(rows)
    return epochs


@st.composite
def scenarios(draw: st.DrawFn, max_epochs: int = 5) -> Scenario:
    """Random epochs; about half of them have no row late at parallelism 1."""
    drift = draw(st.integers(0, 12))
    jitter = draw(st.integers(0, 10))
    # A delay of at least 2 * jitter makes every row on time at parallelism 1.
    low, high = (2 * jitter, 2 * jitter + 8) if draw(st.booleans()) else (0, jitter)
    return Scenario(
        epochs_a=_epochs(draw, draw(st.integers(1, max_epochs)), drift, jitter),
        epochs_b=_epochs(draw, draw(st.integers(1, max_epochs)), drift, jitter),
        delay_a=draw(st.integers(low, high)),
        delay_b=draw(st.integers(low, high)),
        emit_a=draw(st.sampled_from(["periodic", "event"])),
        size=draw(st.integers(1, 12)),
        gap=draw(st.integers(1, 6)),
        within=(draw(st.integers(-4, 0)), draw(st.integers(0, 4))),
    )


def _stream(p: sb.Pipeline, label: str, epochs: Sequence[Sequence[Row]]) -> sb.PCollection:
    stream = sb.TestStream(schema=SCHEMA)
    for rows in epochs:
        stream.add_epoch(rows)
    return p | label >> stream


@attrs.frozen
class Built:
    a: sb.PCollection
    b: sb.PCollection
    outputs: dict[str, sb.PCollection]


def build(
    p: sb.Pipeline,
    sc: Scenario,
    epochs_a: Sequence[Sequence[Row]] | None = None,
    epochs_b: Sequence[Sequence[Row]] | None = None,
) -> Built:
    """The wide pipeline; with other epochs given, filters that drop nothing (the reference)."""
    reference = epochs_a is not None
    a = _stream(p, "a", sc.epochs_a if epochs_a is None else epochs_a)
    b = _stream(p, "b", sc.epochs_b if epochs_b is None else epochs_b)
    wa = a.with_watermark("t", HUGE_DELAY if reference else sc.delay_a, emit=sc.emit_a)
    wb = b.with_watermark("t", HUGE_DELAY if reference else sc.delay_b)
    window_a, window_b = wa.tumble("t", sc.size), wb.tumble("t", sc.size)
    combined = window_a.combine_per_key(
        ["window_start", "k"], n=sb.Count(), total=sb.Sum("v"), mean=sb.Mean("v")
    )
    outputs = {
        "combine": combined,
        "sort": wa.sort("t"),
        "sort_by_key": wa.sort("t", keys="k"),
        "session": wa.session("t", sc.gap, keys="k"),
        "union": wa.union(wb).tumble("t", sc.size).combine_per_key(["window_start"], n=sb.Count()),
        "window_join": window_a.join(window_b, on=["window_start", "k"], how="full"),
        "interval_join": wa.join(wb, on="k", how="left", times=("t", "t"), within=sc.within),
        "sorted_groups": combined.sort("window_start"),
    }
    return Built(wa, wb, outputs)


def _row_key(row: Row) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(row.items()))


def canonical(name: str, rows: list[Row]) -> Any:
    """What must agree between two runs: the multiset, and the order a Sort promises."""
    bag = Counter(map(_row_key, rows))
    if name not in SORTED:
        return bag
    column, keys = SORTED[name]
    sequences: dict[tuple[Any, ...], list[Any]] = {}
    for row in rows:
        sequences.setdefault(tuple(row[k] for k in keys), []).append(row[column])
    return bag, sequences


@attrs.frozen
class Outcome:
    """A run's outputs in canonical form, its counters, and the rows its filters passed."""

    outputs: dict[str, Any]
    by_epoch: dict[str, list[Counter[tuple[tuple[str, Any], ...]]]]
    """Each output's rows per epoch, as multisets."""
    late: tuple[int, int]
    invalid: tuple[int, int]
    passed: tuple[list[list[Row]], list[list[Row]]]
    result: Any


def run(sc: Scenario, runner: sb.DirectRunner | None = None, **reference: Any) -> Outcome:
    p = sb.Pipeline(runner=runner or sb.DirectRunner())
    built = build(p, sc, **reference)
    result = p.run()
    return Outcome(
        outputs={name: canonical(name, result.collect(pc)) for name, pc in built.outputs.items()},
        by_epoch={
            name: [Counter(map(_row_key, rows)) for rows in result.collect_by_epoch(pc)]
            for name, pc in built.outputs.items()
        },
        late=(result.late_count(built.a), result.late_count(built.b)),
        invalid=(result.invalid_count(built.a), result.invalid_count(built.b)),
        passed=(result.collect_by_epoch(built.a)[:-1], result.collect_by_epoch(built.b)[:-1]),
        result=result,
    )


def reference_on(sc: Scenario, outcome: Outcome) -> Outcome:
    """The single-unit run, dropping nothing, on the rows `outcome`'s filters passed."""
    return run(sc, epochs_a=outcome.passed[0], epochs_b=outcome.passed[1])


def assert_same(actual: Outcome, expected: Outcome) -> None:
    for name, value in expected.outputs.items():
        assert actual.outputs[name] == value, f"{name} differs"


def assert_explained(sc: Scenario, actual: Outcome, single: Outcome) -> None:
    """The property of a run with units: equal to parallelism 1, or explained by late rows.

    With both filters periodic (one global watermark per epoch) the outputs
    and counters are equal, epoch by epoch. With `a` under `emit="event"`
    the final outputs are equal when no row is late at parallelism 1;
    otherwise the units' local watermarks are never above the single unit's,
    so they drop a subset of its late rows, and everything after the filters
    is exactly what the single unit computes on the rows they passed.
    """
    assert actual.invalid == single.invalid
    if sc.emit_a == "periodic":
        assert actual.late == single.late
        assert_same(actual, single)
        assert actual.by_epoch == single.by_epoch
        return
    if single.late == (0, 0):
        assert actual.late == single.late
        assert_same(actual, single)
        return
    assert actual.late[0] <= single.late[0]
    assert actual.late[1] == single.late[1]  # b is periodic
    assert_same(actual, reference_on(sc, actual))


# Random streaming pipelines: several sources, a random graph of transforms.


@attrs.frozen
class Step:
    """One transform of a random graph: its kind, the row streams it reads (indices into
    the pool of row streams built so far) and its parameters."""

    kind: str
    inputs: tuple[int, ...]
    params: tuple[Any, ...] = ()


@attrs.frozen
class SourcePlan:
    epochs: list[list[Row]]
    delay: int
    idle_after: int | None = None
    max_drift: int | None = None


@attrs.frozen
class Plan:
    """A random pipeline over `TestStream`s of rows `{"t": int, "k": str, "v": int}`.

    Each source goes through a `WithWatermark` (periodic) at once; the row
    streams (every stream with the source's schema: filtered, mapped,
    shifted, watermarked again, unioned, sorted) form a pool that later steps
    read; windows, groups, sessions and joins are outputs. Every PCollection
    is compared, and every filter's late and invalid rows.
    """

    sources: list[SourcePlan]
    steps: list[Step]

    @property
    def epochs(self) -> int:
        return max(len(source.epochs) for source in self.sources)


def _not_multiple(m: int) -> Any:
    return lambda row: row["v"] % m != 0


def _bump(row: Row) -> Row:
    return {**row, "v": row["v"] + 1}


@attrs.frozen
class Graph:
    """A built random pipeline: every PCollection by name, the sort order each promises, and
    the transforms whose late (and invalid) rows are counted."""

    outputs: dict[str, sb.PCollection]
    sorted_by: dict[str, tuple[str, tuple[str, ...]]]
    filters: list[sb.PCollection]
    merges: list[sb.PCollection]


def build_plan(p: sb.Pipeline, plan: Plan) -> Graph:
    outputs: dict[str, sb.PCollection] = {}
    sorted_by: dict[str, tuple[str, tuple[str, ...]]] = {}
    filters: list[sb.PCollection] = []
    merges: list[sb.PCollection] = []
    pool: list[sb.PCollection] = []

    def keep(name: str, pc: sb.PCollection, row_stream: bool = False) -> sb.PCollection:
        outputs[f"{len(outputs)}:{name}"] = pc
        if row_stream:
            pool.append(pc)
        return pc

    def watermarked(pc: sb.PCollection, name: str, delay: int, **options: Any) -> None:
        w = keep(name, pc.with_watermark("t", delay, **options), row_stream=True)
        filters.append(w)
        keep(f"late rows of {name}", w.late_rows())
        keep(f"invalid rows of {name}", w.invalid_rows())

    for index, source in enumerate(plan.sources):
        stream = sb.TestStream(schema=SCHEMA)
        for rows in source.epochs:
            stream.add_epoch(rows)
        options = {"idle_after": source.idle_after, "max_drift": source.max_drift}
        watermarked(p | f"s{index}" >> stream, f"w{index}", source.delay, **options)
    for step in plan.steps:
        ins = [pool[i] for i in step.inputs]
        kind, params = step.kind, step.params
        if kind == "filter":
            keep(kind, ins[0].filter(_not_multiple(params[0])), row_stream=True)
        elif kind == "map":
            keep(kind, ins[0].map(_bump, keeps=["t", "k"]), row_stream=True)
        elif kind == "shift":
            shifted = ins[0].select("k", "v", t=sb.col("t") + params[0]).select("t", "k", "v")
            keep(kind, shifted, row_stream=True)
        elif kind == "watermark":
            watermarked(ins[0], f"watermark {len(filters)}", params[0])
        elif kind == "union":
            union = keep(kind, ins[0].union(ins[1], policy=params[0]), row_stream=True)
            merges.append(union)
            keep("late rows of union", union.late_rows())
        elif kind == "sort":
            keys = ("k",) if params[0] else ()
            keep(kind, ins[0].sort("t", keys=keys), row_stream=True)
            sorted_by[list(outputs)[-1]] = ("t", keys)
        elif kind == "tumble_combine":
            size, sort_after = params
            groups = keep(
                kind,
                ins[0]
                .tumble("t", size)
                .combine_per_key(
                    ["window_start", "k"], n=sb.Count(), total=sb.Sum("v"), low=sb.Min("t")
                ),
            )
            if sort_after:
                keep("sorted groups", groups.sort("window_start"))
                sorted_by[list(outputs)[-1]] = ("window_start", ())
        elif kind == "hop_combine":
            size, slide = params
            hopped = ins[0].hop("t", size, slide)
            keep(kind, hopped.combine_per_key(["window_start"], n=sb.Count(), high=sb.Max("v")))
        elif kind == "session":
            size, keyed = params
            keep(kind, ins[0].session("t", size, keys=("k",) if keyed else ()))
        elif kind == "window_join":
            size, how, policy = params
            left, right = ins[0].tumble("t", size), ins[1].tumble("t", size)
            joined = keep(kind, left.join(right, on=["window_start", "k"], how=how, policy=policy))
            merges.append(joined)
            keep("late rows of window join", joined.late_rows())
        elif kind == "interval_join":
            how, low, high = params
            joined = ins[0].join(ins[1], on="k", how=how, times=("t", "t"), within=(low, high))
            keep(kind, joined)
        else:
            raise AssertionError(kind)
    return Graph(outputs, sorted_by, filters, merges)


def delays(jitter: int) -> st.SearchStrategy[int]:
    """Mostly below the jitter (rows come late), sometimes enough for none to."""
    return st.one_of(st.integers(0, jitter), st.integers(0, 2 * jitter + 2))


@st.composite
def source_plans(
    draw: st.DrawFn, drift: int, jitter: int, max_epochs: int, idle: bool, drifts: bool
) -> SourcePlan:
    epochs = _epochs(draw, draw(st.integers(2, max_epochs)), drift, jitter)
    lag = draw(st.integers(0, 2 * jitter))  # some sources behind others: late under policy='max'
    epochs = [
        [{**row, "t": None if row["t"] is None else row["t"] - lag} for row in rows]
        for rows in epochs
    ]
    if idle and draw(st.booleans()):  # silent epochs, to go idle and come back
        epochs = [rows if draw(st.integers(0, 2)) else [] for rows in epochs]
    idle_after = draw(st.one_of(st.none(), st.integers(1, 2))) if idle else None
    max_drift = draw(st.one_of(st.none(), st.integers(0, 2 * jitter))) if drifts else None
    return SourcePlan(epochs, draw(delays(jitter)), idle_after=idle_after, max_drift=max_drift)


@st.composite
def plans(
    draw: st.DrawFn,
    max_epochs: int = 4,
    max_steps: int = 6,
    idle: bool = True,
    drifts: bool = True,
) -> Plan:
    """Random sources (one to three; with `idle`, some with `idle_after` and silent epochs;
    with `drifts`, some with `max_drift`) and a random graph over them; rows late at the
    filters (delays below the jitter) in most of them."""
    jitter = draw(st.integers(1, 10))
    drift = draw(st.integers(0, jitter))
    sources = draw(
        st.lists(source_plans(drift, jitter, max_epochs, idle, drifts), min_size=1, max_size=3)
    )
    streams = len(sources)
    """How many row streams later steps can read (each source's filter, then more)."""
    steps: list[Step] = []
    kinds = [
        "filter",
        "map",
        "shift",
        "watermark",
        "union",
        "union",  # where watermarks meet: policies, idle inputs, alignment
        "sort",
        "tumble_combine",
        "hop_combine",
        "session",
        "window_join",
        "window_join",
        "interval_join",
    ]
    policies = st.sampled_from(["min", "max"])
    for step in range(draw(st.integers(1, max_steps))):
        kind = draw(st.sampled_from(kinds))
        one = st.integers(0, streams - 1)
        i = draw(one)
        if step == 0 and len(sources) > 1 and draw(st.booleans()):
            kind, i = draw(st.sampled_from(["union", "window_join"])), 0  # sources meet
            one = st.just(1)
        if kind in ("filter", "shift"):
            steps.append(
                Step(
                    kind,
                    (i,),
                    (draw(st.integers(2, 4) if kind == "filter" else st.integers(-3, 3)),),
                )
            )
        elif kind == "map":
            steps.append(Step(kind, (i,)))
        elif kind == "watermark":
            steps.append(Step(kind, (i,), (draw(delays(jitter)),)))
        elif kind == "union":
            if streams < 2:
                continue
            j = draw(one.filter(lambda j, i=i: j != i))
            steps.append(Step(kind, (i, j), (draw(policies),)))
        elif kind == "sort":
            steps.append(Step(kind, (i,), (draw(st.booleans()),)))
        elif kind == "tumble_combine":
            steps.append(Step(kind, (i,), (draw(st.integers(1, 8)), draw(st.booleans()))))
        elif kind == "hop_combine":
            size = draw(st.integers(2, 8))
            steps.append(Step(kind, (i,), (size, draw(st.integers(1, size)))))
        elif kind == "session":
            steps.append(Step(kind, (i,), (draw(st.integers(1, 5)), draw(st.booleans()))))
        elif kind == "window_join":
            how = draw(st.sampled_from(["inner", "left", "right", "full"]))
            steps.append(Step(kind, (i, draw(one)), (draw(st.integers(1, 8)), how, draw(policies))))
        else:
            how = draw(st.sampled_from(["inner", "left"]))
            low, high = draw(st.integers(-4, 0)), draw(st.integers(0, 4))
            steps.append(Step(kind, (i, draw(one)), (how, low, high)))
        if kind in ("filter", "map", "shift", "watermark", "union", "sort"):
            streams += 1
    return Plan(sources, steps)


@attrs.frozen
class Observed:
    """What must not depend on parallelism, epoch by epoch: each PCollection's rows (a
    multiset per epoch; after a `Sort` also the sort values within each key), its watermark
    per column at the end of each epoch, and the late and invalid counts."""

    rows: dict[str, list[Counter[tuple[tuple[str, Any], ...]]]]
    order: dict[str, list[dict[tuple[Any, ...], list[Any]]]]
    watermarks: dict[str, list[dict[str, Any]]]
    late: list[int]
    invalid: list[int]
    result: Any


def watermarks_by_epoch(result: Any, pc: sb.PCollection) -> list[dict[str, Any]]:
    """Each column's watermark at the end of each epoch (and after the end of input)."""
    record = result.records[pc.node.id]
    marks: dict[str, Any] = {}
    out: list[dict[str, Any]] = []
    pairs = list(zip(record.watermark_epochs, record.watermarks, strict=True))
    for epoch in range(len(record.chunks)):
        for at, mark in pairs:
            if at == epoch:
                marks[mark.column] = mark.value
        out.append(dict(marks))
    return out


def observe(plan: Plan, runner: sb.DirectRunner | None = None) -> Observed:
    p = sb.Pipeline(runner=runner or sb.DirectRunner())
    graph = build_plan(p, plan)
    result = p.run()
    rows = {name: result.collect_by_epoch(pc) for name, pc in graph.outputs.items()}
    return Observed(
        rows={
            name: [Counter(map(_row_key, epoch)) for epoch in by_epoch]
            for name, by_epoch in rows.items()
        },
        order={
            name: [_within_keys(epoch, column, keys) for epoch in rows[name]]
            for name, (column, keys) in graph.sorted_by.items()
        },
        watermarks={name: watermarks_by_epoch(result, pc) for name, pc in graph.outputs.items()},
        late=[result.late_count(pc) for pc in graph.filters + graph.merges],
        invalid=[result.invalid_count(pc) for pc in graph.filters],
        result=result,
    )


def _within_keys(
    rows: list[Row], column: str, keys: tuple[str, ...]
) -> dict[tuple[Any, ...], list[Any]]:
    sequences: dict[tuple[Any, ...], list[Any]] = {}
    for row in rows:
        sequences.setdefault(tuple(row[k] for k in keys), []).append(row[column])
    return sequences


def assert_identical(actual: Observed, expected: Observed) -> None:
    """Two runs of one plan agree epoch by epoch (`Observed`)."""
    assert actual.late == expected.late, "late counts differ"
    assert actual.invalid == expected.invalid, "invalid counts differ"
    for name, epochs in expected.rows.items():
        assert actual.rows[name] == epochs, f"{name}: rows differ"
    for name, epochs in expected.order.items():
        assert actual.order[name] == epochs, f"{name}: order differs"
    for name, marks in expected.watermarks.items():
        assert actual.watermarks[name] == marks, f"{name}: watermarks differ"
