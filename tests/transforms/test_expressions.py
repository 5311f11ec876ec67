"""Expressions (SPEC section 7): values with SQL's None rules, errors, types, watermarks.

Random expressions over random rows (with Nones, negative numbers, empty
strings and zero divisors) must equal a plain-Python reference written here
row by row, on the direct runner and, many expressions in one Spark `select`,
on the Spark runner.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sparkbeam as sb

T0 = datetime(2026, 4, 1, 10, 0)


def values(
    rows: list[dict[str, Any]], runner: Any = "direct", schema: Any = None, **exprs: Any
) -> list[Any]:
    with sb.Pipeline(runner=runner) as p:
        out = (p | sb.Create(rows, schema=schema)).select(**exprs)
    return p.result.collect(out)


ROW_SCHEMA = {
    "z": int,
    "a": int,
    "b": int,
    "f": float,
    "n": int,
    "s": str,
    "ns": str,
    "t": datetime,
}


def one(expr: Any, **row: Any) -> Any:
    return values([{"z": 0, **row}], schema=ROW_SCHEMA, x=expr)[0]["x"]


# --- values ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        (sb.col("a") // 2, -4),
        (sb.col("a") % 2, 1),
        (sb.col("a") // -2, 3),
        (sb.col("a") % -2, -1),
        (1 // sb.col("b"), 0),
        (sb.col("a") / 2, -3.5),
        (sb.col("a") + 0.5, -6.5),
        (sb.col("f") // 2, -4.0),
        (sb.col("f") % 2, 0.5),
        (-sb.col("a"), 7),
        (sb.col("n") // 0, None),
        (sb.col("n") % sb.col("z"), None),
        (sb.col("n") + 1, None),
        (sb.col("n").is_null() & (sb.col("a") < 0), True),
        (sb.lit(None).cast(bool) & False, False),
        (sb.lit(None).cast(bool) | True, True),
        (sb.lit(None).cast(bool) & True, None),
        (~sb.lit(None).cast(bool), None),
        (sb.col("a").isin(1, 2), False),
        (sb.col("a").isin(1, None), None),
        (sb.col("a").isin(-7, None), True),
        (sb.col("n").isin(1), None),
        (sb.col("a").between(-7, -7), True),
        (sb.col("s").length(), 5),
        (sb.col("s").upper(), "HELLO"),
        (sb.col("s").substr(2, 3), "ell"),
        (sb.col("s").substr(-3, 2), "ll"),
        (sb.col("s").substr(0, 2), "he"),
        (sb.col("s").contains(""), True),
        (sb.col("s").startswith("he") & sb.col("s").endswith("lo"), True),
        (sb.concat(sb.col("s"), sb.lit("-"), sb.col("s")), "hello-hello"),
        (sb.concat(sb.col("s"), sb.col("ns")), None),
        (sb.coalesce(sb.col("n"), sb.col("a"), 3), -7),
        (sb.when(sb.col("a") > 0, "pos").when(sb.col("a") < 0, sb.lit("neg")), "neg"),
        (sb.when(sb.col("a") > 0, 1), None),
        (sb.when(sb.col("a") > 0, 1).otherwise(2.5), 2.5),
        (sb.when(sb.col("z") != 0, sb.col("a") // sb.col("z")).otherwise(0), 0),
        (sb.coalesce(sb.col("a"), sb.col("a") // sb.col("z")), -7),
        (sb.col("t").hour(), 10),
        (sb.col("t").day_of_week(), 4),  # 2026-04-01 is a Wednesday
        (sb.col("t").truncate("1 day"), datetime(2026, 4, 1)),
        (sb.col("t") + "90 minutes", datetime(2026, 4, 1, 11, 30)),
        (sb.col("t").cast(str), "2026-04-01 10:00:00"),
        ((sb.col("t") + timedelta(microseconds=500000)).cast(str), "2026-04-01 10:00:00.5"),
        (sb.col("a").cast(str), "-7"),
        (sb.col("a").cast(bool), True),
        (sb.col("f").cast(int), -7),
        (sb.lit(True).cast(int), 1),
        (sb.lit(False).cast(str), "false"),
        (sb.lit(" -12 ").cast(int), -12),
        (sb.lit("1e3").cast(float), 1000.0),
        (sb.lit(" YES").cast(bool), True),
        (sb.lit("n").cast(bool), False),
        (sb.col("a") == -7.0, True),
    ],
)
def test_values(expr: sb.Expr, expected: Any) -> None:
    row = {"a": -7, "b": 5, "f": -7.5, "n": None, "s": "hello", "ns": None, "t": T0}
    assert one(expr, **row) == expected


NONE_BESIDE_ZEROS = {
    "float_floordiv": sb.col("x") // 2,
    "floordiv_float": 2 // sb.col("g"),
    "float_floordiv_zero": sb.col("x") // sb.col("fz"),
    "float_mod": sb.col("x") % 2.5,
    "mod_float": 2.5 % sb.col("g"),
    "float_mod_zero": sb.col("x") % 0.0,
    "int_floordiv": sb.col("n") // 2,
    "floordiv_int": 7 // sb.col("m"),
    "int_floordiv_zero": sb.col("n") // sb.col("z"),
    "int_mod": sb.col("n") % -3,
    "mod_int": 7 % sb.col("m"),
    "int_mod_zero": sb.col("n") % sb.col("z"),
}


def test_floor_division_and_modulo_of_none_are_none(runner: Any) -> None:
    """`None // 2`, `2 // None`, `None // 0` (and `%`), integers and floats: `None` on both
    runners, never a value (Spark's float `//` once gave `0.0`) nor an error."""
    row = {"x": None, "g": None, "n": None, "m": None, "z": 0, "fz": 0.0}
    schema = {"x": float, "g": float, "n": int, "m": int, "z": int, "fz": float}
    [got] = values([row], runner, schema, **NONE_BESIDE_ZEROS)
    assert got == dict.fromkeys(NONE_BESIDE_ZEROS)


def test_a_float_zero_from_floor_division_and_modulo_has_pythons_sign(runner: Any) -> None:
    """`0.0 // -5.0` is `-0.0` and `-4.0 % 2.0` is `0.0` (the divisor's sign), as in Python."""
    exprs = {"quotient": sb.col("x") // -5.0, "remainder": sb.col("y") % 2.0}
    [got] = values([{"x": 0.0, "y": -4.0}], runner, **exprs)
    assert [math.copysign(1.0, got[name]) for name in exprs] == [-1.0, 1.0]
    assert got == {"quotient": 0.0, "remainder": 0.0}


@pytest.mark.parametrize(
    "expr",
    [
        sb.col("a") // sb.col("z"),
        sb.col("a") % sb.col("z"),
        sb.col("a") / sb.col("z"),
        sb.col("a") * 4611686018427387904,
        sb.col("big") + 1,
        -sb.col("small"),
        sb.col("small") // -1,
        sb.col("small").truncate(3),
        sb.col("late") + "1 day",
        sb.col("early") - timedelta(days=2),
        sb.col("early").truncate("7 days"),
        sb.lit("1.5").cast(int),
        sb.lit("").cast(float),
        sb.lit("maybe").cast(bool),
        sb.lit(1e30).cast(int),
    ],
)
def test_errors_name_the_transform_the_expression_and_the_row(expr: sb.Expr) -> None:
    row = {
        "a": -7,
        "z": 0,
        "big": 2**63 - 1,
        "small": -(2**63),
        "late": datetime(9999, 12, 31, 12),
        "early": datetime(1, 1, 2),
    }
    with pytest.raises(sb.DataError) as info, sb.Pipeline() as p:
        (p | sb.Create([row])) | "compute" >> sb.Select(x=expr)
    message = str(info.value)
    assert "compute" in message
    assert str(expr) in message
    assert "'a': -7" in message


@pytest.mark.parametrize(
    ("expr", "words"),
    [
        (sb.col("s") > 1, ["str", "int"]),
        (sb.col("a").hour(), ["hour()", "int"]),
        (sb.col("a") & True, ["bool"]),
        (sb.col("s") + 1, ["str"]),
        (sb.col("f").cast(str), ["float", "Map"]),
        (sb.col("a").cast("datetime"), ["int", "datetime"]),
        (sb.col("t").cast(int), ["datetime", "int"]),
        (sb.col("s").cast("datetime"), ["str", "datetime"]),
        (sb.when(sb.col("a") > 0, "x").otherwise(1), ["int", "str"]),
        (sb.col("s").isin(1, 2), ["int", "str"]),
        (sb.col("t") + sb.col("t"), ["datetime"]),
    ],
)
def test_wrong_types_are_refused_when_applied(expr: sb.Expr, words: list[str]) -> None:
    source = sb.Pipeline() | sb.Create([{"a": 1, "f": 1.0, "s": "x", "t": T0}])
    with pytest.raises(sb.PipelineError) as info:
        source | "compute" >> sb.Select(x=expr)
    message = str(info.value)
    assert "compute" in message
    assert str(expr) in message
    for word in words:
        assert word in message


def test_a_filter_needs_a_bool_expression() -> None:
    source = sb.Pipeline() | sb.Create([{"a": 1}])
    with pytest.raises(sb.PipelineError, match="bool"):
        source.filter(sb.col("a") + 1)


def test_an_expression_is_not_a_python_bool() -> None:
    with pytest.raises(TypeError, match="&"):
        bool(sb.col("a") > 1)


def test_filter_keeps_rows_where_the_expression_is_true() -> None:
    rows = [{"a": 1}, {"a": None}, {"a": 7}]
    with sb.Pipeline() as p:
        out = (p | sb.Create(rows)).filter((sb.col("a") >= 5) | (sb.col("a") < 0))
    assert p.result.collect(out) == [{"a": 7}]


def test_with_columns_replaces_in_place_and_appends() -> None:
    with sb.Pipeline() as p:
        out = (p | sb.Create([{"a": 1, "b": "x", "c": 2.0}])).with_columns(
            b=sb.col("b").upper(), d=sb.col("a") * 10, e=sb.lit("k")
        )
    assert out.schema.names == ("a", "b", "c", "d", "e")
    assert p.result.collect(out) == [{"a": 1, "b": "X", "c": 2.0, "d": 10, "e": "k"}]


# --- watermarks ------------------------------------------------------------------------


def _watermarked(p: sb.Pipeline) -> sb.PCollection:
    stream = sb.TestStream()
    stream.add_epoch([{"t": T0 + timedelta(minutes=47, seconds=30), "n": 95, "k": "a"}])
    stream.add_epoch([{"t": T0 + timedelta(minutes=75), "n": 130, "k": "b"}])
    return (p | stream).with_watermark("t", "1 minute").with_watermark("n", 3)


ORDER_KEEPING = {
    "same": sb.col("t"),
    "own_cast": sb.col("t").cast("datetime"),
    "later": sb.col("t") + "5 minutes",
    "earlier": sb.col("t") - timedelta(minutes=5),
    "hour": sb.col("t").truncate("1 hour"),
    "mixed": (sb.col("t").cast("datetime") - "10 minutes").truncate("1 hour") + "1 second",
    "n_plus": sb.col("n") + 5,
    "plus_n": 5 + sb.col("n"),
    "n_minus": sb.col("n") - 5,
    "n_tens": sb.col("n").truncate(10),
    "n_cast": sb.col("n").cast(int),
}
NOT_ORDER_KEEPING = {
    "neg": -sb.col("n"),
    "back": 5 - sb.col("n"),
    "times": sb.col("n") * 2,
    "div": sb.col("n") // 2,
    "cond": sb.when(sb.col("n") > 0, sb.col("n")).otherwise(0),
    "first": sb.coalesce(sb.col("n"), 0),
    "h": sb.col("t").hour(),
}


def test_watermarks_derive_through_every_order_keeping_expression() -> None:
    """The direct runner checks invariant W on every edge while this runs."""
    with sb.Pipeline() as p:
        out = _watermarked(p).with_columns(**ORDER_KEEPING, **NOT_ORDER_KEEPING)
    marks: dict[str, list[Any]] = {}
    for mark in p.result.watermarks(out):
        marks.setdefault(mark.column, []).append(mark.value)
    assert out.watermarked_columns == frozenset({"t", "n", *ORDER_KEEPING})
    t_marks = marks["t"]
    assert marks["later"] == [m + timedelta(minutes=5) for m in t_marks]
    assert marks["hour"] == [datetime(2026, 4, 1, 10), datetime(2026, 4, 1, 11)]
    assert marks["n_plus"] == [m + 5 for m in marks["n"]]
    assert marks["n_tens"] == [m - m % 10 for m in marks["n"]]
    assert marks["own_cast"] == t_marks


def test_filter_expression_keeps_every_watermark() -> None:
    with sb.Pipeline() as p:
        out = _watermarked(p).filter(sb.col("k") == "b")
    assert out.watermarked_columns == frozenset({"t", "n"})
    assert p.result.collect(out) == [{"t": T0 + timedelta(minutes=75), "n": 130, "k": "b"}]


# --- random expressions against a plain-Python reference --------------------------------

Ref = Callable[[dict[str, Any]], Any]
INT64 = (-(2**63), 2**63 - 1)


class Failed(Exception):
    """The reference's error: the expression has no value for that row."""


def _int(value: int) -> int:
    if not INT64[0] <= value <= INT64[1]:
        raise Failed
    return value


def _none(*args: Any) -> bool:
    return any(a is None for a in args)


def _arith(op: str, kind: type) -> Callable[[Any, Any], Any]:
    def compute(a: Any, b: Any) -> Any:
        if _none(a, b):
            return None
        if kind is float:
            a, b = float(a), float(b)
        if op in ("/", "//", "%") and b == 0:
            raise Failed
        result = {
            "+": lambda: a + b,
            "-": lambda: a - b,
            "*": lambda: a * b,
            "/": lambda: float(a) / float(b),
            "//": lambda: a // b,
            "%": lambda: a % b,
        }[op]()
        return _int(result) if isinstance(result, int) else result

    return compute


def _cmp(op: str) -> Callable[[Any, Any], Any]:
    function = {
        "==": lambda a, b: a == b,
        "!=": lambda a, b: a != b,
        "<": lambda a, b: a < b,
        "<=": lambda a, b: a <= b,
        ">": lambda a, b: a > b,
        ">=": lambda a, b: a >= b,
    }[op]
    return lambda a, b: None if _none(a, b) else function(a, b)


def _and(a: Any, b: Any) -> Any:
    return False if False in (a, b) else None if _none(a, b) else True


def _or(a: Any, b: Any) -> Any:
    return True if True in (a, b) else None if _none(a, b) else False


Gen = tuple[Any, Ref]
COLUMNS = {"i": int, "j": int, "f": float, "s": str, "u": str, "b": bool, "t": datetime}
INTS = st.one_of(st.none(), st.integers(-20, 20), st.sampled_from([0, -1, 2**62, -(2**63)]))
FLOATS = st.one_of(st.none(), st.sampled_from([0.0, -0.0, -0.5, 2.5, -7.25, 3.0, 1e300]))
STRS = st.one_of(st.none(), st.sampled_from(["", "a", "Ab", " 12 ", "-3", "yes", "N", "1.5e2"]))
TIMES = st.one_of(
    st.none(),
    st.integers(-(10**6), 10**6).map(lambda m: T0 + timedelta(minutes=m, microseconds=m * 37)),
)
ZEROS = {"i": 0, "j": 0, "f": 0.0, "s": "", "u": "", "b": False, "t": T0}
"""Each column's zero (the empty string, `False`, a time on the hour): next to `None`s."""


@st.composite
def none_heavy_rows(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Random rows, with one to three columns `None` in every row, and at least one row where
    every other column is `None` or its zero (`None // 0`, `None % 0.0`, `None & False`, ...).

    A `None` operand that a runner turns into a value (a `0.0` from `when(...).otherwise`
    on Spark) shows on those rows; one that becomes an error shows where the other operand
    is a zero divisor."""
    values = {
        "i": INTS,
        "j": INTS,
        "f": FLOATS,
        "s": STRS,
        "u": STRS,
        "b": st.none() | st.booleans(),
        "t": TIMES,
    }
    rows = draw(st.lists(st.fixed_dictionaries(values), max_size=6))
    beside_zeros = st.fixed_dictionaries(
        {name: st.sampled_from([None, zero]) for name, zero in ZEROS.items()}
    )
    rows += draw(st.lists(beside_zeros, min_size=1, max_size=2))
    blank = draw(st.sets(st.sampled_from(sorted(COLUMNS)), min_size=1, max_size=3))
    return [{**row, **dict.fromkeys(blank)} for row in rows]


ROWS = none_heavy_rows()


def _column(name: str) -> Gen:
    return sb.col(name), lambda row: row[name]


def _literal(value: Any) -> Gen:
    return sb.lit(value), lambda row: value


def _leaf(kind: type) -> st.SearchStrategy[Gen]:
    names = [name for name, k in COLUMNS.items() if k is kind]
    literals = {
        int: st.integers(-3, 3),
        float: st.sampled_from([0.0, 1.5, -2.0]),
        str: st.sampled_from(["", "a", "b "]),
        bool: st.booleans(),
        datetime: st.just(T0),
    }[kind]
    return st.one_of(st.sampled_from(names).map(_column), literals.map(_literal))


def _binary(expr: Callable[[Any, Any], Any], ref: Callable[[Any, Any], Any]) -> Callable[..., Gen]:
    def build(left: Gen, right: Gen) -> Gen:
        (le, lr), (re, rr) = left, right
        return expr(le, re), lambda row: ref(lr(row), rr(row))

    return build


def _unary(expr: Callable[[Any], Any], ref: Callable[[Any], Any]) -> Callable[[Gen], Gen]:
    def build(operand: Gen) -> Gen:
        e, r = operand
        return expr(e), lambda row: (lambda v: None if v is None else ref(v))(r(row))

    return build


def _when(cond: Gen, then: Gen, other: Gen) -> Gen:
    (ce, cr), (te, tr), (oe, orr) = cond, then, other
    return sb.when(ce, te).otherwise(oe), lambda row: tr(row) if cr(row) is True else orr(row)


def _coalesce(first: Gen, second: Gen) -> Gen:
    (fe, fr), (se, sr) = first, second

    def ref(row: dict[str, Any]) -> Any:
        value = fr(row)
        return sr(row) if value is None else value

    return sb.coalesce(fe, se), ref


def _str_to_int(text: str) -> int:
    trimmed = text.strip()
    if not trimmed.lstrip("+-").isdigit() or trimmed.count("-") + trimmed.count("+") > 1:
        raise Failed
    return _int(int(trimmed))


def _str_to_float(text: str) -> float:
    try:
        return float(text.strip())
    except ValueError:
        raise Failed from None


def _str_to_bool(text: str) -> bool:
    word = text.strip().lower()
    if word in ("t", "true", "y", "yes", "1"):
        return True
    if word in ("f", "false", "n", "no", "0"):
        return False
    raise Failed


def _float_to_int(value: float) -> int:
    if not -(2.0**63) <= value < 2.0**63:
        raise Failed
    return math.trunc(value)


def _time_text(value: datetime) -> str:
    text = value.strftime("%Y-%m-%d %H:%M:%S")
    return text + (f".{value.microsecond:06d}".rstrip("0") if value.microsecond else "")


KINDS = (int, float, str, bool, datetime)


def _nodes(
    operands: Mapping[type, st.SearchStrategy[Gen]],
) -> dict[type, list[st.SearchStrategy[Gen]]]:
    """Per output type, one strategy for each kind of node, its operands drawn from `operands`."""
    nodes: dict[type, list[st.SearchStrategy[Gen]]] = {}
    ints, floats, strs, bools, times = (operands[kind] for kind in KINDS)
    numbers = st.one_of(ints, floats)

    def arith(kind: type, op: str, operands: st.SearchStrategy[Gen]) -> st.SearchStrategy[Gen]:
        function = {
            "+": lambda a, b: a + b,
            "-": lambda a, b: a - b,
            "*": lambda a, b: a * b,
            "/": lambda a, b: a / b,
            "//": lambda a, b: a // b,
            "%": lambda a, b: a % b,
        }[op]
        return st.builds(_binary(function, _arith(op, kind)), operands, operands)

    int_ops = [arith(int, op, ints) for op in ("+", "-", "*", "//", "%")]
    nodes[int] = [
        *int_ops,
        st.builds(_unary(lambda e: -e, lambda v: _int(-v)), ints),
        st.builds(_unary(lambda e: e.length(), len), strs),
        st.builds(_unary(lambda e: e.hour(), lambda v: v.hour), times),
        st.builds(_unary(lambda e: e.day_of_week(), lambda v: v.isoweekday() % 7 + 1), times),
        st.builds(_unary(lambda e: e.cast(int), int), bools),
        st.builds(_unary(lambda e: e.cast(int), _str_to_int), strs),
        st.builds(_unary(lambda e: e.cast(int), _float_to_int), floats),
        st.builds(_when, bools, ints, ints),
        st.builds(_coalesce, ints, ints),
    ]
    float_ops = [arith(float, op, floats) for op in ("+", "-", "*", "//", "%")]
    nodes[float] = [
        *float_ops,
        arith(float, "/", numbers),
        st.builds(_unary(lambda e: e.cast(float), float), ints),
        st.builds(_unary(lambda e: e.cast(float), _str_to_float), strs),
        st.builds(_when, bools, floats, floats),
    ]
    compare = [
        st.builds(_binary(lambda a, b, op=op: _COMPARE_EXPR[op](a, b), _cmp(op)), kinds, kinds)
        for op in ("==", "!=", "<", "<=", ">", ">=")
        for kinds in (numbers, strs, times)
    ]
    nodes[bool] = [
        *compare,
        st.builds(_binary(lambda a, b: a & b, _and), bools, bools),
        st.builds(_binary(lambda a, b: a | b, _or), bools, bools),
        st.builds(_unary(lambda e: ~e, lambda v: not v), bools),
        st.builds(lambda g: (g[0].is_null(), lambda row: g[1](row) is None), ints | strs),
        st.builds(
            lambda g, vals: (
                g[0].isin(*vals),
                lambda row: (
                    None
                    if g[1](row) is None
                    else True
                    if g[1](row) in vals
                    else None
                    if None in vals
                    else False
                ),
            ),
            ints,
            st.lists(st.none() | st.integers(-3, 3), min_size=1, max_size=3),
        ),
        st.builds(
            _binary(
                lambda a, b: a.startswith(b), lambda a, b: None if _none(a, b) else a.startswith(b)
            ),
            strs,
            strs,
        ),
        st.builds(
            _binary(lambda a, b: a.contains(b), lambda a, b: None if _none(a, b) else b in a),
            strs,
            strs,
        ),
        st.builds(_unary(lambda e: e.cast(bool), _str_to_bool), strs),
        st.builds(_unary(lambda e: e.cast(bool), lambda v: v != 0), ints),
    ]
    nodes[str] = [
        st.builds(_unary(lambda e: e.upper(), str.upper), strs),
        st.builds(_unary(lambda e: e.lower(), str.lower), strs),
        st.builds(
            lambda g, a, n: (
                g[0].substr(a, n),
                lambda row: None if g[1](row) is None else _substr(g[1](row), a, n),
            ),
            strs,
            st.integers(-4, 4),
            st.integers(-1, 4),
        ),
        st.builds(
            _binary(lambda a, b: sb.concat(a, b), lambda a, b: None if _none(a, b) else a + b),
            strs,
            strs,
        ),
        st.builds(_unary(lambda e: e.cast(str), str), ints),
        st.builds(_unary(lambda e: e.cast(str), lambda v: "true" if v else "false"), bools),
        st.builds(_unary(lambda e: e.cast(str), _time_text), times),
        st.builds(_coalesce, strs, strs),
    ]
    nodes[datetime] = [
        st.builds(_unary(lambda e: e + "90 minutes", lambda v: v + timedelta(minutes=90)), times),
        st.builds(
            _unary(
                lambda e: e.truncate("1 hour"),
                lambda v: v.replace(minute=0, second=0, microsecond=0),
            ),
            times,
        ),
    ]
    return nodes


def _expressions() -> dict[type, st.SearchStrategy[Gen]]:
    """Random expressions of each type: a leaf or a node over random expressions."""
    out: dict[type, st.SearchStrategy[Gen]] = {}
    deferred = {kind: st.deferred(lambda kind=kind: out[kind]) for kind in KINDS}
    for kind, nodes in _nodes(deferred).items():
        out[kind] = st.one_of(_leaf(kind), *nodes)
    return out


def _substr(text: str, start: int, count: int) -> str:
    first = start - 1 if start > 0 else len(text) + start if start < 0 else 0
    end = first + count
    first = max(first, 0)
    return text[first:end] if first < end else ""


_COMPARE_EXPR: dict[str, Callable[[Any, Any], Any]] = {
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}
EXPRESSIONS = _expressions()
EVERY_NODE = st.tuples(
    *(node for nodes in _nodes({kind: _leaf(kind) for kind in KINDS}).values() for node in nodes)
)
"""One expression of every kind of node, each over columns and literals."""
ANY_EXPRESSION = st.one_of(*EXPRESSIONS.values())


def reference(ref: Ref, rows: list[dict[str, Any]]) -> list[Any] | None:
    """The reference's values, or None where some row has no value (an error on both runners)."""
    try:
        return [ref(row) for row in rows]
    except (Failed, ZeroDivisionError, OverflowError):
        return None


def _same_value(x: Any, y: Any) -> bool:
    """Equal, NaN equal to NaN, a float zero's sign included (`-0.0 // 1` is `-0.0`)."""
    if x != x and y != y:
        return True
    if x != y:
        return False
    if isinstance(x, float) or isinstance(y, float):
        return x != 0 or math.copysign(1, x) == math.copysign(1, y)
    return True


def _same(a: list[Any], b: list[Any]) -> bool:
    return all(_same_value(x, y) for x, y in zip(a, b, strict=True))


@given(rows=ROWS, generated=st.lists(ANY_EXPRESSION, min_size=1, max_size=6))
def test_random_expressions_equal_the_reference(
    rows: list[dict[str, Any]], generated: list[Gen]
) -> None:
    for expr, ref in generated:
        expected = reference(ref, rows)
        if expected is None:
            with pytest.raises(sb.DataError):
                values(rows, schema=COLUMNS, x=expr)
        else:
            got = [row["x"] for row in values(rows, schema=COLUMNS, x=expr)]
            assert _same(got, expected), str(expr)


@pytest.mark.spark
@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(rows=ROWS, every=EVERY_NODE, generated=st.lists(ANY_EXPRESSION, min_size=4, max_size=10))
def test_random_expressions_agree_on_spark(
    spark_runner: Any, rows: list[dict[str, Any]], every: tuple[Gen, ...], generated: list[Gen]
) -> None:
    """One expression of every kind of node and a few more over `None`-heavy rows, in one Spark
    select: the reference's values, on Spark as on the direct runner; the first expression the
    reference has no value for is a `DataError` on both runners."""
    exprs, expected, failing = {}, {}, []
    for index, (expr, ref) in enumerate([*every, *generated]):
        want = reference(ref, rows)
        if want is None:
            failing.append(expr)
        else:
            exprs[f"x{index}"], expected[f"x{index}"] = expr, want
    keyed = [{**row, "k": k} for k, row in enumerate(rows)]
    schema = {**COLUMNS, "k": int}
    got = sorted(values(keyed, spark_runner, schema, k="k", **exprs), key=lambda row: row["k"])
    direct = values(keyed, "direct", schema, k="k", **exprs)
    assert len(got) == len(rows)
    for name, want in expected.items():
        spark_values = [row[name] for row in got]
        assert _same(spark_values, want), f"{exprs[name]}: spark {spark_values}, want {want}"
        assert _same([row[name] for row in direct], want), str(exprs[name])
    if failing:
        for runner in ("direct", spark_runner):
            with pytest.raises(sb.DataError):
                values(rows, runner, COLUMNS, x=failing[0])


# --- on the Spark runner ----------------------------------------------------------------


def nested(levels: int) -> tuple[Any, Any]:
    """A float and an integer expression nested `levels` deep, each level a node whose Spark
    Column repeats its operands (float `//` and `%`, integer `*` and `//` with their checks)."""
    f, n = sb.col("f"), sb.col("n")
    for _ in range(levels):
        f = (f // 1.5) % 7.0 + sb.col("f")
        n = (n * 3) // 2 - sb.col("n")
    return f, n


@pytest.mark.spark
def test_nested_arithmetic_stays_small_on_spark(spark_runner: Any) -> None:
    """Each of these nodes' Columns names its operands several times, so nested ones grew
    exponentially (two levels printed as 14 million characters; a random expression filled
    the driver's 2 GB heap in Spark's analyzer). A large operand is computed once and handed
    to its node by name: the Column grows with the nesting, and the values are the direct
    runner's."""
    from sparkbeam.runners.spark.parts.expressions import Compiler
    from sparkbeam.schema import Schema

    schema = Schema.of({"f": float, "n": int})
    f, n = nested(6)
    compiler = Compiler(schema, "Select")
    sizes = [len(str(compiler.column(e.bind(schema, "Select")))) for e in nested(1) + nested(2)]
    assert sizes[2] < 3 * sizes[0] and sizes[3] < 3 * sizes[1], sizes  # one level more
    rows = [{"f": i - 3.25, "n": i - 4} for i in range(9)]
    spark = values(rows, spark_runner, {"f": float, "n": int}, x=f, y=n)
    assert spark == values(rows, "direct", {"f": float, "n": int}, x=f, y=n)


PYTHON_IN_PLAN = ("MapInArrow", "MapInPandas", "ArrowEvalPython", "BatchEvalPython", "PythonUDF")


@pytest.mark.spark
def test_an_expression_only_pipeline_runs_no_python_on_spark(spark_runner: Any) -> None:
    rows = [{"amount": a, "t": T0 + timedelta(minutes=a)} for a in range(-3, 9)]
    with sb.Pipeline(runner=spark_runner) as p:
        out = (
            (p | sb.Create(rows))
            .filter(sb.col("amount") >= 5)
            .with_columns(net=sb.col("amount") * 0.8, hour=sb.col("t").truncate("1 hour"))
            .combine_per_key("hour", total=sb.Sum("net"))
        )
    plan = p.result.explain(out)
    assert not [word for word in PYTHON_IN_PLAN if word in plan], plan
    assert p.result.collect(out) == [{"hour": T0, "total": pytest.approx(0.8 * 26)}]


@pytest.mark.spark
@pytest.mark.parametrize(
    ("expr", "failing"),
    [
        (sb.col("a") // sb.col("z"), "(col('a') // col('z'))"),
        (sb.col("big") + 1, "(col('big') + 1)"),
        (sb.lit("1.5").cast(int) + sb.col("a"), "'1.5'.cast(int)"),
        (sb.col("small").truncate(3), "col('small').truncate(3)"),
        (sb.col("late") + "1 day", "(col('late') + '1 day')"),
    ],
)
def test_spark_errors_name_the_transform_the_expression_and_the_row(
    spark_runner: Any, expr: sb.Expr, failing: str
) -> None:
    row = {"a": -7, "z": 0, "big": 2**63 - 1, "small": -(2**63), "late": datetime(9999, 12, 31)}
    with sb.Pipeline(runner=spark_runner) as p:
        out = (p | sb.Create([row])) | "compute" >> sb.Select(x=expr)
    with pytest.raises(sb.DataError) as info:
        p.result.collect(out)
    message = str(info.value)
    assert "compute" in message
    assert failing in message
    assert '"a":-7' in message


@pytest.mark.spark
def test_expressions_on_a_stream_agree(spark_runner: Any) -> None:
    def build(runner: Any) -> list[dict[str, Any]]:
        stream = sb.TestStream()
        stream.add_epoch([{"t": T0, "v": 3, "k": "a"}, {"t": T0, "v": None, "k": "b"}])
        stream.add_epoch([{"t": T0 + timedelta(minutes=30), "v": -7, "k": "c"}])
        with sb.Pipeline(runner=runner) as p:
            out = (
                (p | stream)
                .with_watermark("t", "1 minute")
                .filter(sb.col("v").is_null() | (sb.col("v") % 3 != 1))
                .with_columns(
                    half=sb.col("v") // 2,
                    label=sb.when(sb.col("v") < 0, "neg").otherwise(sb.col("k").upper()),
                    later=sb.col("t") + "5 minutes",
                )
            )
        return sorted(p.result.collect(out), key=lambda row: row["k"])

    expected = build("direct")
    assert [row["half"] for row in expected] == [1, None, -4]
    assert build(spark_runner) == expected
