"""The graph as PySpark DataFrames: one small function per node type.

`TRANSLATORS` maps a transform's type to the function that builds its
DataFrame from its inputs' DataFrames. A node type without an entry is
refused with a clear error when the pipeline is translated.

Event times stay Spark `TIMESTAMP`s (or `LONG`s for integer time columns);
window arithmetic is done on integer microseconds (`unix_micros`), exactly as
the direct runner does it, so negative times and offsets agree.

This module translates bounded input, where Spark runs a batch job and the
end of input flushes everything: watermarks decide only when rows would be
emitted, never which (postponing or removing a watermark keeps a stream
valid), so a batch plan needs none of them.

Bounded input is one epoch, so no row is judged after a watermark: late rows
are none (`late_rows()` is an empty DataFrame), and `Union`/`Join`
`policy`, `WithWatermark` `idle_after` (no input is idle for an epoch) and
`max_drift` (no later epoch to hold back) change nothing: they are accepted,
and the rows are those the direct runner gives.
"""

from __future__ import annotations

import contextlib
import csv
import datetime as _dt
import functools
import io
from collections.abc import Callable, Iterator, Sequence

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkbeam.arrow import to_arrow
from sparkbeam.errors import DataError, PipelineError
from sparkbeam.graph import Node
from sparkbeam.paths import Paths
from sparkbeam.runners.spark import limits, update_panes
from sparkbeam.runners.spark.arrow import (
    exact_microseconds,
    nanosecond_columns,
    read_schema,
    require_spark_types,
    spark_schema,
)
from sparkbeam.runners.spark.engine_errors import spark_errors
from sparkbeam.runners.spark.expressions import Compiler
from sparkbeam.runners.spark.paths import paths_of
from sparkbeam.runners.spark.plan.phases import TRANSLATED, refuse_untranslated
from sparkbeam.runners.spark.python_functions import (
    combine_groups,
    fail_when,
    filter_batches,
    flat_map_batches,
    map_batches,
)
from sparkbeam.schema import Schema, rows_to_columns
from sparkbeam.transforms.combine import (
    AggregateFn,
    All,
    CollectSet,
    CombinePerKey,
    Count,
    CountDistinct,
    Finals,
    Max,
    Mean,
    Min,
    MinBy,
    Sum,
    ValueBy,
)
from sparkbeam.transforms.combine import Any as AnyOf
from sparkbeam.transforms.connectors import KNOWN_SCHEMAS, ForEachBatch, ReadFromSpark
from sparkbeam.transforms.elementwise import Filter, Map, Select
from sparkbeam.transforms.expressions import Expr
from sparkbeam.transforms.files import ReadFiles, WriteFiles, data_files
from sparkbeam.transforms.flat import FlatMap
from sparkbeam.transforms.join import Join
from sparkbeam.transforms.late import INVALID, DroppedRows
from sparkbeam.transforms.sort import Sort
from sparkbeam.transforms.sources import Create
from sparkbeam.transforms.union import Union
from sparkbeam.transforms.watermark import WithWatermark
from sparkbeam.transforms.windows import (
    WINDOW_END,
    WINDOW_START,
    Hop,
    Session,
    Tumble,
    bounds_of,
)

Translator = Callable[["Translation", Node, Sequence[DataFrame]], DataFrame]
TRANSLATORS: dict[type, Translator] = {}


def translates(kind: type) -> Callable[[Translator], Translator]:
    def register(function: Translator) -> Translator:
        TRANSLATORS[kind] = function
        return function

    return register


class Translation:
    """The DataFrame of every node of a pipeline, built in graph order."""

    def __init__(self, spark: SparkSession, nodes: Sequence[Node]) -> None:
        self.spark = spark
        self.nodes = nodes
        self.frames: dict[int, DataFrame] = {}
        self.invalid: dict[int, DataFrame] = {}
        """For each `WithWatermark`: its input rows whose event time is `None`."""
        self.writes: list[tuple[Node, DataFrame]] = []
        """The sinks (`WriteFiles`, `ForEachBatch`), written when the pipeline runs."""

    def window_bounds(self, kind: type) -> tuple[int, int, str]:
        """The least and greatest window bound a time column of type `kind` holds here, and
        the words of the `DataError` for a window beyond them (`bounds_of`)."""
        return bounds_of(kind)

    def run(self) -> None:
        for node in self.nodes:
            refuse_untranslated([node], TRANSLATED, "bounded")  # the plan's
            translate = TRANSLATORS[type(node.transform)]
            require_spark_types(node.info.schema, node.label, node.transform)
            inputs = [self.frames[i] for i in node.inputs]
            with translating(node):
                self.frames[node.id] = translate(self, node, inputs)


@contextlib.contextmanager
def translating(node: Node) -> Iterator[None]:
    """Translating `node`: an exception that is not sparkbeam's (a file's footer pyarrow
    cannot read, a function Spark cannot pickle, Spark's analysis) as a `PipelineError`
    naming it (`engine_errors.spark_errors`, with `node` as the target)."""
    with spark_errors((node,), node):
        yield


def _long(value: int) -> Column:
    return F.lit(value).cast("long")


def units(column: Column, kind: type) -> Column:
    """A time column as integers: microseconds for timestamps."""
    return F.unix_micros(column) if kind is _dt.datetime else column


def from_units(value: Column, kind: type) -> Column:
    return F.timestamp_micros(value) if kind is _dt.datetime else value


def _input_schema(translation: Translation, node: Node, port: int = 0) -> Schema:
    return translation.nodes[node.inputs[port]].info.schema


@translates(Create)
def create(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> DataFrame:
    assert isinstance(node.transform, Create)
    schema = node.info.schema
    columns = rows_to_columns(node.transform.rows, schema, node.label)
    table = to_arrow(columns, schema, node.label)
    return translation.spark.createDataFrame(table, schema=spark_schema(schema, node.label))


TIMESTAMP_TEXT = "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX"
"""How json and csv files hold timestamps: ISO 8601 with microseconds and an offset (in
UTC, `Z`)."""


PARQUET_WRITE_OPTIONS = {
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.sql.parquet.writeLegacyFormat": "false",
    "spark.sql.parquet.datetimeRebaseModeInWrite": "CORRECTED",
}
"""Session settings of Spark's parquet writer, given as options of each write (where they
override the session's): timestamps as INT64 microseconds in UTC (`timestamp[us, tz=UTC]`,
as the direct runner writes them; Spark's default is INT96), lists in the standard layout,
times before 1900 as they are (proleptic Gregorian, as pyarrow writes them)."""


def file_options(format: str, *, write: bool) -> dict[str, str]:
    """Spark reader/writer options that match `transforms.files` (and the direct runner's
    files: `runners.direct.text`): times in UTC whatever the session's time zone, a CSV
    string's spaces at either end kept (Spark's writer trims them by default), parquet
    timestamps in microseconds (`PARQUET_WRITE_OPTIONS`)."""
    options: dict[str, str] = {}
    if format in ("json", "csv"):
        options.update(mode="FAILFAST", timeZone="UTC")
        if write:
            options["timestampFormat"] = TIMESTAMP_TEXT
    if format == "json" and write:
        options["ignoreNullFields"] = "true"
    if format == "parquet" and write:
        options.update(PARQUET_WRITE_OPTIONS)
    if format == "csv":
        options.update(header="true", quote='"', escape='"')
        if write:
            options.update(ignoreLeadingWhiteSpace="false", ignoreTrailingWhiteSpace="false")
        else:
            options["multiLine"] = "true"
    if write:
        options.pop("mode", None)
    return options


def nullable(frame: DataFrame) -> DataFrame:
    """`frame` with every column, and every list's elements, nullable, as a `WriteFiles` writes
    them on both runners (parquet's optional): Spark writes a column it knows holds no None
    (a count, a window's start) as required. The always-true condition on the partition id
    is one Spark's optimizer cannot fold away (it folds any that it can prove, and with it
    the nullability); an empty list of nullable elements is appended to each list."""
    always = F.spark_partition_id() >= 0
    columns = []
    for field in frame.schema.fields:
        column, kind = F.col(f"`{field.name.replace('`', '``')}`"), field.dataType
        if isinstance(kind, T.ArrayType) and not kind.containsNull:
            column = F.concat(column, F.array().cast(T.ArrayType(kind.elementType, True)))
        elif field.nullable:
            columns.append(column)
            continue
        columns.append(F.when(always, column).alias(field.name))
    return frame.select(*columns)


@translates(ReadFiles)
def read_files(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> DataFrame:
    transform = node.transform
    assert isinstance(transform, ReadFiles)
    schema = node.info.schema
    paths = paths_of(translation.spark)
    files = data_files(transform.path, node.label, paths)  # PipelineError if it went away
    options = file_options(transform.format, write=False)
    if transform.format != "parquet":
        file_schema = files_schema(transform.format, files, schema, node.label, paths)
        reader = translation.spark.read.format(transform.format).options(**options)
        frame = reader.schema(spark_schema(file_schema, node.label)).load(transform.path)
        return frame.select(*schema.names)
    by_file = nanosecond_columns(files, schema, node.label, paths, transform.schema_origin)
    groups: dict[frozenset[str], list[str]] = {}
    for file in files:
        groups.setdefault(by_file.get(file, frozenset()), []).append(file)
    frames = []
    for nanos, grouped in groups.items() or [(frozenset(), [])]:
        reader = translation.spark.read.format("parquet").options(**options)
        reader = reader.schema(read_schema(schema, nanos, node.label))
        loaded = reader.load(transform.path) if len(groups) <= 1 else reader.load(grouped)
        frames.append(exact_microseconds(loaded, nanos, grouped, node.label).select(*schema.names))
    return functools.reduce(DataFrame.unionByName, frames)


def files_schema(
    format: str, files: Sequence[str], schema: Schema, label: str, paths: Paths
) -> Schema:
    """The schema Spark reads the files with: for CSV, whose columns Spark matches by
    position, the first file's header order (every column by name)."""
    if format != "csv" or not files:
        return schema
    with io.TextIOWrapper(paths.open_input(files[0]), encoding="utf-8", newline="") as handle:
        header = next(csv.reader(handle), [])
    missing = [name for name in schema.names if name not in header]
    if missing:
        raise DataError(
            f"{label}: {files[0]!r} has no column(s) {missing} in its header row "
            f"{header}; fix schema= or the files"
        )
    return Schema(tuple((name, schema.type_of(name) if name in schema else str) for name in header))


def _timed(translation: Translation, node: Node, column: str) -> bool:
    """Whether `column` of `node`'s input is never None: its input is a `WithWatermark` on it,
    which drops (and counts) the rows without it."""
    source = translation.nodes[node.inputs[0]].transform
    return isinstance(source, WithWatermark) and source.column == column


def _require_time(frame: DataFrame, column: str, label: str, schema: Schema) -> DataFrame:
    """Fail the job with a `DataError` naming the row if `column` is None (as the direct runner)."""
    message = (
        f"a row has no {column!r} (None), so it has no place in time; drop such rows first "
        f"(.with_watermark({column!r}, ...) drops and counts them, or use a Filter)"
    )
    checked = fail_when(F.col(column).isNull(), F.col(column), label, schema, message)
    return frame.withColumn(column, checked)


def _window_in_range(
    start: Column,
    last: Column,
    size: Column,
    bounds: tuple[int, int, str],
    label: str,
    schema: Schema,
    windows: Column | None = None,
) -> Column:
    """`start`, failing the job with a `DataError` naming the row when one of its windows,
    starting from `start` to `last` (null: their computation left 64 bits), has a bound
    outside `bounds` (`Translation.window_bounds`: years 1 to 9999 for datetimes, 64 bits
    for integers, as the direct runner). `windows`: whether the row has any (a `Hop` whose
    slide exceeds its size leaves gaps)."""
    low, high, words = bounds
    end = F.try_add(last, size)
    outside = start.isNull() | end.isNull() | (start < _long(low)) | (end > _long(high))
    if windows is not None:
        outside = windows & outside
    return fail_when(outside, start, label, schema, words)


def session_in_range(
    frame: DataFrame,
    column: str,
    gap: int,
    bounds: tuple[int, int, str],
    label: str,
    schema: Schema,
) -> DataFrame:
    """`frame`, failing the job with a `DataError` naming the row when a session ending at
    its time plus `gap` would end beyond `bounds` (`Translation.window_bounds`; a session's
    end is its last row's time plus the gap, its start a row's time; as the direct runner)."""
    kind = schema.type_of(column)
    _, high, words = bounds
    outside = units(F.col(column), kind) > _long(high - gap)
    return frame.withColumn(column, fail_when(outside, F.col(column), label, schema, words))


@translates(WriteFiles)
@translates(ForEachBatch)
def sink(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> DataFrame:
    """`WriteFiles` and `ForEachBatch`: written (or called) when the pipeline runs."""
    translation.writes.append((node, inputs[0]))
    return inputs[0]


@translates(ReadFromSpark)
def read_from_spark(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> DataFrame:
    transform = node.transform
    assert isinstance(transform, ReadFromSpark)
    spark = translation.spark
    reader = (spark.read if transform.bounded else spark.readStream).format(transform.format)
    if transform.schema is not None and transform.format not in KNOWN_SCHEMAS:
        # File formats read a stream only with a schema; connectors with a fixed one refuse it.
        reader = reader.schema(spark_schema(transform.schema, node.label))
    try:
        loaded = reader.options(**dict(transform.options)).load()
    except Exception as exc:  # the connector refused its options, or is not on the classpath
        raise PipelineError(
            f"{node.label}: Spark could not open the {transform.format!r} source with options "
            f"{dict(transform.options)}; check the options, and that the connector's package is "
            f"on Spark's classpath (spark.jars.packages). Spark: {str(exc).strip()[:400]}"
        ) from None
    return connector_frame(loaded, node)


def connector_frame(loaded: DataFrame, node: Node) -> DataFrame:
    """The schema's columns of a connector's DataFrame, cast to the schema's types."""
    schema = node.info.schema
    present = set(loaded.columns)
    missing = [name for name in schema.names if name not in present]
    if missing:
        raise PipelineError(
            f"{node.label}: the source has no column(s) {missing} (it has {loaded.columns}); "
            "fix schema="
        )
    types = spark_schema(schema, node.label)
    return loaded.select(*(F.col(f.name).cast(f.dataType).alias(f.name) for f in types.fields))


@translates(WithWatermark)
def with_watermark(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> DataFrame:
    transform = node.transform
    assert isinstance(transform, WithWatermark)
    if transform.raises_watermark_per_row():
        raise limits.EMIT_EVENT.error(node.label, emit=transform.emit)
    (frame,) = inputs
    time = F.col(transform.column)
    translation.invalid[node.id] = frame.filter(time.isNull())
    return frame.filter(time.isNotNull())


@translates(DroppedRows)
def dropped_rows(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> DataFrame:
    """Late rows: none in a batch job (one epoch: every row is judged before any watermark,
    at a `WithWatermark`, `Union` or `Join` alike). Invalid rows: the `WithWatermark`'s
    input rows with no event time."""
    transform = node.transform
    assert isinstance(transform, DroppedRows)
    if transform.kind == INVALID:
        return translation.invalid[node.inputs[0]]
    schema = spark_schema(node.info.schema, node.label)
    return translation.spark.createDataFrame([], schema=schema)


@translates(Map)
def map_rows(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> DataFrame:
    transform = node.transform
    assert isinstance(transform, Map)
    in_schema, out_schema = _input_schema(translation, node), node.info.schema
    function = map_batches(transform.fn, in_schema, out_schema, node.label, transform.keeps)
    return inputs[0].mapInArrow(function, spark_schema(out_schema, node.label))


@translates(FlatMap)
def flat_map_rows(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> DataFrame:
    transform = node.transform
    assert isinstance(transform, FlatMap)
    in_schema, out_schema = _input_schema(translation, node), node.info.schema
    function = flat_map_batches(transform.fn, in_schema, out_schema, node.label, transform.keeps)
    return inputs[0].mapInArrow(function, spark_schema(out_schema, node.label))


@translates(Filter)
def filter_rows(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> DataFrame:
    """An expression is a native `filter` (a `None` result drops the row, as the direct
    runner); a Python function runs in Spark's Python workers through Arrow."""
    transform = node.transform
    assert isinstance(transform, Filter)
    schema = node.info.schema
    bound = transform.bind(schema, node.label)
    if bound is not None:
        return inputs[0].filter(Compiler(schema, node.label).column(bound))
    assert not isinstance(transform.predicate, Expr)
    function = filter_batches(transform.predicate, schema, node.label)
    return inputs[0].mapInArrow(function, spark_schema(schema, node.label))


@translates(Select)
def select(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> DataFrame:
    """Every expression is a native Column (`runners.spark.expressions`)."""
    transform = node.transform
    assert isinstance(transform, Select)
    schema = _input_schema(translation, node)
    compiler = Compiler(schema, node.label)
    columns = [
        compiler.column(bound).alias(name) for name, bound in transform.bind(schema, node.label)
    ]
    return inputs[0].select(*columns)


WINDOW_START_UNITS = "__sparkbeam_window_start"
"""A `Tumble`'s window start in its column's units, before it is named (`tumble`)."""


@translates(Tumble)
def tumble(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> DataFrame:
    transform = node.transform
    assert isinstance(transform, Tumble)
    schema = _input_schema(translation, node)
    kind = schema.type_of(transform.column)
    spec = transform.spec(schema, node.label)
    t = units(F.col(transform.column), kind)
    size = _long(spec.size)
    start = F.try_subtract(t, _below_window_start(t, spec.offset, size))
    bounds = translation.window_bounds(kind)
    start = _window_in_range(start, start, size, bounds, node.label, schema)
    frame = inputs[0]
    if not _timed(translation, node, transform.column):
        frame = _require_time(frame, transform.column, node.label, schema)
    # the start once (its checks too), then both bounds from it
    started = frame.select("*", start.alias(WINDOW_START_UNITS))
    bound = F.col(WINDOW_START_UNITS)
    return started.select(
        "*",
        from_units(bound, kind).alias(WINDOW_START),
        from_units(bound + size, kind).alias(WINDOW_END),
    ).drop(WINDOW_START_UNITS)


def _below_window_start(t: Column, offset: int, slide: Column) -> Column:
    """How far `t` lies past the latest window start at or before it (`offset + k * slide`,
    `0 <= offset < slide`): `pmod(t - offset, slide)`, without computing `t - offset`, which
    can leave 64 bits."""
    return F.pmod(F.pmod(t, slide) - _long(offset), slide)


@translates(Hop)
def hop(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> DataFrame:
    transform = node.transform
    assert isinstance(transform, Hop)
    schema = _input_schema(translation, node)
    kind = schema.type_of(transform.column)
    spec = transform.spec(schema, node.label)
    size, slide = _long(spec.size), _long(spec.slide)
    t = units(F.col(transform.column), kind)
    below = _below_window_start(t, spec.offset, slide)
    last = F.try_subtract(t, below)
    # the windows holding t start at last, last - slide, ..., down to the first after t - size
    reach = size - _long(1) - below
    first = F.try_subtract(last, F.call_function("div", reach, slide) * slide)
    bounds = translation.window_bounds(kind)
    first = _window_in_range(first, last, size, bounds, node.label, schema, reach >= 0)
    starts = F.when(reach >= 0, F.sequence(first, last, slide)).otherwise(
        F.array().cast("array<bigint>")
    )
    start = F.explode(starts).alias("__sparkbeam_start")
    frame = inputs[0]
    if not _timed(translation, node, transform.column):
        frame = _require_time(frame, transform.column, node.label, schema)
    exploded = frame.select("*", start)
    begin = F.col("__sparkbeam_start")
    return exploded.select(
        *[F.col(name) for name in schema.names],
        from_units(begin, kind).alias(WINDOW_START),
        from_units(begin + size, kind).alias(WINDOW_END),
    )


def _aggregate(aggregate: AggregateFn, streaming: bool = False) -> Column:
    """A built-in aggregate as Spark's native one (also in streaming, where Spark refuses
    Python aggregates and distinct aggregates: `CountDistinct` is the size of the set)."""
    if isinstance(aggregate, Count):
        return F.count(F.lit(1)) if aggregate.column is None else F.count(aggregate.column)
    if isinstance(aggregate, ValueBy):
        return _value_by(aggregate)
    if isinstance(aggregate, CountDistinct) and streaming:
        return F.size(F.collect_set(aggregate.column))
    functions: dict[type, Callable[[str], Column]] = {
        Sum: F.sum,
        Mean: F.avg,
        Min: F.min,
        Max: F.max,
        CountDistinct: F.count_distinct,
        CollectSet: lambda column: F.array_sort(F.collect_set(column)),
        AnyOf: F.bool_or,
        All: F.bool_and,
    }
    assert aggregate.column is not None
    return functions[type(aggregate)](aggregate.column)


def _value_by(aggregate: ValueBy) -> Column:
    """`MinBy`/`MaxBy` as the min/max of `struct(by, value)` over the rows with a `by`:
    structs compare field by field, None least (Spark's `min_by` picks any of the rows
    that tie on `by`; this picks by `value`, as the model does)."""
    by = F.col(aggregate.by)
    pair = F.when(by.isNotNull(), F.struct(by.alias("by"), F.col(aggregate.value).alias("value")))
    best = F.min(pair) if isinstance(aggregate, MinBy) else F.max(pair)
    return best.getField("value")


@translates(CombinePerKey)
def combine_or_update(
    translation: Translation, node: Node, inputs: Sequence[DataFrame]
) -> DataFrame:
    """Each group's aggregate; with `emit="update"`, its pane rows (`update_panes`)."""
    aggregated = combine_per_key(translation, node, inputs)
    if not isinstance(node.transform, CombinePerKey) or not node.transform.updates:
        return aggregated
    return update_panes.pane_rows(translation.nodes, translation.frames, node, aggregated)


TRANSLATORS[Finals] = lambda translation, node, inputs: update_panes.finals(inputs[0])


def combine_per_key(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> DataFrame:
    transform = node.transform
    assert isinstance(transform, CombinePerKey)
    (frame,) = inputs
    keys = list(transform.keys)
    out_schema = update_panes.aggregated_schema(node)
    if not all(isinstance(a, AggregateFn) for _, a in transform.aggregates):
        function = combine_groups(
            transform.keys,
            transform.aggregates,
            _input_schema(translation, node),
            out_schema,
            node.label,
        )
        return frame.groupBy(*keys).applyInArrow(function, spark_schema(out_schema, node.label))
    aggregates = [_aggregate(a).alias(name) for name, a in transform.aggregates]
    if keys:
        return frame.groupBy(*keys).agg(*aggregates)
    # A global aggregate over no rows is one row in SQL but no group in the model.
    counted = frame.agg(*aggregates, F.count(F.lit(1)).alias("__sparkbeam_rows"))
    return counted.filter(F.col("__sparkbeam_rows") > 0).drop("__sparkbeam_rows")


@translates(Sort)
def sort(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> DataFrame:
    transform = node.transform
    assert isinstance(transform, Sort)
    frame = _require_time(inputs[0], transform.column, node.label, node.info.schema)
    if not transform.keys:
        return frame.orderBy(transform.column)
    return frame.repartition(*transform.keys).sortWithinPartitions(transform.column)


@translates(Session)
def session(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> DataFrame:
    transform = node.transform
    assert isinstance(transform, Session)
    schema = _input_schema(translation, node)
    kind = schema.type_of(transform.column)
    gap_units = transform.gap_units(schema, node.label)
    gap = _long(gap_units)
    t = units(F.col(transform.column), kind)
    keys = list(transform.keys)
    ordered = Window.partitionBy(*keys).orderBy(t)
    # a first row (no lag), or a difference beyond 64 bits, starts a session too
    starts = F.when(F.coalesce(F.try_subtract(t, F.lag(t).over(ordered)) > gap, F.lit(True)), 1)
    starts = starts.otherwise(0)
    frame = _require_time(inputs[0], transform.column, node.label, schema)
    bounds = translation.window_bounds(kind)
    numbered = session_in_range(
        frame, transform.column, gap_units, bounds, node.label, schema
    ).select(
        "*",
        F.sum(starts)
        .over(ordered.rowsBetween(Window.unboundedPreceding, Window.currentRow))
        .alias("__sparkbeam_session"),
    )
    whole = Window.partitionBy(*keys, "__sparkbeam_session")
    return numbered.select(
        *[F.col(name) for name in schema.names],
        from_units(F.min(t).over(whole), kind).alias(WINDOW_START),
        from_units(F.max(t).over(whole) + gap, kind).alias(WINDOW_END),
    )


@translates(Union)
def union(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> DataFrame:
    return functools.reduce(DataFrame.unionByName, inputs)


@translates(Join)
def join(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> DataFrame:
    transform = node.transform
    assert isinstance(transform, Join)
    left_schema, right_schema = (_input_schema(translation, node, i) for i in (0, 1))
    left = inputs[0].select([F.col(n).alias(f"__l_{n}") for n in left_schema.names])
    right = inputs[1].select([F.col(n).alias(f"__r_{n}") for n in right_schema.names])
    condition = functools.reduce(
        lambda a, b: a & b, [F.col(f"__l_{k}") == F.col(f"__r_{k}") for k in transform.on]
    )
    bounds = transform.interval_bounds(left_schema, right_schema, node.label)
    if bounds is not None and transform.times is not None:
        kind = left_schema.type_of(transform.times[0])
        lt = units(F.col(f"__l_{transform.times[0]}"), kind)
        rt = units(F.col(f"__r_{transform.times[1]}"), kind)
        condition = condition & (lt + _long(bounds[0]) <= rt) & (rt <= lt + _long(bounds[1]))
    how = {"inner": "inner", "left": "left_outer", "right": "right_outer", "full": "full_outer"}
    joined = left.join(right, condition, how[transform.how])
    return joined.select(*join_output(transform, left_schema, right_schema, node.label))


def join_output(transform: Join, left: Schema, right: Schema, label: str) -> list[Column]:
    """The output columns of a join whose sides' columns are prefixed `__l_` and `__r_`."""
    columns = []
    for name, side, column in transform.layout(left, right, label).sources:
        if side < 0:
            value = F.coalesce(F.col(f"__l_{column}"), F.col(f"__r_{column}"))
        else:
            value = F.col(f"__{'lr'[side]}_{column}")
        columns.append(value.alias(name))
    return columns
