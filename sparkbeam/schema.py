"""Schemas: named, typed columns, and the conversion of rows to columns and back.

A column's type is one of the Python types in `COLUMN_TYPES`. A `datetime`
column is held inside the runners as integer microseconds since the epoch (see
`sparkbeam.time`); rows going in are converted once at the source, rows coming
out are converted back to naive UTC `datetime`s.

A `list` column (what `CollectSet` gives) has a type made by `list_of(element)`,
a subclass of `list` named like `list[int]`; its values are plain lists of the
element type's values (internal ones inside the runners).
"""

from __future__ import annotations

import datetime as _dt
import operator
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final

from sparkbeam.errors import DataError, PipelineError
from sparkbeam.time import EPOCH, ONE_MICROSECOND, from_micros, to_micros

Row = dict[str, Any]
Columns = dict[str, list[Any]]

COLUMN_TYPES: Final[tuple[type, ...]] = (_dt.datetime, int, float, str, bool, bytes, object)
_TYPE_NAMES: Final = {
    "timestamp": _dt.datetime,
    "datetime": _dt.datetime,
    "int": int,
    "long": int,
    "bigint": int,
    "float": float,
    "double": float,
    "str": str,
    "string": str,
    "bool": bool,
    "boolean": bool,
    "bytes": bytes,
    "binary": bytes,
    "any": object,
    "object": object,
}


def type_name(column_type: type) -> str:
    """The short name of a column type, for messages."""
    return "datetime" if column_type is _dt.datetime else column_type.__name__


class ListColumn(list[Any]):
    """The base of list column types: `list_of(element)` is a subclass with its `element`."""

    element: ClassVar[type] = object


_LIST_TYPES: Final[dict[type, type[ListColumn]]] = {}
for _element in (_dt.datetime, int, float, str, bool, bytes):
    _name = f"list[{type_name(_element)}]"
    _qualname = f"ListOf{type_name(_element).capitalize()}"
    _LIST_TYPES[_element] = type(
        _name,
        (ListColumn,),
        {"element": _element, "__module__": __name__, "__qualname__": _qualname},
    )
    globals()[_qualname] = _LIST_TYPES[_element]  # found by name: pickled by reference


def list_of(element: type) -> type:
    """The type of a column of lists of `element` values (`datetime`, `int`, ...)."""
    if element not in _LIST_TYPES:
        raise PipelineError(f"a list column holds {type_name(element)} values, which no list can")
    return _LIST_TYPES[element]


def list_element(column_type: type) -> type | None:
    """The element type of a list column type; None for any other type."""
    if isinstance(column_type, type) and issubclass(column_type, ListColumn):
        return column_type.element
    return None


def _column_type(value: object, column: str, where: str = "schema") -> type:
    if isinstance(value, str) and value.lower() in _TYPE_NAMES:
        return _TYPE_NAMES[value.lower()]
    if isinstance(value, type) and (value in COLUMN_TYPES or list_element(value) is not None):
        return value
    names = ", ".join(type_name(t) for t in COLUMN_TYPES)
    raise PipelineError(
        f"{where}: column {column!r} has type "
        f"{value.__name__ if isinstance(value, type) else repr(value)}, "
        f"which is no column type; use one of {names} (object for any other Python value)"
    )


@dataclass(frozen=True)
class Schema:
    """Ordered column names with their types."""

    fields: tuple[tuple[str, type], ...]

    @classmethod
    def of(
        cls,
        spec: Schema | Mapping[str, object] | Sequence[tuple[str, object]],
        where: str = "schema",
    ) -> Schema:
        """A schema from a mapping (or pairs) of column name to type; `PipelineError` naming
        `where` (the transform given it) for a type that is no column type."""
        if isinstance(spec, Schema):
            return spec
        pairs = spec.items() if isinstance(spec, Mapping) else spec
        fields = tuple((str(name), _column_type(kind, str(name), where)) for name, kind in pairs)
        return cls(fields)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.fields)

    def __contains__(self, name: object) -> bool:
        return any(name == field for field, _ in self.fields)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.fields)

    def type_of(self, name: str) -> type:
        for field, kind in self.fields:
            if field == name:
                return kind
        raise KeyError(name)

    def is_time(self, name: str) -> bool:
        """A column an event time can live in: `datetime` or integer."""
        return self.type_of(name) in (_dt.datetime, int)

    def with_columns(self, *pairs: tuple[str, type]) -> Schema:
        return Schema(self.fields + tuple(pairs))

    def select(self, names: Iterable[str]) -> Schema:
        return Schema(tuple((name, self.type_of(name)) for name in names))

    def describe(self) -> str:
        return ", ".join(f"{name}: {type_name(kind)}" for name, kind in self.fields)

    def require(
        self,
        column: str,
        where: str,
        holder: str = "the input",
        advice: str = "add the column with Select or Map before this transform",
    ) -> None:
        """Raise `PipelineError` naming `where` when `column` is not in the schema, which is
        `holder`'s (`"the input"`, `"the right input"`, `"the output schema"`)."""
        if column not in self:
            raise PipelineError(
                f"{where}: unknown column {column!r}; {holder} has columns {list(self.names)}: "
                f"use one of those, or {advice}"
            )


def _value_type(value: object) -> type | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return bool
    if isinstance(value, _dt.datetime):
        return _dt.datetime
    for kind in (int, float, str, bytes):
        if isinstance(value, kind):
            return kind
    return object


def infer_schema(rows: Iterable[Mapping[str, Any]], where: str) -> Schema:
    """Columns in order of first appearance, typed by their non-None values.

    Integers and floats in one column make a float column; other mixtures, or
    a column that holds only `None`, are refused: give `schema=` explicitly.
    """
    kinds: dict[str, type | None] = {}
    for row in rows:
        if not isinstance(row, Mapping):
            raise DataError(f"{where}: rows must be dicts of column to value, got {row!r}", row)
        for name, value in row.items():
            seen, kind = kinds.get(name), _value_type(value)
            if kind is None or seen == kind:
                kinds.setdefault(name, seen)
            elif seen is None:
                kinds[name] = kind
            elif {seen, kind} == {int, float}:
                kinds[name] = float
            else:
                raise PipelineError(
                    f"{where}: column {name!r} holds both {type_name(seen)} and "
                    f"{type_name(kind)} values (for example {value!r}); make them one type "
                    "or give schema= explicitly"
                )
    if not kinds:
        raise PipelineError(f"{where}: no rows to infer a schema from; give schema= explicitly")
    untyped = [name for name, kind in kinds.items() if kind is None]
    if untyped:
        raise PipelineError(
            f"{where}: column(s) {untyped} hold only None, so their type is unknown; "
            "give schema= explicitly"
        )
    return Schema(tuple((name, kind) for name, kind in kinds.items() if kind is not None))


def _check(kind: type) -> Callable[[object], bool]:
    if kind is object:
        return lambda value: True
    if kind is int:
        return lambda value: isinstance(value, int) and not isinstance(value, bool)
    if kind is float:
        return lambda value: isinstance(value, (int, float)) and not isinstance(value, bool)
    element = list_element(kind)
    if element is not None:
        check = _check(element)
        return lambda value: (
            isinstance(value, list) and all(item is None or check(item) for item in value)
        )
    return lambda value: isinstance(value, kind)


_EXACT_TYPES: Final[dict[type, frozenset[type]]] = {
    _dt.datetime: frozenset({_dt.datetime, type(None)}),
    int: frozenset({int, type(None)}),
    float: frozenset({float, int, type(None)}),
    str: frozenset({str, type(None)}),
    bool: frozenset({bool, type(None)}),
    bytes: frozenset({bytes, type(None)}),
}


def rows_to_columns(rows: Sequence[Mapping[str, Any]], schema: Schema, where: str) -> Columns:
    """Columns of internal values for `rows`, checked against `schema`.

    Raises `DataError` naming `where`, the column and the row for a missing or
    unknown column or a value of the wrong type. `None` is allowed anywhere.
    The common case (plain dicts, values of exactly the column's type) takes a
    fast path of whole-column checks.
    """
    names = schema.names
    # Plain dicts of as many keys as columns, where every column is found (below), have
    # exactly the schema's keys: the rows are looked at one by one only otherwise.
    plain = set(map(type, rows)) <= {dict} and set(map(len, rows)) <= {len(names)}
    if not plain:
        _check_shapes(rows, names, where)
    columns: Columns = {}
    for name, kind in schema.fields:
        try:
            values = list(map(operator.itemgetter(name), rows))
        except KeyError:
            _check_shapes(rows, names, where)
            raise
        exact = _EXACT_TYPES.get(kind)
        if exact is None or not exact.issuperset(map(type, values)):
            _check_values(values, rows, name, kind, where)
        if kind is _dt.datetime:
            values = _datetimes_to_micros(values)
        elif list_element(kind) is _dt.datetime:
            values = [None if v is None else _datetimes_to_micros(v) for v in values]
        elif kind is int:
            _check_int64(values, rows, name, where)
        elif kind is str:
            _check_utf8(values, rows, name, where)
        elif kind is float:
            values = [None if value is None else float(value) for value in values]
        columns[name] = values
    return columns


def _check_shapes(rows: Sequence[Mapping[str, Any]], names: tuple[str, ...], where: str) -> None:
    """`DataError` for the first row that is not a mapping of exactly the columns `names`."""
    expected = set(names)
    for row in rows:
        if not isinstance(row, Mapping) or row.keys() != expected:
            _raise_shape_error(row, names, where)


def _check_values(
    values: list[Any], rows: Sequence[Mapping[str, Any]], name: str, kind: type, where: str
) -> None:
    check = _check(kind)
    for index, value in enumerate(values):
        if value is not None and not check(value):
            raise DataError(
                f"{where}: column {name!r} is {type_name(kind)} but row {rows[index]!r} "
                f"has {value!r} ({type(value).__name__}); convert the value or fix the schema",
                rows[index],
            )


def _check_utf8(
    values: list[Any], rows: Sequence[Mapping[str, Any]], name: str, where: str
) -> None:
    """`DataError` for a string that is not Unicode text (a lone surrogate): Arrow, parquet
    and Spark hold strings as UTF-8, which cannot encode it (one check for the column)."""
    present = [value for value in values if value is not None] if None in values else values
    try:
        "".join(present).encode("utf-8")
        return
    except UnicodeEncodeError:
        pass
    for index, value in enumerate(values):
        try:
            value is None or value.encode("utf-8")
        except UnicodeEncodeError:
            raise DataError(
                f"{where}: column {name!r} holds {value!r}, which is not Unicode text (a lone "
                f"surrogate), in row {rows[index]!r}; both runners hold strings as UTF-8 (as "
                "Arrow, parquet and Spark do): fix the value (bytes.decode(errors='replace') "
                "never makes one)",
                rows[index],
            ) from None


INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1


def _check_int64(
    values: list[Any], rows: Sequence[Mapping[str, Any]], name: str, where: str
) -> None:
    """`DataError` for a value outside 64 bits (Spark's `long`)."""
    present = [value for value in values if value is not None] if None in values else values
    if not present or (min(present) >= INT64_MIN and max(present) <= INT64_MAX):
        return
    for index, value in enumerate(values):
        if value is not None and not INT64_MIN <= value <= INT64_MAX:
            raise DataError(int64_message(where, name, value, rows[index]), rows[index])


def int64_message(where: str, name: str, value: int, row: object) -> str:
    return (
        f"{where}: column {name!r} holds {value} in row {row!r}, outside the 64-bit "
        f"integers ({INT64_MIN} to {INT64_MAX}) both runners hold; use a float or str "
        "column for larger numbers"
    )


NAN: Final = float("nan")
"""The one NaN grouping operators key by: `hash(nan)` is by identity and `nan != nan`,
so a dict finds a NaN key only as this very object."""


def one_nan(values: list[Any]) -> list[Any]:
    """`values` with every NaN replaced by `NAN` (NaN equals NaN for
    grouping and joining, as in Spark); the same list when it holds no NaN."""
    if all(value == value for value in values):
        return values
    return [NAN if value != value else value for value in values]


def one_nan_in(columns: Columns, names: Sequence[str]) -> Columns:
    """`columns` with `one_nan` applied to the named (float key) columns."""
    if not names:
        return columns
    return {**columns, **{name: one_nan(columns[name]) for name in names}}


def _datetimes_to_micros(values: list[Any]) -> list[Any]:
    try:  # naive values (UTC): one subtraction each
        return [None if v is None else (v - EPOCH) // ONE_MICROSECOND for v in values]
    except TypeError:  # aware values among them
        return [None if v is None else to_micros(v) for v in values]


def _raise_shape_error(row: object, names: tuple[str, ...], where: str) -> None:
    if not isinstance(row, Mapping):
        raise DataError(f"{where}: rows must be dicts of column to value, got {row!r}", row)
    missing = [name for name in names if name not in row]
    if missing:
        raise DataError(
            f"{where}: row {dict(row)!r} is missing column(s) {missing}; every row needs "
            f"{list(names)} (use None for an unknown value)",
            row,
        )
    extra = [name for name in row if name not in names]
    raise DataError(
        f"{where}: row {dict(row)!r} has column(s) {extra} that are not in the schema "
        f"{list(names)}; drop them or add them to schema=",
        row,
    )


def to_external(kind: type) -> Callable[[list[Any]], list[Any]] | None:
    """The conversion of a column's internal values to Python values, if any."""
    if kind is _dt.datetime:
        return lambda values: [None if v is None else from_micros(v) for v in values]
    if list_element(kind) is _dt.datetime:
        return lambda values: [
            None if v is None else [None if x is None else from_micros(x) for x in v]
            for v in values
        ]
    return None


def to_internal_value(value: Any, kind: type, where: str) -> Any:
    """One Python value as held in a column of type `kind`; `DataError` if it is not one."""
    if value is None:
        return None
    if not _check(kind)(value):
        raise DataError(
            f"{where}: {value!r} ({type(value).__name__}) is not a {type_name(kind)}; "
            "return a value of the declared type",
            value,
        )
    if kind is _dt.datetime:
        return to_micros(value)
    if list_element(kind) is _dt.datetime:
        return [None if item is None else to_micros(item) for item in value]
    if kind is int and not INT64_MIN <= value <= INT64_MAX:
        raise DataError(
            f"{where}: {value} is outside the 64-bit integers ({INT64_MIN} to {INT64_MAX}) "
            "both runners hold; return a float or str for larger numbers",
            value,
        )
    return float(value) if kind is float else value


def columns_to_rows(columns: Mapping[str, list[Any]], schema: Schema) -> list[Row]:
    """Rows of Python values (naive UTC datetimes) for internal columns."""
    converted = []
    for name, kind in schema.fields:
        convert = to_external(kind)
        values = columns[name]
        converted.append(convert(values) if convert else values)
    names = schema.names
    return [dict(zip(names, values, strict=True)) for values in zip(*converted, strict=True)]
