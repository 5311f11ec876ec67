"""Column types on Spark: `datetime` is `TIMESTAMP` (what Spark's watermarks need),
`int` is `LONG`. Rows cross into and out of Spark as Arrow (`sparkbeam.arrow`)."""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkbeam.errors import DataError
from sparkbeam.paths import Paths, is_local, normalised
from sparkbeam.runners.shared.files import finer_than_a_microsecond
from sparkbeam.runners.spark import limits
from sparkbeam.runners.spark.session.engine_errors import DATA_ERROR_MARK
from sparkbeam.schema import Schema, list_element, type_name
from sparkbeam.transforms.combine import AggregateFn, CombinePerKey
from sparkbeam.transforms.elementwise import RowFunction
from sparkbeam.transforms.files import parquet_mismatch

_SPARK_TYPES: dict[type, T.DataType] = {
    _dt.datetime: T.TimestampType(),
    int: T.LongType(),
    float: T.DoubleType(),
    str: T.StringType(),
    bool: T.BooleanType(),
    bytes: T.BinaryType(),
}


def _spark_type(kind: type) -> T.DataType | None:
    """A column type's Spark type (a list column is an array); None for `object`."""
    element = list_element(kind)
    if element is not None:
        return T.ArrayType(_SPARK_TYPES[element], containsNull=True)
    return _SPARK_TYPES.get(kind)


def require_spark_types(schema: Schema, label: str, transform: object = None) -> None:
    """Refuse columns Spark cannot hold (type `object`), saying where `transform` (the node's
    that made the column, when known) takes its type."""
    for name, kind in schema.fields:
        if _spark_type(kind) is None:
            raise limits.OBJECT_COLUMN.error(
                label, column=name, kind=type_name(kind), declaration=_declaration(transform, name)
            )


def _declaration(transform: object, column: str) -> str:
    """Where the user gives `column` of `transform` its type, as what to write."""
    if isinstance(transform, CombinePerKey):
        aggregate = dict(transform.aggregates).get(column)
        if aggregate is not None and not isinstance(aggregate, AggregateFn):
            name = type(aggregate).__name__
            return (
                f"set output_type on the CombineFn {name} (class {name}(sb.CombineFn): "
                "output_type = int)"
            )
    if isinstance(transform, RowFunction):
        return (
            f"declare it in the schema= of the {type(transform).__name__} "
            f"(schema={{..., {column!r}: str}})"
        )
    return f"declare its type where it is made (schema={{..., {column!r}: str}})"


def spark_schema(schema: Schema, label: str) -> T.StructType:
    require_spark_types(schema, label)
    fields = []
    for name, kind in schema.fields:
        spark_type = _spark_type(kind)
        assert spark_type is not None
        fields.append(T.StructField(name, spark_type, nullable=True))
    return T.StructType(fields)


def nanosecond_columns(
    files: Sequence[str], schema: Schema, label: str, paths: Paths, origin: str = "schema="
) -> dict[str, frozenset[str]]:
    """Each parquet file's columns of `schema` that hold nanosecond timestamps (64-bit
    integers: pandas' and pyarrow's default unit), which Spark reads only as the integers
    (`exact_microseconds` makes them times). Refuses unsigned 64-bit integers, which Spark's
    reader fails on deep in a task naming no column, naming the column and the file. Judged by
    the columns' parquet types (pyarrow shows Spark's own INT96 timestamps as nanoseconds too).
    A file whose columns differ from `schema` (which `origin` gave) is the direct runner's
    `DataError` (`files.parquet_mismatch`), before Spark reads it."""
    found: dict[str, frozenset[str]] = {}
    for file in files:
        with paths.open_input(file) as handle:
            try:
                columns = pq.read_metadata(handle).schema
            except (pa.ArrowException, OSError):
                continue  # the read names the file (`files.unreadable_parquet`)
        mismatch = parquet_mismatch(label, file, columns.to_arrow_schema(), schema, origin)
        if mismatch is not None:
            raise DataError(mismatch)
        nanos = set()
        for index in range(len(columns)):
            column = columns.column(index)
            if column.path not in schema or column.physical_type != "INT64":
                continue
            logical = json.loads(column.logical_type.to_json())
            if logical.get("Type") == "Timestamp" and logical.get("timeUnit") == "nanoseconds":
                nanos.add(column.path)
            elif logical.get("Type") == "Int" and logical.get("isSigned") is False:
                raise limits.PARQUET_UINT64.error(label, column=column.path, file=file)
        found[file] = frozenset(nanos)
    return found


def refuse_live_nanoseconds(
    files: Sequence[str], schema: Schema, label: str, paths: Paths, origin: str
) -> None:
    """Refuse parquet files there at the start that hold nanosecond timestamps (and those
    whose columns differ from `schema`, which `origin` gave: `nanosecond_columns`).

    Spark's file source reads a column of every file in one unit, fixed by the
    read schema when the query starts: reading nanoseconds needs a 64-bit
    integer schema, under which a later file in microseconds reads as
    nanoseconds too (times a thousand times too close to 1970, with no
    error). A batch read and a collected one look at each file's own unit."""
    for file, nanos in nanosecond_columns(files, schema, label, paths, origin).items():
        for column in sorted(nanos):
            raise limits.PARQUET_LIVE_NANOSECONDS.error(label, column=column, file=file)


def read_schema(schema: Schema, nanos: frozenset[str], label: str) -> T.StructType:
    """`schema` as Spark reads parquet files: the columns in `nanos` as the integers they hold."""
    fields = spark_schema(schema, label).fields
    return T.StructType(
        [T.StructField(f.name, T.LongType(), True) if f.name in nanos else f for f in fields]
    )


def exact_microseconds(
    frame: DataFrame, nanos: frozenset[str], files: Sequence[str], label: str
) -> DataFrame:
    """`frame` (as read from parquet files) with its columns in `nanos`, nanoseconds since the
    epoch, made times: each a whole number of microseconds, else a `DataError` naming the
    column, the file (of `files`, spelled as given, where Spark names one of them) and the time,
    as the direct runner's (`files.finer_than_a_microsecond`)."""
    if not nanos:
        return frame
    given = {normalised(file) if is_local(file) else file: repr(file) for file in files}
    spark_path = F.col("_metadata.file_path")
    local = F.url_decode(F.regexp_replace(spark_path, r"^file:(//)?", ""))
    file = F.concat(F.lit("'"), local, F.lit("'"))
    if given:
        lookup = F.create_map(*[F.lit(text) for pair in given.items() for text in pair])
        file = F.coalesce(lookup[local], lookup[spark_path], file)
    for name in sorted(nanos):
        column = "`" + name.replace("`", "``") + "`"
        below = F.expr(f"pmod({column}, 1000)")
        micros = F.expr(f"({column} - pmod({column}, 1000)) div 1000")
        time = F.concat(
            F.date_format(F.timestamp_micros(micros), "yyyy-MM-dd HH:mm:ss.SSSSSS"),
            F.lpad(below.cast("string"), 3, "0"),
        )
        head, middle, tail = finer_than_a_microsecond(label, name, "\0", "\0").split("\0")
        message = F.concat(F.lit(DATA_ERROR_MARK + head), file, F.lit(middle), time, F.lit(tail))
        exact = F.when(below != 0, F.raise_error(message)).otherwise(F.timestamp_micros(micros))
        frame = frame.withColumn(name, exact)
    return frame
