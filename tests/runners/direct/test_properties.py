"""Hypothesis properties of the direct runner against the SPEC (sections 2-4).

- Invariant W on every edge, checked by the runner and again here on the exact
  message order seen by a test-only probe.
- Prop 1.1: dropping or postponing watermarks after `WithWatermark` never
  changes the final output.
- `WithWatermark` drops exactly the rows a pure-Python model of the filter drops.
- `Tumble`/`Hop` assign exactly the windows a brute-force reference finds, and
  derive window watermarks by the SPEC's rule.
- `CombinePerKey` equals a brute-force group-by, emitting each group once, in
  the epoch where the watermark first passes it (or in the final flush).

All references here work on integers: a `datetime` event time is turned into
microseconds since 1970-01-01 UTC by the test's own helper.
"""

from __future__ import annotations

import datetime as dt
import random
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

import sparkbeam as sb
from sparkbeam.derivation import WatermarkRule, passing
from sparkbeam.graph import EdgeInfo, PrimitiveTransform
from sparkbeam.runners.direct.operator import Chunk, Message, Operator
from sparkbeam.runners.direct.runner import OPERATORS
from sparkbeam.schema import columns_to_rows

EPOCH = dt.datetime(1970, 1, 1)
US = dt.timedelta(microseconds=1)
Row = dict[str, Any]


def us(value: dt.datetime) -> int:
    """Microseconds since the epoch (aware values converted to UTC)."""
    if value.tzinfo is not None:
        value = value.astimezone(dt.UTC).replace(tzinfo=None)
    return (value - EPOCH) // US


def from_us(micros: int) -> dt.datetime:
    return EPOCH + dt.timedelta(microseconds=micros)


# Test-only transforms: a probe that records the exact message order on an
# edge, and a transform that drops or postpones watermarks at random.


@attrs.frozen(eq=False)
class Probe(PrimitiveTransform):
    """Records every message of its input edge, in order; emits nothing."""

    def infer(self, inputs: Sequence[EdgeInfo], label: str) -> EdgeInfo:
        return inputs[0]

    def watermark_rule(self, inputs: Sequence[EdgeInfo], label: str) -> WatermarkRule:
        return WatermarkRule(passing(inputs[0].schema.names))


class ProbeOperator(Operator):
    def __init__(self, node: Any, inputs: Sequence[EdgeInfo]) -> None:
        super().__init__(node, inputs)
        self.log: list[tuple[str, Any]] = []

    def on_chunk(self, port: int, chunk: Chunk) -> list[Message]:
        self.log.append(("chunk", chunk))
        return []

    def on_watermark(self, port: int, watermark: sb.Watermark) -> list[Message]:
        self.log.append(("watermark", watermark))
        return []

    def on_barrier(self, epoch: int) -> list[Message]:
        self.log.append(("barrier", epoch))
        return []

    def on_end(self) -> list[Message]:
        self.log.append(("end", None))
        return []


@attrs.frozen
class MangleWatermarks(PrimitiveTransform):
    """Passes rows; drops, holds or passes each watermark at random (seeded)."""

    seed: int
    p_drop: float
    p_hold: float
    p_release: float
    release_at_end: bool

    def infer(self, inputs: Sequence[EdgeInfo], label: str) -> EdgeInfo:
        return inputs[0]

    def watermark_rule(self, inputs: Sequence[EdgeInfo], label: str) -> WatermarkRule:
        return WatermarkRule(passing(inputs[0].schema.names))


class MangleOperator(Operator):
    """Held watermarks (the latest per column) are released later, never going back.

    It holds watermarks, so it keeps their estimates when it lets them out.
    """

    holds_watermarks = True

    def __init__(self, node: Any, inputs: Sequence[EdgeInfo]) -> None:
        super().__init__(node, inputs)
        self.spec = node.transform
        self.rng = random.Random(self.spec.seed)
        self.held: dict[str, Any] = {}
        self.held_marks: dict[str, sb.Watermark] = {}

    def _release(self) -> list[Message]:
        for mark in self.held_marks.values():
            self.note_estimate(0, mark)
        out = self.watermarks(sorted(self.held.items()))
        self.held.clear()
        self.held_marks.clear()
        return out

    def _maybe_release(self) -> list[Message]:
        if self.held and self.rng.random() < self.spec.p_release:
            return self._release()
        return []

    def on_chunk(self, port: int, chunk: Chunk) -> list[Message]:
        return [chunk, *self._maybe_release()]

    def on_watermark(self, port: int, watermark: sb.Watermark) -> list[Message]:
        draw = self.rng.random()
        if draw < self.spec.p_drop:
            return self._maybe_release()
        if draw < self.spec.p_drop + self.spec.p_hold:
            column = watermark.column
            last = self.held.get(column)
            self.held[column] = watermark.value if last is None else max(last, watermark.value)
            self.held_marks[column] = watermark
            return self._maybe_release()
        self.note_estimate(port, watermark)
        return self.watermarks([(watermark.column, watermark.value)])

    def on_barrier(self, epoch: int) -> list[Message]:
        return self._maybe_release()

    def on_end(self) -> list[Message]:
        return self._release() if self.spec.release_at_end else []


@pytest.fixture(scope="module", autouse=True)
def _test_operators() -> Iterator[None]:
    added = {Probe: ProbeOperator, MangleWatermarks: MangleOperator}
    OPERATORS.update(added)
    try:
        yield
    finally:
        for transform in added:
            OPERATORS.pop(transform, None)


# Scenarios: random epochs of rows {"t", "k", "v"} on an integer or datetime
# event-time column, with a delay and window sizes in the column's units.


@attrs.frozen
class Scenario:
    kind: str  # "int" or "datetime"
    times: list[list[int | None]]  # absolute event times (microseconds for datetimes)
    keys: list[list[str]]
    values: list[list[int | None]]
    zone: dt.timezone | None  # datetime inputs given as aware values in this zone
    delay: int
    delay_as_text: bool
    emit: str
    size: int
    slide: int
    offset: int

    @property
    def is_datetime(self) -> bool:
        return self.kind == "datetime"

    def schema(self) -> dict[str, type]:
        return {"t": dt.datetime if self.is_datetime else int, "k": str, "v": int}

    def time_in(self, t: int | None) -> Any:
        """The event time as the user gives it."""
        if t is None or not self.is_datetime:
            return t
        value = from_us(t)
        if self.zone is not None:
            value = value.replace(tzinfo=dt.UTC).astimezone(self.zone)
        return value

    def time_out(self, t: int | None) -> Any:
        """The event time as the runner gives it back (naive UTC)."""
        return from_us(t) if t is not None and self.is_datetime else t

    def rows(self, epoch: int) -> list[Row]:
        return [
            {"t": self.time_in(t), "k": k, "v": v}
            for t, k, v in zip(self.times[epoch], self.keys[epoch], self.values[epoch], strict=True)
        ]

    def duration(self, units: int) -> Any:
        return dt.timedelta(microseconds=units) if self.is_datetime else units

    def delay_arg(self) -> Any:
        if self.is_datetime and self.delay_as_text:
            return f"{self.delay // 1000} milliseconds"
        return self.duration(self.delay)

    def watermark_of(self, max_time: int) -> int:
        """The SPEC's rule: `floor_to_ms(max) - delay` (datetimes) or `max - delay`."""
        if self.is_datetime:
            return max_time - max_time % 1000 - self.delay
        return max_time - self.delay

    def stream(self, p: sb.Pipeline) -> sb.PCollection:
        source = sb.TestStream(schema=self.schema())
        for epoch in range(len(self.times)):
            source.add_epoch(self.rows(epoch))
        return p | source

    def window(self, pc: sb.PCollection, hop: bool) -> sb.PCollection:
        if hop:
            return pc.hop(
                "t",
                self.duration(self.size),
                self.duration(self.slide),
                offset=self.duration(self.offset),
            )
        return pc.tumble("t", self.duration(self.size), offset=self.duration(self.offset))


@st.composite
def scenarios(draw: st.DrawFn, allow_none: bool = True, max_epochs: int = 6) -> Scenario:
    kind = draw(st.sampled_from(["int", "datetime"]))
    if kind == "int":
        scale, base = 1, draw(st.sampled_from([0, -500, 37]))

        def sub() -> int:
            return 0

    else:
        scale = 1_000
        base = draw(st.sampled_from([us(dt.datetime(2026, 4, 1, 10)), -1_500_000, 0, 1_234_567]))

        def sub() -> int:
            return draw(st.integers(0, 999))

    n_epochs = draw(st.integers(1, max_epochs))
    drift = draw(st.integers(0, 15))
    times: list[list[int | None]] = []
    keys: list[list[str]] = []
    values: list[list[int | None]] = []
    for epoch in range(n_epochs):
        n_rows = draw(st.integers(0, 7))
        epoch_times: list[int | None] = []
        for _ in range(n_rows):
            if allow_none and draw(st.integers(0, 11)) == 0:
                epoch_times.append(None)
            else:
                jitter = draw(st.integers(-20, 20))
                epoch_times.append(base + (epoch * drift + jitter) * scale + sub())
        times.append(epoch_times)
        keys.append([draw(st.sampled_from("ab")) for _ in range(n_rows)])
        values.append(
            [
                None if draw(st.integers(0, 5)) == 0 else draw(st.integers(-50, 50))
                for _ in range(n_rows)
            ]
        )
    slide_units = draw(st.integers(1, 20))
    size_units = draw(st.integers(0, 5 * slide_units))
    size = size_units * scale + sub()
    if size == 0:
        size = 1
    slide = slide_units * scale + sub()
    offset = draw(st.integers(-40, 40)) * scale + sub()
    zone = None
    if kind == "datetime" and draw(st.booleans()):
        zone = dt.timezone(dt.timedelta(minutes=draw(st.integers(-12 * 60, 12 * 60))))
    return Scenario(
        kind=kind,
        times=times,
        keys=keys,
        values=values,
        zone=zone,
        delay=draw(st.integers(0, 30)) * scale,
        delay_as_text=draw(st.booleans()),
        emit=draw(st.sampled_from(["periodic", "event"])),
        size=size,
        slide=slide,
        offset=offset,
    )


# References.


@attrs.frozen
class FilterModel:
    """What `WithWatermark` should do, epoch by epoch."""

    kept: list[list[int]]  # indices of the kept rows of each epoch
    late: int
    invalid: int
    raised: list[int]  # the watermark values, each higher than the one before
    wm_after: list[int | None]  # the watermark at the end of each epoch


def reference_filter(sc: Scenario) -> FilterModel:
    wm: int | None = None
    max_time: int | None = None
    kept: list[list[int]] = []
    late = invalid = 0
    raised: list[int] = []
    wm_after: list[int | None] = []

    def raise_to(candidate: int) -> None:
        nonlocal wm
        if wm is None or candidate > wm:
            wm = candidate
            raised.append(candidate)

    for epoch_times in sc.times:
        kept_here: list[int] = []
        for index, t in enumerate(epoch_times):
            if t is None:
                invalid += 1
                continue
            if wm is not None and t < wm:
                late += 1
                continue
            kept_here.append(index)
            max_time = t if max_time is None else max(max_time, t)
            if sc.emit == "event":
                raise_to(sc.watermark_of(max_time))
        if sc.emit == "periodic" and max_time is not None:
            raise_to(sc.watermark_of(max_time))
        kept.append(kept_here)
        wm_after.append(wm)
    return FilterModel(kept, late, invalid, raised, wm_after)


def window_starts(t: int, size: int, slide: int, offset: int) -> list[int]:
    """Every aligned start `offset + k * slide` with `start <= t < start + size`."""
    low, high = (t - size - offset) // slide - 2, (t - offset) // slide + 2
    return [
        offset + k * slide
        for k in range(low, high + 1)
        if offset + k * slide <= t < offset + k * slide + size
    ]


def smallest_start_above(x: int, slide: int, offset: int) -> int:
    """The smallest aligned start `offset + k * slide` that is `> x`."""
    k = (x - offset) // slide - 2
    while offset + k * slide <= x:
        k += 1
    return offset + k * slide


def dedup(values: Sequence[Any]) -> list[Any]:
    return [v for i, v in enumerate(values) if i == 0 or v != values[i - 1]]


def key(row: Row) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(row.items()))


def bag(rows: Sequence[Row]) -> Counter[tuple[tuple[str, Any], ...]]:
    return Counter(map(key, rows))


def internal_rows(chunk: Chunk) -> list[Row]:
    return list(chunk.rows())


# Pipeline shapes after a `WithWatermark`.

SHAPES = ["tumble", "hop", "session", "sort", "sort_by_key", "by_time", "rewatermark"]


def build_downstream(sc: Scenario, pc: sb.PCollection, shape: str) -> list[sb.PCollection]:
    """The edges of one of the pipeline shapes after `pc`; the last is the output."""
    if shape in ("tumble", "hop"):
        kept = pc.filter(lambda row: row["v"] is None or row["v"] % 3 != 0)
        windowed = sc.window(kept, shape == "hop")
        combined = windowed.combine_per_key(
            ["window_start", "window_end", "k"],
            n=sb.Count(),
            total=sb.Sum("v"),
            lo=sb.Min("t"),
            hi=sb.Max("t"),
        )
        return [kept, windowed, combined]
    if shape == "rewatermark":
        again = pc.with_watermark("t", sc.delay_arg(), emit="event")
        windowed = sc.window(again, hop=False)
        combined = windowed.combine_per_key(["window_start", "k"], n=sb.Count())
        return [again, windowed, combined]
    if shape == "by_time":
        return [pc.combine_per_key(["k", "t"], n=sb.Count(), total=sb.Sum("v"))]
    if shape == "session":
        return [pc.session("t", sc.duration(sc.size), keys="k")]
    return [pc.sort("t", keys="k" if shape == "sort_by_key" else ())]


# a. Invariant W on every edge.


def check_probe(result: Any, pc: sb.PCollection, probe: sb.PCollection, epochs: int) -> None:
    """The probe saw exactly what the edge recorded, and that stream keeps invariant W."""
    log = result.operators[probe.node.id].log
    schema = pc.schema
    marks: dict[str, Any] = {}
    by_epoch: list[list[Row]] = [[] for _ in range(epochs + 1)]
    seen_marks: list[sb.Watermark] = []
    epoch = 0
    for kind, item in log:
        if kind == "watermark":
            last = marks.get(item.column)
            assert last is None or item.value >= last, (pc, item, last)
            marks[item.column] = item.value
            seen_marks.append(item)
        elif kind == "chunk":
            for row in internal_rows(item):
                for column, mark in marks.items():
                    assert row[column] is not None and row[column] >= mark, (pc, row, column, mark)
            by_epoch[epoch].extend(columns_to_rows(item.columns, schema))
        elif kind == "barrier":
            assert item == epoch
            epoch += 1
        else:
            assert epoch == epochs
    assert log[-1] == ("end", None)
    assert by_epoch == result.collect_by_epoch(pc)
    external = [
        sb.Watermark(
            m.column, from_us(m.value) if schema.type_of(m.column) is dt.datetime else m.value
        )
        for m in seen_marks
    ]
    assert external == result.watermarks(pc)
    # What the public API alone shows: per column, watermarks never decrease.
    values: dict[str, list[Any]] = {}
    for mark in result.watermarks(pc):
        values.setdefault(mark.column, []).append(mark.value)
    for column_values in values.values():
        assert column_values == sorted(column_values)


@given(scenarios(), st.booleans(), st.booleans())
def test_invariant_w_holds_on_every_edge(sc: Scenario, hop: bool, by_key: bool) -> None:
    with sb.Pipeline() as p:
        source = sc.stream(p)
        marked = source.with_watermark("t", sc.delay_arg(), emit=sc.emit)
        windowed = sc.window(marked, hop)
        keys = ["window_start", "window_end", *(["k"] if by_key else [])]
        combined = windowed.combine_per_key(keys, n=sb.Count(), total=sb.Sum("v"))
        edges = [source, marked, windowed, combined]
        probes = [edge | Probe() for edge in edges]
    result = p.result
    for edge, probe in zip(edges, probes, strict=True):
        check_probe(result, edge, probe, len(sc.times))
    assert {m.column for m in result.watermarks(marked)} <= {"t"}
    assert {m.column for m in result.watermarks(combined)} <= {"window_start", "window_end"}
    if any(model_wm is not None for model_wm in reference_filter(sc).wm_after):
        assert result.watermarks(marked)


@given(scenarios(), st.sampled_from(SHAPES))
def test_invariant_w_holds_on_every_edge_of_other_shapes(sc: Scenario, shape: str) -> None:
    with sb.Pipeline() as p:
        marked = sc.stream(p).with_watermark("t", sc.delay_arg(), emit=sc.emit)
        edges = [marked, *build_downstream(sc, marked, shape)]
        probes = [edge | Probe() for edge in edges]
    for edge, probe in zip(edges, probes, strict=True):
        check_probe(p.result, edge, probe, len(sc.times))


def test_invariant_w_example_is_checked_by_the_probe() -> None:
    """A fixed case where watermarks and rows interleave within one epoch (emit="event")."""
    sc = Scenario(
        kind="int",
        times=[[10, 3, 25, 12, 40], [31, 5, 41]],
        keys=[["a"] * 5, ["b"] * 3],
        values=[[1, 2, 3, 4, 5], [6, 7, 8]],
        zone=None,
        delay=5,
        delay_as_text=False,
        emit="event",
        size=10,
        slide=10,
        offset=0,
    )
    with sb.Pipeline() as p:
        source = sc.stream(p)
        marked = source.with_watermark("t", sc.delay_arg(), emit=sc.emit)
        probe = marked | Probe()
    log = p.result.operators[probe.node.id].log
    order = [(kind, item.value if kind == "watermark" else None) for kind, item in log]
    assert order[:4] == [("chunk", None), ("watermark", 5), ("chunk", None), ("watermark", 20)]
    check_probe(p.result, marked, probe, 2)
    assert p.result.collect(marked) == [
        {"t": t, "k": k, "v": v}
        for t, k, v in [(10, "a", 1), (25, "a", 3), (40, "a", 5), (41, "b", 8)]
    ]


# b. Prop 1.1: dropping or postponing watermarks keeps the final output.


manglers = st.builds(
    MangleWatermarks,
    seed=st.integers(0, 2**32 - 1),
    p_drop=st.sampled_from([0.0, 0.3, 0.7, 1.0]),
    p_hold=st.sampled_from([0.0, 0.3, 0.7]),
    p_release=st.sampled_from([0.0, 0.2, 0.6, 1.0]),
    release_at_end=st.booleans(),
)


@given(scenarios(), st.sampled_from(SHAPES), manglers)
def test_dropping_or_postponing_watermarks_keeps_the_final_output(
    sc: Scenario, shape: str, mangler: MangleWatermarks
) -> None:
    with sb.Pipeline() as p:
        marked = sc.stream(p).with_watermark("t", sc.delay_arg(), emit=sc.emit)
        plain = build_downstream(sc, marked, shape)[-1]
    expected = bag(p.result.collect(plain))
    assert p.result.late_count(marked) == reference_filter(sc).late
    with sb.Pipeline() as p:
        marked = sc.stream(p).with_watermark("t", sc.delay_arg(), emit=sc.emit)
        mangled = marked | mangler
        edges = [mangled, *build_downstream(sc, mangled, shape)]
        probes = [edge | Probe() for edge in edges]
    assert bag(p.result.collect(edges[-1])) == expected
    for edge, probe in zip(edges, probes, strict=True):
        check_probe(p.result, edge, probe, len(sc.times))
    if shape.startswith("sort"):
        assert sum(expected.values()) == sum(map(len, reference_filter(sc).kept))
        by_key: dict[Any, list[Any]] = {}
        for row in p.result.collect(edges[-1]):
            by_key.setdefault(row["k"] if shape == "sort_by_key" else None, []).append(row["t"])
        assert all(times == sorted(times) for times in by_key.values())


def test_dropping_every_watermark_still_flushes_every_group() -> None:
    sc = Scenario(
        kind="int",
        times=[[1, 2, 11], [12, 25], [31]],
        keys=[["a", "a", "b"], ["b", "a"], ["a"]],
        values=[[1, 2, 4], [4, 5], [7]],
        zone=None,
        delay=0,
        delay_as_text=False,
        emit="periodic",
        size=10,
        slide=10,
        offset=0,
    )
    mangler = MangleWatermarks(0, p_drop=1.0, p_hold=0.0, p_release=0.0, release_at_end=False)
    with sb.Pipeline() as p:
        mangled = sc.stream(p).with_watermark("t", 0) | mangler
        out = build_downstream(sc, mangled, "tumble")[-1]
    assert p.result.watermarks(mangled) == []
    by_epoch = p.result.collect_by_epoch(out)
    assert by_epoch[:3] == [[], [], []]
    columns = ("window_start", "window_end", "k", "n", "total", "lo", "hi")
    groups = [
        (0, 10, "a", 2, 3, 1, 2),
        (10, 20, "b", 2, 8, 11, 12),
        (20, 30, "a", 1, 5, 25, 25),
        (30, 40, "a", 1, 7, 31, 31),
    ]
    assert bag(by_epoch[3]) == bag([dict(zip(columns, g, strict=True)) for g in groups])


# c. The watermark filter drops exactly the rows the SPEC says.


@given(scenarios())
def test_watermark_filter_matches_the_reference_model(sc: Scenario) -> None:
    with sb.Pipeline() as p:
        marked = sc.stream(p).with_watermark("t", sc.delay_arg(), emit=sc.emit)
    result = p.result
    model = reference_filter(sc)
    expected = [
        [
            {
                "t": sc.time_out(sc.times[e][i]),
                "k": sc.keys[e][i],
                "v": sc.values[e][i],
            }
            for i in model.kept[e]
        ]
        for e in range(len(sc.times))
    ]
    actual = result.collect_by_epoch(marked)
    assert len(actual) == len(sc.times) + 1
    assert [bag(rows) for rows in actual] == [bag(rows) for rows in [*expected, []]]
    assert result.late_count(marked) == model.late
    assert result.invalid_count(marked) == model.invalid
    marks = result.watermarks(marked)
    assert all(m.column == "t" for m in marks)
    assert dedup([m.value for m in marks]) == [sc.time_out(v) for v in model.raised]


@pytest.mark.parametrize(
    ("emit", "late", "kept"),
    [
        # periodic: epoch 1 is judged against wm = 20 - 5 = 15 from epoch 0.
        ("periodic", 1, [[20, 5, 14], [15, 30]]),
        # event: after 20 the wm is 15, so 5 and 14 are late at once.
        ("event", 3, [[20], [15, 30]]),
    ],
)
def test_watermark_filter_examples(emit: str, late: int, kept: list[list[int]]) -> None:
    with sb.Pipeline() as p:
        source = sb.TestStream(schema={"t": int})
        source.add_epoch([{"t": 20}, {"t": 5}, {"t": None}, {"t": 14}])
        source.add_epoch([{"t": 14}, {"t": 15}, {"t": 30}])
        marked = p | source
        marked = marked.with_watermark("t", 5, emit=emit)
    by_epoch = p.result.collect_by_epoch(marked)
    assert [[row["t"] for row in rows] for rows in by_epoch] == [*kept, []]
    assert p.result.late_count(marked) == late
    assert p.result.invalid_count(marked) == 1


def test_watermark_on_datetimes_is_floored_to_milliseconds() -> None:
    base = dt.datetime(2026, 4, 1, 10, 0)
    with sb.Pipeline() as p:
        source = sb.TestStream(schema={"t": dt.datetime})
        source.add_epoch([{"t": base + dt.timedelta(microseconds=1_999)}])
        source.add_epoch(
            [
                {"t": base + dt.timedelta(microseconds=999)},
                {"t": base + dt.timedelta(microseconds=1_000)},
            ]
        )
        marked = (p | source).with_watermark("t", dt.timedelta(0))
    assert p.result.watermarks(marked)[0] == sb.Watermark("t", base + dt.timedelta(milliseconds=1))
    assert p.result.late_count(marked) == 1
    assert [r["t"] for r in p.result.collect(marked)] == [
        base + dt.timedelta(microseconds=1_999),
        base + dt.timedelta(microseconds=1_000),
    ]


# d. Window assignment and window watermarks.


def expected_windows(
    sc: Scenario, rows: Sequence[tuple[Any, str, int | None]], hop: bool
) -> list[Row]:
    slide = sc.slide if hop else sc.size
    out = []
    for t, k, v in rows:
        for start in window_starts(t, sc.size, slide, sc.offset):
            out.append(
                {
                    "t": sc.time_out(t),
                    "k": k,
                    "v": v,
                    "window_start": sc.time_out(start),
                    "window_end": sc.time_out(start + sc.size),
                }
            )
    return out


@given(scenarios(allow_none=False), st.booleans())
def test_window_assignment_matches_brute_force_on_bounded_input(sc: Scenario, hop: bool) -> None:
    rows = [
        (t, k, v)
        for epoch in range(len(sc.times))
        for t, k, v in zip(sc.times[epoch], sc.keys[epoch], sc.values[epoch], strict=True)
    ]
    assert all(t is not None for t, _, _ in rows)
    with sb.Pipeline() as p:
        created = p | sb.Create(
            [{"t": sc.time_in(t), "k": k, "v": v} for t, k, v in rows], schema=sc.schema()
        )
        windowed = sc.window(created, hop)
    assert bag(p.result.collect(windowed)) == bag(expected_windows(sc, rows, hop))


@pytest.mark.parametrize(
    ("t", "size", "slide", "offset", "starts"),
    [
        (-1, 10, 10, 0, [-10]),
        (-10, 10, 10, 0, [-10]),
        (7, 10, 10, -3, [7]),
        (6, 10, 10, -3, [-3]),
        (5, 10, 3, 0, [-3, 0, 3]),
        (5, 2, 5, 1, []),
        (6, 2, 5, 1, [6]),
        (-7, 4, 3, 0, [-9]),
        (-6, 4, 3, 0, [-9, -6]),
    ],
)
def test_window_assignment_examples(
    t: int, size: int, slide: int, offset: int, starts: list[int]
) -> None:
    with sb.Pipeline() as p:
        created = p | sb.Create([{"t": t}])
        windowed = created.hop("t", size, slide, offset=offset)
        tumbled = created.tumble("t", size, offset=offset)
    assert sorted(r["window_start"] for r in p.result.collect(windowed)) == starts
    assert all(r["window_end"] == r["window_start"] + size for r in p.result.collect(windowed))
    assert [r["window_start"] for r in p.result.collect(tumbled)] == window_starts(
        t, size, size, offset
    )


@given(scenarios(), st.booleans())
def test_windows_on_a_stream_assign_and_derive_watermarks(sc: Scenario, hop: bool) -> None:
    with sb.Pipeline() as p:
        marked = sc.stream(p).with_watermark("t", sc.delay_arg(), emit=sc.emit)
        windowed = sc.window(marked, hop)
    result = p.result
    model = reference_filter(sc)
    for epoch, rows in enumerate(result.collect_by_epoch(windowed)[:-1]):
        kept = [
            (sc.times[epoch][i], sc.keys[epoch][i], sc.values[epoch][i]) for i in model.kept[epoch]
        ]
        assert bag(rows) == bag(expected_windows(sc, kept, hop))
    assert result.collect_by_epoch(windowed)[-1] == []
    marks = result.watermarks(windowed)
    on = {c: [m.value for m in marks if m.column == c] for c in ("t", "window_start", "window_end")}
    assert set(on) >= {m.column for m in marks}
    assert on["t"] == [m.value for m in result.watermarks(marked)]
    slide = sc.slide if hop else sc.size
    times = [us(v) if sc.is_datetime else v for v in on["t"]]
    s0 = [smallest_start_above(t - sc.size, slide, sc.offset) for t in times]
    assert dedup(on["window_start"]) == dedup([sc.time_out(s) for s in s0])
    assert dedup(on["window_end"]) == dedup([sc.time_out(s + sc.size) for s in s0])


# e. CombinePerKey against a brute-force group-by, emitted in the right epoch.

AGGREGATES: dict[str, Callable[[], Any]] = {
    "n": lambda: sb.Count(),
    "nv": lambda: sb.Count("v"),
    "total": lambda: sb.Sum("v"),
    "mean": lambda: sb.Mean("v"),
    "lo": lambda: sb.Min("v"),
    "hi": lambda: sb.Max("v"),
    "first": lambda: sb.Min("t"),
    "last": lambda: sb.Max("t"),
}


def aggregate(rows: list[tuple[int, int | None]], sc: Scenario) -> dict[str, Any]:
    times = [t for t, _ in rows]
    values = [v for _, v in rows if v is not None]
    return {
        "n": len(rows),
        "nv": len(values),
        "total": sum(values) if values else None,
        "mean": sum(values) / len(values) if values else None,
        "lo": min(values) if values else None,
        "hi": max(values) if values else None,
        "first": sc.time_out(min(times)),
        "last": sc.time_out(max(times)),
    }


def expected_groups(sc: Scenario, hop: bool, by_key: bool) -> list[list[Row]]:
    """Rows of `CombinePerKey` per epoch (and the flush), by brute force."""
    model = reference_filter(sc)
    slide = sc.slide if hop else sc.size
    groups: dict[tuple[Any, ...], list[tuple[int, int | None]]] = {}
    opened: dict[tuple[Any, ...], int] = {}
    for epoch, indices in enumerate(model.kept):
        for i in indices:
            t, k, v = sc.times[epoch][i], sc.keys[epoch][i], sc.values[epoch][i]
            assert t is not None
            for start in window_starts(t, sc.size, slide, sc.offset):
                group = (start, start + sc.size, *([k] if by_key else []))
                groups.setdefault(group, []).append((t, v))
                opened.setdefault(group, epoch)

    def passed(group: tuple[Any, ...], wm: int | None) -> bool:
        # SPEC: W(t, wm) gives W(window_start, s0) and W(window_end, s0 + size), with s0
        # the smallest aligned start > wm - size; a group is emitted when a key column's
        # value is < its watermark.
        if wm is None:
            return False
        s0 = smallest_start_above(wm - sc.size, slide, sc.offset)
        return group[0] < s0 or group[1] < s0 + sc.size

    out: list[list[Row]] = [[] for _ in range(len(sc.times) + 1)]
    for group, rows in groups.items():
        emitted = next(
            (e for e in range(opened[group], len(sc.times)) if passed(group, model.wm_after[e])),
            len(sc.times),
        )
        row = {"window_start": sc.time_out(group[0]), "window_end": sc.time_out(group[1])}
        if by_key:
            row["k"] = group[2]
        row.update(aggregate(rows, sc))
        out[emitted].append(row)
    return out


@given(scenarios(), st.booleans(), st.booleans())
def test_combine_per_key_matches_group_by_and_emits_when_the_watermark_passes(
    sc: Scenario, hop: bool, by_key: bool
) -> None:
    with sb.Pipeline() as p:
        marked = sc.stream(p).with_watermark("t", sc.delay_arg(), emit=sc.emit)
        windowed = sc.window(marked, hop)
        keys = ["window_start", "window_end", *(["k"] if by_key else [])]
        combined = windowed.combine_per_key(
            keys, **{name: make() for name, make in AGGREGATES.items()}
        )
    actual = p.result.collect_by_epoch(combined)
    expected = expected_groups(sc, hop, by_key)
    assert [bag(rows) for rows in actual] == [bag(rows) for rows in expected]
    emitted = [tuple(row[c] for c in keys) for row in p.result.collect(combined)]
    assert len(emitted) == len(set(emitted))


@given(scenarios())
def test_combine_per_key_on_the_event_time_column(sc: Scenario) -> None:
    """Keyed on the watermarked column itself: a group `(k, t)` is emitted once `t < wm`."""
    with sb.Pipeline() as p:
        marked = sc.stream(p).with_watermark("t", sc.delay_arg(), emit=sc.emit)
        combined = marked.combine_per_key(["k", "t"], n=sb.Count(), hi=sb.Max("v"))
    model = reference_filter(sc)
    groups: dict[tuple[str, int], list[int | None]] = {}
    opened: dict[tuple[str, int], int] = {}
    for epoch, indices in enumerate(model.kept):
        for i in indices:
            t = sc.times[epoch][i]
            assert t is not None
            groups.setdefault((sc.keys[epoch][i], t), []).append(sc.values[epoch][i])
            opened.setdefault((sc.keys[epoch][i], t), epoch)
    expected: list[list[Row]] = [[] for _ in range(len(sc.times) + 1)]
    for (k, t), values in groups.items():
        present = [v for v in values if v is not None]
        marks = model.wm_after[opened[(k, t)] :]
        emitted = next(
            (opened[(k, t)] + j for j, wm in enumerate(marks) if wm is not None and t < wm),
            len(sc.times),
        )
        expected[emitted].append(
            {"k": k, "t": sc.time_out(t), "n": len(values), "hi": max(present, default=None)}
        )
    actual = p.result.collect_by_epoch(combined)
    assert [bag(rows) for rows in actual] == [bag(rows) for rows in expected]
    assert [m.value for m in p.result.watermarks(combined)] == [
        m.value for m in p.result.watermarks(marked)
    ]


@given(
    st.lists(
        st.tuples(st.integers(-30, 30), st.sampled_from("xyz"), st.integers(-9, 9)), max_size=40
    )
)
def test_combine_per_key_on_bounded_input_is_a_group_by(rows: list[tuple[int, str, int]]) -> None:
    data = [{"t": t, "k": k, "v": v} for t, k, v in rows]
    with sb.Pipeline() as p:
        created = p | sb.Create(data, schema={"t": int, "k": str, "v": int})
        combined = created.combine_per_key(
            "k", n=sb.Count(), total=sb.Sum("v"), mean=sb.Mean("v"), lo=sb.Min("t"), hi=sb.Max("v")
        )
    groups: dict[str, list[tuple[int, int]]] = {}
    for t, k, v in rows:
        groups.setdefault(k, []).append((t, v))
    expected = [
        {
            "k": k,
            "n": len(members),
            "total": sum(v for _, v in members),
            "mean": sum(v for _, v in members) / len(members),
            "lo": min(t for t, _ in members),
            "hi": max(v for _, v in members),
        }
        for k, members in groups.items()
    ]
    by_epoch = p.result.collect_by_epoch(combined)
    assert by_epoch[0] == []
    assert bag(by_epoch[-1]) == bag(expected)
