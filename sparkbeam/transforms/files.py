"""Files: `ReadFiles` (a source) and `WriteFiles` (a sink that passes its rows on).

- Formats: `parquet`, `json` (one object per line, as Spark writes it) and
  `csv` (with a header row; an empty field is `None`). Timestamps in json and
  csv are ISO 8601 with microseconds and an offset (`2026-04-01T10:00:00.000000Z`).
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
from sparkbeam.schema import Schema, type_name
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


def parquet_schema(path: str, label: str, paths: Paths | None = None) -> Schema:
    """Our schema of one parquet file's footer (read through `paths`)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:  # pragma: no cover - pyarrow comes with the spark extra
        raise PipelineError(f"{label}: reading parquet needs pyarrow: pip install pyarrow") from exc
    fields: list[tuple[str, type]] = []
    with (paths or current_paths()).open_input(path) as handle:
        try:
            footer = pq.read_schema(handle)
        except (pa.ArrowException, OSError) as exc:
            raise unreadable_parquet(path, label, exc) from exc
    for field in footer:
        kind = field.type
        if pa.types.is_timestamp(kind):
            fields.append((field.name, _dt.datetime))
        elif pa.types.is_boolean(kind):
            fields.append((field.name, bool))
        elif pa.types.is_integer(kind):
            fields.append((field.name, int))
        elif pa.types.is_floating(kind):
            fields.append((field.name, float))
        elif pa.types.is_string(kind) or pa.types.is_large_string(kind):
            fields.append((field.name, str))
        elif pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
            fields.append((field.name, bytes))
        else:
            raise PipelineError(
                f"{label}: column {field.name!r} of {path!r} has type {kind}, which sparkbeam "
                "does not read; select other columns with schema="
            )
    return Schema(tuple(fields))


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
            for file in files:
                found = parquet_schema(file, label)
                if schema is None:
                    schema = found
                for name, kind in schema.fields:
                    if name not in found or found.type_of(name) is not kind:
                        has = type_name(found.type_of(name)) if name in found else "no such column"
                        raise PipelineError(
                            f"{label}: schema says column {name!r} is {type_name(kind)}, but "
                            f"{file!r} has {has}; fix schema= or the files"
                        )
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

    Args:
        path: The directory to write into, a local path or a URI.
        format: `"parquet"`, `"json"` (JSON lines) or `"csv"` (with a header row).
        mode: `"overwrite"` (the directory's old files are deleted first) or
            `"error"` (an existing path is refused).
    """

    path: str
    format: str
    mode: str

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
        unwritable = [name for name, kind in source.schema.fields if kind is object]
        if unwritable or (
            self.format != "parquet" and bytes in dict(source.schema.fields).values()
        ):
            raise PipelineError(
                f"{label}: columns of type object (or bytes outside parquet) cannot be written; "
                "give them a concrete type with Map(schema=...)"
            )
        return source

    def watermark_rule(self, inputs: Sequence[EdgeInfo], label: str) -> WatermarkRule:
        """Rows pass on unchanged, and so do their watermarks."""
        return WatermarkRule(passing(inputs[0].schema.names))
