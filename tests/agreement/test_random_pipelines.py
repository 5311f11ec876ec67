"""Random small pipelines over bounded input give the same rows on both runners (SPEC 5).

A case is a few random rows (a datetime or an integer time column, some `None`s)
and a chain of one to four transforms, each chosen among those that are valid
where it is applied. Every step is a function of the PCollection it extends, so
the same chain is built in a fresh pipeline for each runner. The outputs must be
the same multiset of rows; after a final `Sort`, the sort column must come in
the same order (within each key).

The functions given to `Map` and `Filter` are made inside functions: Spark's
workers unpickle module-level functions by importing their module, which they
cannot do for a module pytest imported from the tests directory.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import sparkbeam as sb
from tests.agreement.pipelines import order_within_keys, row_multiset

pytestmark = pytest.mark.spark

Step = Callable[[sb.PCollection], sb.PCollection]
Row = dict[str, Any]

EPOCH = datetime(1970, 1, 1)
WINDOW_COLUMNS = ("window_start", "window_end")
NUMERIC = (int, float)
ORDERED = (int, float, str, datetime, bool)


# --- input rows -------------------------------------------------------------------------


@attrs.frozen
class Source:
    rows: list[Row]
    schema: dict[str, type]


@st.composite
def sources(draw: st.DrawFn) -> Source:
    integer_time = draw(st.booleans())
    if integer_time:
        times: st.SearchStrategy[Any] = st.integers(-30, 30)
    else:  # around the epoch, negative times included, to the microsecond
        micros = st.one_of(
            st.integers(-90, 90).map(lambda s: s * 1_000_000),
            st.integers(-90_000_000, 90_000_000),
        )
        times = micros.map(lambda us: EPOCH + timedelta(microseconds=us))
    if draw(st.integers(0, 3)) == 0:  # sometimes None event times, to be dropped first
        times = st.none() | times
    row = st.fixed_dictionaries(
        {
            "k": st.sampled_from(["a", "b", "c", None]),
            "v": st.none() | st.integers(-5, 5),
            # multiples of 1/4: sums are exact whatever order Spark adds them in
            "x": st.none() | st.integers(-40, 40).map(lambda i: i / 4),
            "t": times,
        }
    )
    rows = draw(st.lists(row, min_size=0, max_size=8))
    return Source(rows, {"k": str, "v": int, "x": float, "t": int if integer_time else datetime})


# --- the state of a chain while it is drawn ---------------------------------------------


@attrs.frozen
class State:
    pcoll: sb.PCollection
    clean: frozenset[str]
    """Columns that hold no None on this edge (a window or a sort needs its time)."""
    joined: bool = False
    hopped: bool = False
    names: int = 0
    """How many aggregate columns were named so far (names must be fresh)."""

    @property
    def schema(self) -> sb.Schema:
        return self.pcoll.schema

    def columns_of(self, kinds: tuple[type, ...]) -> list[str]:
        return [name for name, kind in self.schema.fields if kind in kinds]

    def time_columns(self) -> list[str]:
        return self.columns_of((datetime, int))

    def clean_times(self) -> list[str]:
        return [c for c in self.time_columns() if c in self.clean]

    def windowed(self) -> bool:
        return any(c in self.schema for c in WINDOW_COLUMNS)


Built = tuple[Step, Callable[[State, sb.PCollection], State]]
"""A step, and how the state follows from the state before and the new PCollection."""


def durations(kind: type, choices: list[int], seconds: list[str]) -> st.SearchStrategy[Any]:
    return st.sampled_from(choices if kind is int else seconds)


# --- the functions Map and Filter run (made here: pickled by value on Spark) -------------


def predicate(kind: str, column: str) -> Callable[[Row], bool]:
    if kind == "not none":
        return lambda row: row[column] is not None
    if kind == "even":
        return lambda row: row[column] is not None and row[column] % 2 == 0
    if kind == "positive":
        return lambda row: row[column] is not None and row[column] > 0
    if kind == "not a":
        return lambda row: row[column] != "a"
    return lambda row: False


def predicates(state: State) -> st.SearchStrategy[tuple[str, str]]:
    options = [("not none", c) for c in state.schema.names]
    options += [("even", c) for c in state.columns_of((int,))]
    options += [("positive", c) for c in state.columns_of(NUMERIC)]
    options += [("not a", c) for c in state.columns_of((str,))]
    options.append(("none", ""))
    return st.sampled_from(options)


def kept_if(kind: str, column: str, clean: frozenset[str]) -> frozenset[str]:
    return clean | {column} if kind not in ("not a", "none") else clean


# --- one strategy per transform ---------------------------------------------------------


@st.composite
def with_watermark(draw: st.DrawFn, state: State) -> Built:
    column = draw(st.sampled_from(state.time_columns()))
    kind = state.schema.type_of(column)
    delay = draw(durations(kind, [0, 1, 5], ["0 seconds", "500 milliseconds", "10 seconds"]))
    return (
        lambda pc: pc.with_watermark(column, delay),
        lambda s, pc: attrs.evolve(s, pcoll=pc, clean=s.clean | {column}),
    )


@st.composite
def filter_rows(draw: st.DrawFn, state: State) -> Built:
    kind, column = draw(predicates(state))
    keep = predicate(kind, column)
    return (
        lambda pc: pc.filter(keep),
        lambda s, pc: attrs.evolve(s, pcoll=pc, clean=kept_if(kind, column, s.clean)),
    )


@st.composite
def select(draw: st.DrawFn, state: State) -> Built:
    names = list(state.schema.names)
    column = draw(st.sampled_from(names))
    others = [c for c in names if c != column]
    kind = state.schema.type_of(column)
    actions = ["rename"] + (["drop"] if others else [])
    if kind in (datetime, int):
        actions += ["shift", "truncate"]
    action = draw(st.sampled_from(actions))
    if action == "drop":
        return (
            lambda pc: pc.select(*others),
            lambda s, pc: attrs.evolve(s, pcoll=pc, clean=s.clean - {column}),
        )
    if action == "rename":
        new = f"{column}_r"
        assume(new not in names)
        return (
            lambda pc: pc.select(*others, **{new: sb.col(column)}),
            lambda s, pc: attrs.evolve(
                s, pcoll=pc, clean=(s.clean - {column}) | ({new} if column in s.clean else set())
            ),
        )
    if action == "shift":
        delta = draw(durations(kind, [-7, 3], ["-5 seconds", "90 seconds", "1 microsecond"]))
        expression = sb.col(column) + delta
    else:
        unit = draw(durations(kind, [2, 7], ["10 seconds", "1 minute", "3 milliseconds"]))
        expression = sb.col(column).truncate(unit)
    return (
        lambda pc: pc.select(*others, **{column: expression}),
        lambda s, pc: attrs.evolve(s, pcoll=pc),
    )


def mapper(kind: str, column: str, flag: str) -> Callable[[Row], Row]:
    if kind == "bump":
        return lambda row: {**row, column: None if row[column] is None else row[column] + 1}
    if kind == "upper":
        return lambda row: {**row, column: None if row[column] is None else row[column].upper()}
    if kind == "flag":
        return lambda row: {**row, flag: row[column] is not None and row[column] > 0}
    return lambda row: dict(row)


@st.composite
def map_rows(draw: st.DrawFn, state: State) -> Built:
    flag = f"flag{state.names}"
    options = [("identity", "")]
    options += [("bump", c) for c in state.columns_of(NUMERIC)]
    options += [("upper", c) for c in state.columns_of((str,))]
    options += [("flag", c) for c in state.columns_of(NUMERIC)]
    kind, column = draw(st.sampled_from(options))
    fn = mapper(kind, column, flag)
    names = state.schema.names
    schema = dict(state.schema.fields) | {flag: bool} if kind == "flag" else None
    keeps = [c for c in names if kind not in ("bump", "upper") or c != column]
    return (
        lambda pc: pc.map(fn, schema=schema, keeps=keeps),
        lambda s, pc: attrs.evolve(
            s, pcoll=pc, names=s.names + 1, clean=s.clean | ({flag} if kind == "flag" else set())
        ),
    )


def window_state(s: State, pc: sb.PCollection) -> State:
    return attrs.evolve(s, pcoll=pc, clean=s.clean | set(WINDOW_COLUMNS))


@st.composite
def tumble(draw: st.DrawFn, state: State) -> Built:
    column = draw(st.sampled_from(state.clean_times()))
    kind = state.schema.type_of(column)
    size = draw(durations(kind, [1, 4, 10], ["1 second", "10 seconds", "1 minute"]))
    offset = draw(durations(kind, [0, -3, 2], ["0 seconds", "-3 seconds", "250 milliseconds"]))
    return lambda pc: pc.tumble(column, size, offset=offset), window_state


@st.composite
def hop(draw: st.DrawFn, state: State) -> Built:
    column = draw(st.sampled_from(state.clean_times()))
    kind = state.schema.type_of(column)
    size, slide = draw(
        st.sampled_from([(6, 3), (4, 4), (3, 5), (10, 4)])
        if kind is int
        else st.sampled_from(
            [("20 seconds", "10 seconds"), ("5 seconds", "15 seconds"), ("1 minute", "25 seconds")]
        )
    )
    offset = draw(durations(kind, [0, -1], ["0 seconds", "-7 seconds"]))
    return (
        lambda pc: pc.hop(column, size, slide, offset=offset),
        lambda s, pc: attrs.evolve(window_state(s, pc), hopped=True),
    )


@st.composite
def session(draw: st.DrawFn, state: State) -> Built:
    column = draw(st.sampled_from(state.clean_times()))
    kind = state.schema.type_of(column)
    gap = draw(durations(kind, [1, 3, 8], ["1 second", "20 seconds", "1 minute"]))
    others = [c for c in state.schema.names if c != column]
    keys = draw(st.lists(st.sampled_from(others), max_size=1, unique=True)) if others else []
    return lambda pc: pc.session(column, gap, keys=keys), window_state


@st.composite
def combine_per_key(draw: st.DrawFn, state: State) -> Built:
    names = list(state.schema.names)
    keys = draw(st.lists(st.sampled_from(names), max_size=2, unique=True))
    choices: list[tuple[str, str | None]] = [("count", None)]
    choices += [("count", c) for c in names]
    choices += [(f, c) for c in state.columns_of(NUMERIC) for f in ("sum", "mean")]
    choices += [(f, c) for c in state.columns_of(ORDERED) for f in ("min", "max")]
    picked = draw(st.lists(st.sampled_from(choices), min_size=1, max_size=3, unique=True))
    makers: dict[str, Callable[..., Any]] = {
        "sum": sb.Sum,
        "mean": sb.Mean,
        "min": sb.Min,
        "max": sb.Max,
    }
    aggregates: dict[str, Any] = {}
    clean = set(keys) & state.clean
    for i, (function, column) in enumerate(picked):
        name = f"agg{state.names}_{i}"
        if function == "count":
            aggregates[name] = sb.Count(column)
            clean.add(name)
        else:
            aggregates[name] = makers[function](column)
            if function in ("min", "max") and column in state.clean:
                clean.add(name)
    return (
        lambda pc: pc.combine_per_key(keys, **aggregates),
        lambda s, pc: attrs.evolve(s, pcoll=pc, clean=frozenset(clean), names=s.names + 1),
    )


@st.composite
def sort(draw: st.DrawFn, state: State) -> Built:
    column = draw(st.sampled_from(state.clean_times()))
    others = [c for c in state.schema.names if c != column]
    keys = draw(st.lists(st.sampled_from(others), max_size=1, unique=True)) if others else []
    return lambda pc: pc.sort(column, keys=keys), lambda s, pc: attrs.evolve(s, pcoll=pc)


@st.composite
def union_with_filtered_self(draw: st.DrawFn, state: State) -> Built:
    kind, column = draw(predicates(state))
    keep = predicate(kind, column)
    return lambda pc: pc.union(pc.filter(keep)), lambda s, pc: attrs.evolve(s, pcoll=pc)


@st.composite
def join(draw: st.DrawFn, state: State) -> Built:
    names = list(state.schema.names)
    on = draw(st.lists(st.sampled_from(names), min_size=1, max_size=2, unique=True))
    how = draw(st.sampled_from(["inner", "left", "right", "full"]))
    kind, column = draw(predicates(state))
    keep = predicate(kind, column)
    right_clean = kept_if(kind, column, state.clean)
    others = [c for c in names if c not in on]
    renamed = {c: f"{c}_right" for c in others}

    def next_state(s: State, pc: sb.PCollection) -> State:
        keys = set(on)
        if how == "inner":  # None keys never match
            clean = s.clean | keys | {renamed[c] for c in others if c in right_clean}
        elif how == "left":
            clean = s.clean
        elif how == "right":
            clean = (keys & right_clean) | {renamed[c] for c in others if c in right_clean}
        else:
            clean = keys & s.clean & right_clean
        return attrs.evolve(s, pcoll=pc, clean=frozenset(clean), joined=True)

    return lambda pc: pc.join(pc.filter(keep), on=on, how=how), next_state


def applicable(state: State) -> list[Callable[[State], st.SearchStrategy[Built]]]:
    options: list[Callable[[State], st.SearchStrategy[Built]]] = [
        filter_rows,
        select,
        map_rows,
        combine_per_key,
        union_with_filtered_self,
    ]
    if state.time_columns():
        options.append(with_watermark)
    if state.clean_times():
        options.append(sort)
        if not state.windowed():
            options += [tumble, session] + ([] if state.hopped else [hop])
    if not state.joined:
        options.append(join)
    return options


# --- a case: rows and a chain -----------------------------------------------------------


@attrs.frozen
class Case:
    source: Source
    steps: tuple[Step, ...]
    sorted_by: tuple[str, tuple[str, ...]] | None
    """`(column, keys)` when the last step is a Sort."""

    def build(self, p: sb.Pipeline) -> sb.PCollection:
        pc = p | sb.Create(self.source.rows, schema=self.source.schema)
        for step in self.steps:
            pc = step(pc)
        return pc


@st.composite
def cases(draw: st.DrawFn) -> Case:
    source = draw(sources())
    probe = sb.Pipeline()
    start = probe | sb.Create(source.rows, schema=source.schema)
    has_none_time = any(row["t"] is None for row in source.rows)
    state = State(start, frozenset() if has_none_time else frozenset({"t"}))
    steps: list[Step] = []
    sorted_by = None
    for _ in range(draw(st.integers(1, 4))):
        choice = draw(st.sampled_from(applicable(state)))
        step, follow = draw(choice(state))
        try:
            pc = step(state.pcoll)
        except sb.PipelineError:
            assume(False)
        state = follow(state, pc)
        steps.append(step)
        transform = pc.node.transform
        sorted_by = (transform.column, transform.keys) if isinstance(transform, sb.Sort) else None
    return Case(source, tuple(steps), sorted_by)


def run(case: Case, runner: Any) -> list[Row]:
    p = sb.Pipeline(runner=runner)
    out = case.build(p)
    return p.run().collect(out)


@settings(
    # 12, or the deeper run's count (`SPARKBEAM_MORE_EXAMPLES`: tests/conftest.py's "more")
    max_examples=(
        settings.default.max_examples if settings.get_current_profile_name() == "more" else 12
    ),
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
    ],
)
@given(case=cases())
def test_random_pipelines_agree_on_both_runners(case: Case, spark_runner: Any) -> None:
    direct = run(case, sb.DirectRunner())
    spark = run(case, spark_runner)
    assert row_multiset(spark) == row_multiset(direct)
    if case.sorted_by is not None:
        column, keys = case.sorted_by
        expected = order_within_keys(direct, column, keys)
        assert order_within_keys(spark, column, keys) == expected
        for values in expected.values():
            assert values == sorted(values)
