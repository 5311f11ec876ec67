"""Random pipelines over unbounded input give the same rows on both runners, epoch by epoch.

A case is one or two `TestStream`s (a few epochs each; rows out of order, some
late, some with a `None` event time; a datetime or an integer time column) and
a pipeline drawn over them, in one of four shapes:

- one source: `with_watermark` (maybe after a `Filter`), then a chain;
- a `Union` of two independently watermarked sources (maybe windowed alike
  before it), then a chain;
- a window `Join` of two independently watermarked sources (the same windows on
  both sides, joined on `window_start`/`window_end` and maybe a key), then a chain;
- an interval `Join` of two independently watermarked sources, then a chain.

The chain runs in phases (each may be skipped): a stateless step (`Filter`,
`Select`: drop, rename, `sb.col(c) + d`, `.truncate(u)`; `Map(..., keeps=...)`),
a window (`tumble`, `hop`, `session` with or without a key), a stateful step
(`combine_per_key` with built-in aggregates and a user `sb.CombineFn`, keys
including window columns; a `Union` or window/interval `Join` with a filtered
copy of itself), and a tail (a stateless step, `sort` with or without a key, or
`combine_per_key`). Every step is drawn valid where it is applied, including the
Spark runner's documented rules (a Session's held `window_start` keys no state
but a `CombinePerKey` right after the Session; no `WithWatermark` downstream of
another). Some cases also collect `late_rows()` of a `WithWatermark`.

The pipeline is drawn as Python source (`Case.code`), which is both what the
test runs (executed in a fresh pipeline for each runner) and the reproducer
hypothesis prints when an example fails: paste it after `import datetime,
sparkbeam as sb` and `distinct` from this module.

For each case the test checks that:

- the Spark runner translates the pipeline (a refusal is a failure: the
  generator only draws pipelines the Spark runner documents as runnable), and
  every column watermarked on every edge of its streaming translations has a
  judge (`unjudged_columns`, the one function that reads the runner's internals);
- `collect_by_epoch` gives the same multiset of rows in every epoch (and the
  final flush) on both runners, and after a final `sort` the same sequence of
  the sort column within each key;
- `late_count` and `invalid_count` of every `WithWatermark` are the same.

Budget: a Spark example runs one to six streaming queries (one per output, and
one per `WithWatermark` where two meet), several seconds each. The test is
parametrized over the four shapes, so that every run covers each of them;
every drawn example is compared, also those where the direct runner emits and
drops nothing (Spark must then emit nothing too). `make test` runs
`EXAMPLES` example per shape: under `CI=true` (the derandomized "ci" profile)
hypothesis's first and simplest (a row per epoch, the fewest steps the shape
allows, late rows collected), reported without shrinking; elsewhere one drawn
afresh each run, shrunk on failure (so runs on developers' machines keep
exploring while the suite keeps its ten minutes).
`SPARKBEAM_MORE_EXAMPLES=<n>` (read by `tests/conftest.py`; `make test-more`)
runs n examples in all, spread over the shapes, drawn afresh each run: do
that after changing the Spark runner.

The functions given to `Map`, `Filter` and `CombinePerKey` are made where
Spark's workers can unpickle them by value: lambdas in the executed code, and
the user `CombineFn` class made inside `distinct`.
"""

from __future__ import annotations

import datetime
import os
import shutil
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, Phase, assume, event, given, settings
from hypothesis import strategies as st

import sparkbeam as sb
from tests.agreement.pipelines import order_within_keys, row_multiset

pytestmark = pytest.mark.spark

Row = dict[str, Any]

SHAPES = ("single", "union", "window join", "interval join")
EXAMPLES = 1  # per shape; about 20 s each on a quiet 2-core machine (the suite has 10 minutes)


def examples_per_shape() -> int:
    """Under the "more" profile (`SPARKBEAM_MORE_EXAMPLES`), its examples spread over the
    shapes; else `EXAMPLES`."""
    if settings.get_current_profile_name() == "more":
        return -(-settings.default.max_examples // len(SHAPES))
    return EXAMPLES


EPOCH = datetime.datetime(1970, 1, 1)
WINDOW_COLUMNS = ("window_start", "window_end")
NUMERIC = (int, float)
ORDERED = (int, float, str, datetime.datetime, bool)
TIMES = (int, datetime.datetime)
TYPE_NAMES = {
    str: "str",
    int: "int",
    float: "float",
    bool: "bool",
    datetime.datetime: "datetime.datetime",
}


def distinct(column: str) -> sb.CombineFn:
    """A user CombineFn: the sorted distinct non-None values of `column`, joined.

    The class is made here, inside a function, so that Spark's workers unpickle it by value.
    """

    class Distinct(sb.CombineFn):
        output_type = str

        def create_accumulator(self) -> set[str]:
            return set()

        def add_input(self, accumulator: set[str], element: Row) -> set[str]:
            value = element[column]
            return accumulator if value is None else accumulator | {str(value)}

        def merge_accumulators(self, accumulators: Any) -> set[str]:
            return set().union(*accumulators)

        def extract_output(self, accumulator: set[str]) -> str:
            return ",".join(sorted(accumulator))

    return Distinct()


# --- durations by the kind of the time column ---------------------------------------------


@attrs.frozen
class Units:
    """Durations to draw from, for an integer or a datetime time column."""

    delays: tuple[Any, ...]
    sizes: tuple[Any, ...]
    offsets: tuple[Any, ...]
    hops: tuple[tuple[Any, Any], ...]
    gaps: tuple[Any, ...]
    shifts: tuple[Any, ...]
    truncations: tuple[Any, ...]
    withins: tuple[tuple[Any, Any], ...]


INT_UNITS = Units(
    delays=(0, 1, 3, 8),
    sizes=(2, 5, 10),
    offsets=(0, -3, 2),
    hops=((6, 3), (4, 4), (3, 5), (10, 4)),
    gaps=(1, 3, 8),
    shifts=(-7, 3),
    truncations=(2, 7),
    withins=((0, 5), (-3, 3), (2, 2)),
)
DATETIME_UNITS = Units(
    delays=("0 seconds", "500 milliseconds", "3 seconds", "8 seconds"),
    sizes=("2 seconds", "5 seconds", "10 seconds"),
    offsets=("0 seconds", "-3 seconds", "250 milliseconds"),
    hops=(
        ("6 seconds", "3 seconds"),
        ("4 seconds", "4 seconds"),
        ("3 seconds", "5 seconds"),
        ("10 seconds", "4 seconds"),
    ),
    gaps=("1 second", "3 seconds", "8 seconds"),
    shifts=("-5 seconds", "2 seconds", "1 microsecond"),
    truncations=("2 seconds", "10 seconds", "3 milliseconds"),
    withins=(("0 seconds", "5 seconds"), ("-3 seconds", "3 seconds"), ("1 second", "1 second")),
)


HOWS = ("inner", "left", "right", "full")


def units(kind: type) -> Units:
    return INT_UNITS if kind is int else DATETIME_UNITS


# --- input: the epochs of a TestStream -----------------------------------------------------


@attrs.frozen
class Stream:
    epochs: tuple[tuple[Row, ...], ...]
    kind: type
    """The type of the time column `t`: int or datetime."""

    def code(self, name: str) -> str:
        schema = f'{{"k": str, "v": int, "t": {TYPE_NAMES[self.kind]}}}'
        epochs = "".join(f"\n    .add_epoch({list(rows)!r})" for rows in self.epochs)
        return f"{name} = (\n    sb.TestStream({schema}){epochs}\n)"


@st.composite
def streams(draw: st.DrawFn, kind: type) -> Stream:
    """Epoch `e`'s times lie around `8 e`, out of order: rows of earlier epochs come late."""
    # 2, not 0: hypothesis's first and simplest case then has times that are not None
    with_none = draw(st.integers(0, 2)) == 2
    epochs = []
    for epoch in range(draw(st.integers(2, 3))):
        base = 8 * epoch - 15
        seconds = st.integers(base - 14, base + 6)
        if kind is int:
            times: st.SearchStrategy[Any] = seconds
        else:
            micros = st.sampled_from([0, 0, 0, 1, 999, 250_000])
            times = st.builds(
                lambda s, us: EPOCH + datetime.timedelta(seconds=s, microseconds=us),
                seconds,
                micros,
            )
        if with_none:  # about one row in five
            times = st.tuples(st.integers(0, 4), times).map(lambda x: None if x[0] == 4 else x[1])
        keys = st.sampled_from(["a", "b", None])
        row = st.fixed_dictionaries({"k": keys, "v": st.none() | st.integers(-3, 9), "t": times})
        empty = draw(st.integers(0, 5)) == 5  # 5, not 0: the simplest case's epochs have rows
        epochs.append(() if empty else tuple(draw(st.lists(row, min_size=1, max_size=6))))
    return Stream(tuple(epochs), kind)


# --- a case: streams, the code of the pipeline, what to compare ----------------------------


@attrs.frozen(repr=False)
class Case:
    streams: tuple[Stream, ...]
    code: tuple[str, ...]
    """Python statements over `p`, `s0`, `s1`, ...: the pipeline."""
    output: str
    watermarks: tuple[str, ...]
    """Variables holding the output of each `WithWatermark`."""
    late: str | None
    """A variable holding `late_rows()` of a `WithWatermark`, compared too."""
    sorted_by: tuple[str, tuple[str, ...]] | None
    """`(column, keys)` when the last step is a `Sort`."""

    def source(self) -> str:
        streams = [stream.code(f"s{i}") for i, stream in enumerate(self.streams)]
        return "\n".join([*streams, *self.code])

    def __repr__(self) -> str:
        outputs = [self.output] + ([self.late] if self.late else [])
        return (
            f"\n{self.source()}\n# compared: {', '.join(outputs)}; "
            f"late/invalid counts of: {', '.join(self.watermarks)}\n"
        )

    def build(self, p: sb.Pipeline) -> dict[str, Any]:
        namespace = case_namespace(p)
        exec(self.source(), namespace)
        return namespace

    @property
    def outputs(self) -> tuple[str, ...]:
        return (self.output,) + ((self.late,) if self.late else ())


def case_namespace(p: sb.Pipeline) -> dict[str, Any]:
    # Not an importable module's name: Spark's workers unpickle the lambdas by value.
    return {
        "__name__": "sparkbeam_random_case",
        "sb": sb,
        "datetime": datetime,
        "distinct": distinct,
        "p": p,
    }


# --- drawing a pipeline: each statement runs at once on a probe pipeline -------------------


@attrs.frozen
class Chain:
    """The state of one branch while it is drawn."""

    var: str
    origins: frozenset[str] = frozenset()
    """The `WithWatermark` variables upstream."""
    nested: bool = False
    """Whether one of those is downstream of another (Spark cannot merge such branches)."""
    merged: bool = False
    """Whether watermarks of two `WithWatermark`s met upstream (a Union or Join of both)."""
    joined: bool = False
    held: frozenset[str] = frozenset()
    """Columns whose watermark comes from a Session's `window_start`, which the model holds at
    the oldest open session: Spark keys no state on them (refused), except a CombinePerKey
    right after the Session."""
    after_session: bool = False


class Draft:
    """The statements drawn so far, each executed on a probe pipeline as it is drawn."""

    def __init__(self, draw: st.DrawFn, stream_list: Sequence[Stream]) -> None:
        self.draw = draw
        self.namespace = case_namespace(sb.Pipeline())
        self.code: list[str] = []
        for i, stream in enumerate(stream_list):
            exec(stream.code(f"s{i}"), self.namespace)
        self.watermarks: list[str] = []
        self.lateable: list[str] = []
        """`WithWatermark` variables whose late rows Spark collects on their own."""
        self.names = 0
        self.sorted_by: tuple[str, tuple[str, ...]] | None = None

    def fresh(self, prefix: str) -> str:
        self.names += 1
        return f"{prefix}{self.names}"

    def emit(self, statement: str) -> None:
        try:
            exec(statement, self.namespace)
        except sb.PipelineError:  # not valid where drawn: the strategies should avoid this
            event("rejected when applied")
            assume(False)
        self.code.append(statement)
        self.sorted_by = None

    def pc(self, chain: Chain) -> sb.PCollection:
        pc = self.namespace[chain.var]
        assert isinstance(pc, sb.PCollection)
        return pc

    def columns(self, chain: Chain, kinds: tuple[type, ...] = ()) -> list[str]:
        fields = self.pc(chain).schema.fields
        return [name for name, kind in fields if not kinds or kind in kinds]

    def kind(self, chain: Chain, column: str) -> type:
        return self.pc(chain).schema.type_of(column)

    def marked(self, chain: Chain) -> list[str]:
        """Watermarked columns, in schema order."""
        watermarked = self.pc(chain).watermarked_columns
        return [c for c in self.columns(chain) if c in watermarked]

    def pick(self, options: Sequence[Any]) -> Any:
        return self.draw(st.sampled_from(list(options)))

    # --- steps: each extends the chain by one statement ----------------------------------

    def with_watermark(self, chain: Chain, column: str | None = None) -> Chain:
        if column is None:
            column = self.pick(self.columns(chain, TIMES))
        delay = self.pick(units(self.kind(chain, column)).delays)
        var = self.fresh("w")
        self.emit(f"{var} = {chain.var}.with_watermark({column!r}, {delay!r})")
        self.watermarks.append(var)
        if not chain.merged:
            self.lateable.append(var)
        return attrs.evolve(
            chain,
            var=var,
            origins=chain.origins | {var},
            nested=chain.nested or bool(chain.origins),
        )

    def step(self, chain: Chain, statement: str, derived: dict[str, str] | None = None) -> Chain:
        """`derived`: new columns from old ones (a rename, a shift), which may be held."""
        var = self.fresh("x")
        self.emit(f"{var} = {chain.var}{statement}")
        held = chain.held | {new for new, old in (derived or {}).items() if old in chain.held}
        marked = self.namespace[var].watermarked_columns
        return attrs.evolve(chain, var=var, held=held & marked, after_session=False)

    def predicate(self, chain: Chain) -> str:
        options = [f"row[{c!r}] is not None" for c in self.columns(chain)]
        options += [
            f"row[{c!r}] is not None and row[{c!r}] % 2 == 0" for c in self.columns(chain, (int,))
        ]
        options += [
            f"row[{c!r}] is not None and row[{c!r}] > 0" for c in self.columns(chain, NUMERIC)
        ]
        options += [f"row[{c!r}] != 'a'" for c in self.columns(chain, (str,))]
        options += [
            f"row[{c!r}] is None or row[{c!r}].second % 3 != 0"
            for c in self.columns(chain, (datetime.datetime,))
        ]
        return f"lambda row: {self.pick(options)}"

    def filter(self, chain: Chain) -> Chain:
        return self.step(chain, f".filter({self.predicate(chain)})")

    def select(self, chain: Chain) -> Chain:
        names = self.columns(chain)
        column = self.pick(names)
        others = [c for c in names if c != column]
        kind = self.kind(chain, column)
        actions = ["rename"] + (["drop"] if others else [])
        if kind in TIMES:
            actions += ["shift", "truncate", "shift", "truncate"]
        action = self.pick(actions)
        kept = ", ".join(repr(c) for c in others)
        kept = kept + ", " if kept else ""
        if action == "drop":
            return self.step(chain, f".select({', '.join(repr(c) for c in others)})")
        if action == "rename":
            new = f"{column}_r"
            assume(new not in names)
            return self.step(chain, f".select({kept}{new}=sb.col({column!r}))", {new: column})
        if action == "shift":
            expression = f"sb.col({column!r}) + {self.pick(units(kind).shifts)!r}"
        else:
            expression = f"sb.col({column!r}).truncate({self.pick(units(kind).truncations)!r})"
        new = self.pick([column, f"{column}_d"])
        assume(new == column or new not in names)
        keep = kept if new == column else f"{kept}{column!r}, "
        return self.step(chain, f".select({keep}{new}={expression})", {new: column})

    def map(self, chain: Chain) -> Chain:
        names = self.columns(chain)
        options = [("identity", "")]
        options += [("bump", c) for c in self.columns(chain, NUMERIC)]
        options += [("flag", c) for c in self.columns(chain, NUMERIC)]
        kind, column = self.pick(options)
        keeps = [c for c in names if kind != "bump" or c != column]
        if self.draw(st.integers(0, 5)) == 0:
            keeps = []  # every watermark dropped
        schema = ""
        if kind == "identity":
            fn = "lambda row: dict(row)"
        elif kind == "bump":
            value = f"None if row[{column!r}] is None else row[{column!r}] + 1"
            fn = f"lambda row: {{**row, {column!r}: {value}}}"
        else:
            flag = self.fresh("f")
            value = f"row[{column!r}] is not None and row[{column!r}] > 0"
            fn = f"lambda row: {{**row, {flag!r}: {value}}}"
            fields = [(n, self.kind(chain, n)) for n in names] + [(flag, bool)]
            schema = ", schema={" + ", ".join(f"{n!r}: {TYPE_NAMES[t]}" for n, t in fields) + "}"
        return self.step(chain, f".map({fn}{schema}, keeps={keeps!r})")

    def window_spec(self, kind: type, hop: bool) -> str:
        u = units(kind)
        if hop:
            size, slide = self.pick(u.hops)
            offset = self.pick(u.offsets[:2])
            return f"{size!r}, {slide!r}, offset={offset!r}"
        return f"{self.pick(u.sizes)!r}, offset={self.pick(u.offsets)!r}"

    def tumble(self, chain: Chain) -> Chain:
        column = self.pick(self.time_marks(chain))
        spec = self.window_spec(self.kind(chain, column), hop=False)
        return self.step(chain, f".tumble({column!r}, {spec})")

    def hop(self, chain: Chain) -> Chain:
        column = self.pick(self.time_marks(chain))
        spec = self.window_spec(self.kind(chain, column), hop=True)
        return self.step(chain, f".hop({column!r}, {spec})")

    def session(self, chain: Chain) -> Chain:
        column = self.pick(self.time_marks(chain))
        gap = self.pick(units(self.kind(chain, column)).gaps)
        others = [c for c in self.columns(chain) if c != column]
        keys = self.draw(st.lists(st.sampled_from(others), max_size=1)) if others else []
        out = self.step(chain, f".session({column!r}, {gap!r}, keys={keys!r})")
        return attrs.evolve(out, held=frozenset({"window_start"}), after_session=True)

    def combine_per_key(self, chain: Chain) -> Chain:
        names = self.columns(chain)
        # unbounded input: a key with a watermark; right after a Session, window_start too
        first = self.pick(self.marked(chain) if chain.after_session else self.exact_marks(chain))
        more = self.draw(st.lists(st.sampled_from(names), max_size=1))
        keys = [first] + [c for c in more if c != first]
        choices = ["sb.Count()"]
        choices += [f"sb.Count({c!r})" for c in names]
        choices += [f"sb.{f}({c!r})" for c in self.columns(chain, NUMERIC) for f in ("Sum", "Mean")]
        choices += [f"sb.{f}({c!r})" for c in self.columns(chain, ORDERED) for f in ("Min", "Max")]
        choices += [f"distinct({c!r})" for c in names]
        picked = self.draw(st.lists(st.sampled_from(choices), min_size=1, max_size=3, unique=True))
        prefix = self.fresh("n")
        aggregates = ", ".join(f"{prefix}_{i}={a}" for i, a in enumerate(picked))
        return self.step(chain, f".combine_per_key({keys!r}, {aggregates})")

    def sort(self, chain: Chain) -> Chain:
        column = self.pick(self.time_marks(chain))
        others = [c for c in self.columns(chain) if c != column]
        keys = self.draw(st.lists(st.sampled_from(others), max_size=1)) if others else []
        out = self.step(chain, f".sort({column!r}, keys={keys!r})")
        self.sorted_by = (column, tuple(keys))
        return out

    def self_union(self, chain: Chain) -> Chain:
        return self.step(chain, f".union({chain.var}.filter({self.predicate(chain)}))")

    def self_join(self, chain: Chain) -> Chain:
        marks = self.exact_marks(chain)
        right = f"{chain.var}.filter({self.predicate(chain)})"
        others = [c for c in self.columns(chain) if c not in self.marked(chain)]
        times = self.time_marks(chain)
        if others and times and (not marks or self.draw(st.booleans())):  # an interval join
            # outer only over one WithWatermark: where several meet, an unmatched row may come
            # out micro-batches later on Spark streaming (the documented difference of
            # `test_outer_interval_join_of_two_watermarks_on_spark_streaming_is_late_not_different`)
            how = self.pick(("inner",) if chain.merged else HOWS)
            on = self.pick(others)
            time = self.pick(times)
            lower, upper = self.pick(units(self.kind(chain, time)).withins)
            statement = (
                f".join({right}, on={on!r}, how={how!r}, times=({time!r}, {time!r}), "
                f"within=({lower!r}, {upper!r}))"
            )
        else:
            on = [self.pick(marks)]
            on += [c for c in self.draw(st.lists(st.sampled_from(others), max_size=1))]
            how = self.pick(HOWS)
            statement = f".join({right}, on={on!r}, how={how!r})"
        return attrs.evolve(self.step(chain, statement), joined=True)

    def rewatermark(self, chain: Chain) -> Chain:
        return self.with_watermark(chain)

    def exact_marks(self, chain: Chain) -> list[str]:
        """Watermarked columns Spark can key state on."""
        return [c for c in self.marked(chain) if c not in chain.held]

    def time_marks(self, chain: Chain) -> list[str]:
        return [c for c in self.exact_marks(chain) if self.kind(chain, c) in TIMES]

    def can_combine(self, chain: Chain) -> bool:
        return bool(self.exact_marks(chain)) or chain.after_session

    def can_join(self, chain: Chain) -> bool:
        if chain.nested or chain.joined:
            return False
        interval = self.time_marks(chain) and set(self.columns(chain)) - set(self.marked(chain))
        return bool(self.exact_marks(chain) or interval)

    def chain(self, chain: Chain) -> Chain:
        """Up to four steps, in phases: a stateless step, a window, a stateful step, a tail."""
        Step = Callable[[Chain], Chain] | None
        stateless: list[Step] = [self.filter, self.select, self.map]
        phases: list[Callable[[Chain], list[Step]]] = [
            lambda c: [None, None, *stateless],
            lambda c: (
                [None, self.tumble, self.tumble, self.hop, self.session, self.session]
                if self.time_marks(c) and not any(w in self.columns(c) for w in WINDOW_COLUMNS)
                else [None]
            ),
            lambda c: (
                [None]
                + ([self.combine_per_key] * 2 if self.can_combine(c) else [])
                + ([self.self_union] if self.marked(c) and not c.nested else [])
                + ([self.self_join] if self.can_join(c) else [])
            ),
            lambda c: (
                [None, *stateless]
                + ([self.sort, self.sort] if self.time_marks(c) else [])
                + ([self.combine_per_key] if self.can_combine(c) else [])
            ),
        ]
        # No WithWatermark downstream of another (`rewatermark`): the Spark runner refuses it
        # on streaming input (`chained-watermarks`, docs/support.md), which the generator
        # does not draw; the direct runner's side of it is in the support matrix.
        for options in phases:
            step = self.pick(options(chain))
            if step is not None:
                chain = step(chain)
        return chain

    # --- the shapes: how the sources start ----------------------------------------------

    def source(self, index: int) -> Chain:
        var = self.fresh("src")
        self.emit(f'{var} = p | "s{index}" >> s{index}')
        chain = Chain(var)
        if self.draw(st.integers(0, 3)) == 0:  # a stateless step before the watermark
            chain = self.filter(chain)
        return self.with_watermark(chain, "t")

    def prepared(self, chain: Chain) -> Chain:
        """A source's branch before it meets the other: steps that keep the schema."""
        choice = self.pick(["none", "filter", "identity"])
        if choice == "filter":
            return self.filter(chain)
        if choice == "identity":
            return self.step(chain, f".map(lambda row: dict(row), keeps={self.columns(chain)!r})")
        return chain

    def merged(self, var: str, *chains: Chain) -> Chain:
        return Chain(
            var,
            origins=frozenset().union(*(c.origins for c in chains)),
            nested=any(c.nested for c in chains),
            merged=True,
            joined=any(c.joined for c in chains),
        )

    def union_shape(self) -> Chain:
        a, b = self.prepared(self.source(0)), self.prepared(self.source(1))
        window = self.pick(["none", "tumble", "hop"])
        if window != "none":  # the same windows on both sides
            spec = self.window_spec(self.kind(a, "t"), window == "hop")
            # alike on both: keyed downstream, windows of different sizes are refused on Spark
            # streaming (limits.MERGED_DERIVED_APART, docs/decisions.md)
            a = self.step(a, f".{window}('t', {spec})")
            b = self.step(b, f".{window}('t', {spec})")
        var = self.fresh("u")
        self.emit(f"{var} = {a.var}.union({b.var})")
        return self.merged(var, a, b)

    def window_join_shape(self) -> Chain:
        a, b = self.prepared(self.source(0)), self.prepared(self.source(1))
        hop = self.draw(st.booleans())
        spec = self.window_spec(self.kind(a, "t"), hop)
        window = "hop" if hop else "tumble"
        a = self.step(a, f".{window}('t', {spec})")
        b = self.step(b, f".{window}('t', {spec})")  # alike on both sides
        on = self.pick(
            [["window_start"], ["k", "window_start"], ["window_end"], list(WINDOW_COLUMNS)]
        )
        sides = []
        for chain in (a, b):
            rest = [c for c in ("k", "v", "t") if c not in on]
            picked = self.draw(st.lists(st.sampled_from(rest), unique=True, max_size=len(rest)))
            sides.append(self.step(chain, f".select(*{on + picked!r})"))
        how = self.pick(HOWS)
        var = self.fresh("j")
        self.emit(f"{var} = {sides[0].var}.join({sides[1].var}, on={on!r}, how={how!r})")
        return self.merged(var, *sides)

    def interval_join_shape(self) -> Chain:
        a, b = self.prepared(self.source(0)), self.prepared(self.source(1))
        lower, upper = self.pick(units(self.kind(a, "t")).withins)
        # inner only: an outer interval join of two WithWatermarks may emit an unmatched row
        # micro-batches later on Spark streaming, the documented difference of
        # `test_outer_interval_join_of_two_watermarks_on_spark_streaming_is_late_not_different`
        how = "inner"
        var = self.fresh("j")
        self.emit(
            f"{var} = {a.var}.join({b.var}, on='k', how={how!r}, times=('t', 't'), "
            f"within=({lower!r}, {upper!r}))"
        )
        return self.merged(var, a, b)


@st.composite
def cases(draw: st.DrawFn, shape: str) -> Case:
    """A case of `shape` (one of `SHAPES`)."""
    kind = draw(st.sampled_from([int, datetime.datetime]))
    want_late = draw(st.integers(0, 2)) == 0  # drawn first: late draws lean towards 0
    count = 1 if shape == "single" else 2
    stream_list = tuple(draw(streams(kind)) for _ in range(count))
    draft = Draft(draw, stream_list)
    if shape == "single":
        chain = draft.source(0)
    elif shape == "union":
        chain = draft.union_shape()
    elif shape == "window join":
        chain = draft.window_join_shape()
    elif shape == "interval join":
        chain = draft.interval_join_shape()
    else:
        raise ValueError(f"unknown shape {shape!r}; use one of {SHAPES}")
    chain = draft.chain(chain)
    sorted_by = draft.sorted_by  # the last step was a Sort
    late = None
    if draft.lateable and want_late:
        late = "late"
        draft.emit(f"late = {draft.pick(draft.lateable)}.late_rows()")
    return Case(
        stream_list,
        tuple(draft.code),
        chain.var,
        tuple(draft.watermarks),
        late,
        sorted_by,
    )


# --- running a case -------------------------------------------------------------------------


@attrs.frozen
class Observed:
    by_epoch: dict[str, list[list[Row]]]
    counts: list[tuple[int, int]]


def run(case: Case, runner: Any) -> tuple[Observed, Any, dict[str, Any]]:
    p = sb.Pipeline(runner=runner)
    namespace = case.build(p)
    outputs = {name: namespace[name] for name in case.outputs}
    result = p.run()
    if isinstance(runner, sb.SparkRunner):
        result.prepare(*outputs.values())  # the outputs' queries side by side
    by_epoch = {name: result.collect_by_epoch(pc) for name, pc in outputs.items()}
    counts = [
        (result.late_count(namespace[w]), result.invalid_count(namespace[w]))
        for w in case.watermarks
    ]
    return Observed(by_epoch, counts), p, outputs


def unjudged_columns(
    spark: Any, p: sb.Pipeline, outputs: Sequence[sb.PCollection]
) -> tuple[int, list[str]]:
    """How many watermarked columns on the edges of the Spark streaming translations were
    checked, and those of them that have no judge.

    The translations are the pipeline's as the runner checks it (one query of
    everything) and the stage queries that run each of `outputs`. The only
    function here that reads the Spark runner's internals
    (`streaming.StreamingTranslation` and `queries.StreamingRun`, their `judges`,
    `stages`, `selected`).
    """
    import tempfile

    from sparkbeam.runners.spark.execute import queries, streaming

    translations = []
    directory = tempfile.mkdtemp(prefix="sparkbeam-judges-")
    runs = []
    try:
        # inside the temporary directory, as the runner's are: its epochs' `.incoming` too
        whole = streaming.StreamingTranslation(spark, p.nodes, os.path.join(directory, "feed"))
        whole.run()
        translations.append(("pipeline", whole))
        for pc in outputs:
            run = queries.StreamingRun(spark, p.nodes, pc.node)
            runs.append(run)
            run.translate()
            translations += [(pc.node.label, stage.translation) for stage in run.stages]
        checked, missing = 0, []
        for query, translation in translations:
            for node_id in sorted(translation.selected):
                node = translation.nodes[node_id]
                judged = translation.judges.get(node_id, {})
                checked += len(node.info.watermarked)
                missing += [
                    f"{query}: {node.label}.{column}"
                    for column in sorted(node.info.watermarked)
                    if column not in judged
                ]
        return checked, missing
    finally:
        for run in runs:
            run.stop()
        shutil.rmtree(directory, ignore_errors=True)


@settings(
    max_examples=examples_per_shape(),
    deadline=None,
    # Under CI a failure is reported as found, not shrunk: each Spark example costs seconds.
    phases=[Phase.explicit, Phase.reuse, Phase.generate]
    if os.environ.get("CI")
    else [Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        HealthCheck.data_too_large,
    ],
)
@pytest.mark.parametrize("shape", SHAPES)
@given(data=st.data())
def test_random_streaming_pipelines_agree_epoch_by_epoch(
    shape: str, data: st.DataObject, spark_runner: Any
) -> None:
    case = data.draw(cases(shape), label="case")
    direct, _, _ = run(case, sb.DirectRunner())
    emitted = any(any(epochs) for epochs in direct.by_epoch.values())
    dropped = any(late or invalid for late, invalid in direct.counts)
    event(f"the direct runner emits rows: {emitted}, drops rows: {dropped}")
    spark, p, outputs = run(case, spark_runner)
    checked, unjudged = unjudged_columns(spark_runner.spark, p, list(outputs.values()))
    assert checked > 0  # every case has a WithWatermark
    assert unjudged == []
    assert spark.counts == direct.counts
    for name, epochs in direct.by_epoch.items():
        got = spark.by_epoch[name]
        assert len(got) == len(epochs), name
        for index, (want, have) in enumerate(zip(epochs, got, strict=True)):
            assert row_multiset(have) == row_multiset(want), (name, index)
            if name == case.output and case.sorted_by is not None:
                column, keys = case.sorted_by
                expected = order_within_keys(want, column, keys)
                assert order_within_keys(have, column, keys) == expected, (name, index)
