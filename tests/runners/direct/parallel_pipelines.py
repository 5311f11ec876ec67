"""Random inputs and one wide pipeline for the parallel-runner properties.

Two `TestStream`s of rows `{"t": int, "k": str, "v": int}` go through a
`WithWatermark` each (`a` with `emit` periodic or event, `b` periodic) and
then into every keyed shape: tumble + CombinePerKey, Sort without and with
keys, Session, Union + CombinePerKey, a full window join, a left interval
join, and a Sort after a CombinePerKey.

Outputs are compared in a canonical form: as a multiset of rows, and, after
a `Sort`, also as the sequence of sort-column values within each key (ties
in the sort column have no defined order across units; SPEC and README).
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

    Without late rows at parallelism 1 the outputs and counters are equal.
    Otherwise the units' local watermarks are never above the single unit's,
    so they drop a subset of its late rows, and everything after the filters
    is exactly what the single unit computes on the rows they passed.
    """
    assert actual.invalid == single.invalid
    if single.late == (0, 0):
        assert actual.late == (0, 0)
        assert_same(actual, single)
        return
    assert actual.late[0] <= single.late[0]
    assert actual.late[1] <= single.late[1]
    assert_same(actual, reference_on(sc, actual))
