"""Files: `ReadFiles` (a source) and `WriteFiles` (a sink that passes its rows on).

- Formats: `parquet`, `json` (one object per line, as Spark writes it) and
  `csv` (with a header row; an empty field is `None`). Timestamps in json and
  csv are ISO 8601 with microseconds and an offset (`2026-04-01T10:00:00.000000Z`).
  Both runners write the same physical types and text (`WriteFiles`).
- `path` is a file or a directory; a directory's files are read in name
  order, skipping names that start with `_` or `.` (Spark's `_SUCCESS`,
  checksums), not recursing; of a directory a Spark streaming file sink
  wrote, only the files its `_spark_metadata` log committed (as Spark reads it).
- Schema: parquet files carry theirs (read from the first file's footer when
  `schema` is not given, and checked against every file when the transform is
  applied); json and csv need `schema=`.
- `WriteFiles(path, format, mode="overwrite")` writes every row it receives
  (`mode="error"` refuses an existing path) and emits them unchanged.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sparkbeam.derivation import WatermarkRule, passing
from sparkbeam.errors import DataError, PipelineError, first_line
from sparkbeam.graph import EdgeInfo, PrimitiveTransform, init_fields
from sparkbeam.paths import Paths, UnreachablePath, base_name, join, read_text
from sparkbeam.paths import current as current_paths
from sparkbeam.schema import Schema, list_element, type_name
from sparkbeam.transforms.casts import cast_refusal
from sparkbeam.transforms.validation import single_input
from sparkbeam.updates import UpdateStream

FORMATS = ("parquet", "json", "csv")
WRITE_MODES = ("overwrite", "error")


def _check_format(format: str, label: str) -> None:
    if format not in FORMATS:
        raise PipelineError(f"{label}: format={format!r}; use one of {list(FORMATS)}")


def data_files(path: str, label: str, paths: Paths | None = None) -> list[str]:
    """The files under `path` (a file, or a directory's visible files in name order), asked
    of `paths` (the applying runner's, `sparkbeam.paths.current()`, by default).

    A directory a Spark streaming file sink wrote (it has `_spark_metadata`)
    holds only the files its log committed: a micro-batch that was stopped
    or failed half-way may have left others, which Spark's readers skip too.
    """
    fs = paths or current_paths()
    try:
        found = fs.kind(path)
        if found == "file":
            return [path]
        if found is None:
            raise PipelineError(f"{label}: no file or directory at {path!r}; check the path")
        entries = fs.list(path)
        committed = committed_files(join(path, SINK_LOG), fs)
    except UnreachablePath as exc:
        raise PipelineError(f"{label}: cannot read {path!r}: {exc}") from None
    return [
        join(path, name)
        for name, is_file in entries
        if is_file and not name.startswith(("_", ".")) and (committed is None or name in committed)
    ]


SINK_LOG = "_spark_metadata"


def committed_files(log: str, paths: Paths | None = None) -> set[str] | None:
    """The names of the files a Spark file sink's log (`_spark_metadata`) holds; None if none.

    The log has one file per batch (`7`) and, every few batches, a compacted
    one holding all before it (`9.compact`); each is a version line (`v1`)
    and one JSON entry per file: `{"path": ..., "action": "add"|"delete"}`.
    """
    fs = paths or current_paths()
    if fs.kind(log) != "directory":
        return None
    batches: dict[int, str] = {}
    for name, _ in fs.list(log):
        stem = name.removesuffix(".compact")
        if stem.isdigit():
            batches[int(stem)] = name
    compacted = [b for b, name in batches.items() if name.endswith(".compact")]
    first = max(compacted, default=0)
    files: set[str] = set()
    for batch in sorted(b for b in batches if b >= first):
        for line in read_text(fs, join(log, batches[batch])).splitlines()[1:]:
            if not line.strip():
                continue
            entry = json.loads(line)
            name = base_name(urllib.parse.urlparse(entry["path"]).path)
            if entry.get("action") == "delete":
                files.discard(name)
            else:
                files.add(name)
    return files


def unreadable_parquet(path: str, label: str, exc: BaseException) -> DataError:
    """A `DataError` naming the transform and the parquet file pyarrow cannot read."""
    return DataError(
        f"{label}: {path!r} is not a parquet file that can be read ({first_line(exc)}): "
        "truncated, corrupt or still being written; remove or replace it, or read a "
        "directory that holds only finished parquet files"
    )


def parquet_footer(path: str, label: str, paths: Paths | None = None) -> Any:
    """The Arrow schema (`pyarrow.Schema`) of one parquet file's footer, read through `paths`;
    a `DataError` naming the file when it cannot be read."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:  # pragma: no cover - pyarrow comes with the spark extra
        raise PipelineError(f"{label}: reading parquet needs pyarrow: pip install pyarrow") from exc
    with (paths or current_paths()).open_input(path) as handle:
        try:
            return pq.read_schema(handle)
        except (pa.ArrowException, OSError) as exc:
            raise unreadable_parquet(path, label, exc) from exc


def column_type(arrow_type: Any) -> type | None:
    """The column type a parquet column of `arrow_type` (as pyarrow reads it) is read as;
    None for one sparkbeam does not read (decimals, dates, lists, structs, ...)."""
    import pyarrow as pa

    if pa.types.is_timestamp(arrow_type):
        return _dt.datetime
    if pa.types.is_boolean(arrow_type):
        return bool
    if pa.types.is_integer(arrow_type):
        return int
    if pa.types.is_floating(arrow_type):
        return float
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        return str
    if pa.types.is_binary(arrow_type) or pa.types.is_large_binary(arrow_type):
        return bytes
    return None


def parquet_schema(path: str, label: str, paths: Paths | None = None) -> Schema:
    """Our schema of one parquet file's footer (read through `paths`): every column of it,
    a `PipelineError` naming one that sparkbeam does not read."""
    fields: list[tuple[str, type]] = []
    for field in parquet_footer(path, label, paths):
        kind = column_type(field.type)
        if kind is None:
            raise PipelineError(
                f"{label}: column {field.name!r} of {path!r} has type {field.type}, which "
                "sparkbeam does not read; give schema= naming the other columns (a dict of "
                "column name to type), or rewrite the file with the column as one of int64, "
                "double, bool, string, binary, timestamp"
            )
        fields.append((field.name, kind))
    return Schema(tuple(fields))


def parquet_mismatch(label: str, path: str, footer: Any, schema: Schema, origin: str) -> str | None:
    """What differs between the parquet file `path` (its footer: a `pyarrow.Schema`) and
    `schema` (which `origin` gave: `"schema="`, the first file), naming the column, the
    file's type and the schema's, and what to do; None when every column of `schema` is
    in the file with its type."""
    from sparkbeam.arrow import arrow_type

    for name, kind in schema.fields:
        wanted = f"{type_name(kind)} in {origin}"
        if name not in footer.names:
            return (
                f"{label}: {path!r} has no column {name!r} ({wanted}); its columns are "
                f"{footer.names}: rewrite the file with the column, or leave {name!r} out of "
                "schema="
            )
        found_type = footer.field(name).type
        found = column_type(found_type)
        if found is kind:
            continue
        rewrite = f"rewrite the file with {name!r} as {arrow_type(kind)}"
        if found is None:
            return (
                f"{label}: column {name!r} of {path!r} is {found_type} in the file, which "
                f"sparkbeam does not read, and {wanted}; {rewrite}, or leave {name!r} out "
                "of schema="
            )
        convert = (
            f"sb.col({name!r}).cast({type_name(kind)}) in a Select"
            if cast_refusal(found, kind) is None
            else "a Map"
        )
        return (
            f"{label}: column {name!r} of {path!r} is {found_type} ({type_name(found)}) in "
            f"the file but {wanted}; make them agree: {rewrite}, or, if the file is right, "
            f"read {name!r} as {type_name(found)} (in schema=) and convert it with {convert}"
        )
    return None


@dataclass(frozen=True, init=False)
class ReadFiles(PrimitiveTransform):
    """Rows from files: `ReadFiles("data/orders", format="parquet")`.

    Bounded: all files are one epoch. With `streaming=True` the files are an
    unbounded input, one epoch per file in name order (Spark: a file source).
    Parquet as pandas writes it (`DataFrame.to_parquet`: times in nanoseconds)
    is read as it is on both runners (not by a live source on Spark, which
    refuses it); a time that is not a whole microsecond is a `DataError` naming
    the column and the file.

    Args:
        path: A file or a directory of files, a local path or a URI
            (`s3://...`, `hdfs://...`).
        format: `"parquet"`, `"json"` (JSON lines) or `"csv"` (with a header row).
        schema: Column names and types (a dict or a `Schema`). Parquet files carry
            their own (each file is checked against it); JSON and CSV need it.
        streaming: `True` for an unbounded input, one epoch per file in name order;
            on Spark, in a run with sinks, Spark's file source reading the
            directory as it grows.
    """

    path: str
    format: str
    schema: Schema | None
    streaming: bool

    def __init__(
        self,
        path: str | os.PathLike[str],
        format: str = "parquet",
        schema: Schema | Mapping[str, Any] | Sequence[tuple[str, Any]] | None = None,
        streaming: bool = False,
    ) -> None:
        schema = None if schema is None else Schema.of(schema, "ReadFiles")
        init_fields(
            self, os.fspath(path), format, None if schema is None else Schema.of(schema), streaming
        )

    def default_label(self) -> str:
        return f"ReadFiles({base_name(self.path) or self.path})"

    @property
    def schema_origin(self) -> str:
        """What gave the schema, as messages name it: `schema=`, or the files' footers."""
        if self.schema is not None:
            return "schema="
        return "the schema read from the files when ReadFiles was applied"

    def parameters(self) -> tuple[tuple[str, str], ...]:
        return (("format", self.format),) + ((("streaming", "yes"),) if self.streaming else ())

    def infer(self, inputs: Sequence[EdgeInfo], label: str) -> EdgeInfo:
        if inputs:
            raise PipelineError(f"{label}: ReadFiles is a source; apply it to the pipeline")
        _check_format(self.format, label)
        files = data_files(self.path, label)
        schema = self.schema
        if self.format == "parquet":
            if schema is None and not files:
                raise PipelineError(
                    f"{label}: {self.path!r} holds no files to read a schema from; give schema="
                )
            origin = "schema="
            if schema is None:
                schema = parquet_schema(files[0], label)
                origin = f"the schema read from {files[0]!r}"
            for file in files:
                footer = parquet_footer(file, label)
                mismatch = parquet_mismatch(label, file, footer, schema, origin)
                if mismatch is not None:
                    raise PipelineError(mismatch)
        elif schema is None:
            raise PipelineError(
                f"{label}: {self.format} files do not store their column types; give schema= "
                "(a dict of column name to type)"
            )
        else:
            binary = [name for name, kind in schema.fields if kind in (bytes, object)]
            if binary:
                raise PipelineError(
                    f"{label}: column(s) {binary} cannot be read from {self.format}; "
                    "use parquet for bytes"
                )
        assert schema is not None
        return EdgeInfo(schema, bounded=not self.streaming)


@dataclass(frozen=True, init=False)
class WriteFiles(PrimitiveTransform):
    """Write every row to files under the directory `path`; the rows pass on unchanged.

    Both runners write the same types and the same text, so their outputs
    concatenate and merge in pandas or Spark as they are:

    - Parquet: `int` as int64, `float` as double, `bool`, `str` as string,
      `bytes` as binary, `datetime` as `timestamp[us, tz=UTC]` (INT64
      microseconds marked UTC: pandas reads `datetime64[us, UTC]`), a list
      column as a list of its element's type; every column nullable.
    - JSON lines and CSV (with a header row): times in UTC as
      `2026-04-01T10:00:00.123456Z`, floats as Spark (Java) spells them
      (`29.99`, `1.0E7`, `1.0E-4`, `NaN`, `Infinity`), booleans `true` and
      `false`; JSON leaves a `None` out and holds lists as arrays; in CSV a
      `None` is an empty field and an empty string `""`. Bytes are written
      in parquet only, lists in parquet and JSON.

    Args:
        path: The directory to write into, a local path or a URI.
        format: `"parquet"`, `"json"` (JSON lines) or `"csv"` (with a header row).
        mode: `"overwrite"` (the directory's old files are deleted first) or
            `"error"` (an existing path is refused).
    """

    path: str
    format: str
    mode: str

    def partition_keys(self) -> tuple[str, ...] | None:
        return ()

    def __init__(
        self, path: str | os.PathLike[str], format: str = "parquet", mode: str = "overwrite"
    ) -> None:
        init_fields(self, os.fspath(path), format, mode)

    def default_label(self) -> str:
        return f"WriteFiles({base_name(self.path) or self.path})"

    def parameters(self) -> tuple[tuple[str, str], ...]:
        return (("format", self.format), ("mode", self.mode))

    def update_stream(self, inputs: Sequence[EdgeInfo], label: str) -> UpdateStream | None:
        """An update stream is written as its change rows, as they are (append-only)."""
        return single_input(inputs, label).updates

    def infer(self, inputs: Sequence[EdgeInfo], label: str) -> EdgeInfo:
        source = single_input(inputs, label)
        _check_format(self.format, label)
        if self.mode not in WRITE_MODES:
            raise PipelineError(f"{label}: mode={self.mode!r}; use one of {list(WRITE_MODES)}")
        fs = current_paths()
        try:
            fs.check(self.path)
            exists = self.mode == "error" and fs.kind(self.path) is not None
        except UnreachablePath as exc:
            raise PipelineError(f"{label}: cannot write {self.path!r}: {exc}") from None
        if exists:
            raise PipelineError(
                f"{label}: {self.path!r} exists and mode='error'; remove it or use mode='overwrite'"
            )
        fields = source.schema.fields
        unwritable = [name for name, kind in fields if kind is object]
        if unwritable:
            raise PipelineError(
                f"{label}: column(s) {unwritable} of type object cannot be written; give them "
                "a concrete type with Map(schema=...)"
            )
        binary = [name for name, kind in fields if kind is bytes]
        lists = [name for name, kind in fields if list_element(kind) is not None]
        if self.format != "parquet" and binary:
            raise PipelineError(
                f"{label}: bytes column(s) {binary} cannot be written as {self.format}; write "
                "parquet, or turn them into text in a Map (bytes.hex(), base64)"
            )
        if self.format == "csv" and lists:
            raise PipelineError(
                f"{label}: list column(s) {lists} cannot be written as csv (Spark's CSV writer "
                "has no lists); write parquet or json, or join them into text in a Map"
            )
        return source

    def watermark_rule(self, inputs: Sequence[EdgeInfo], label: str) -> WatermarkRule:
        """Rows pass on unchanged, and so do their watermarks."""
        return WatermarkRule(passing(inputs[0].schema.names))
