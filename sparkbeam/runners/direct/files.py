"""Direct operators for `ReadFiles` and `WriteFiles` (reading: `runners.shared.files`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sparkbeam.graph import EdgeInfo, Node
from sparkbeam.paths import DRIVER, Paths, join
from sparkbeam.runners.direct.operator import Chunk, Message, Operator, Owner, SourceOperator
from sparkbeam.runners.direct.text import csv_lines, json_lines
from sparkbeam.runners.shared.files import read_file
from sparkbeam.schema import Schema, columns_to_rows
from sparkbeam.transforms.files import ReadFiles, WriteFiles, data_files


class ReadFilesOperator(SourceOperator):
    """All files in epoch 0, or, with `streaming=True`, one file per epoch."""

    def __init__(self, node: Node, inputs: Sequence[EdgeInfo]) -> None:
        super().__init__(node, inputs)
        transform = node.transform
        assert isinstance(transform, ReadFiles)
        self.transform = transform
        self.files = data_files(transform.path, node.label, DRIVER)
        self.epoch_count = len(self.files) if transform.streaming else 1

    def epoch(self, epoch: int) -> Iterable[Chunk]:
        if self.transform.streaming:
            files = self.files[epoch : epoch + 1]
        else:
            files = self.files if epoch == 0 else []
        for path in files:
            schema, kind = self.node.info.schema, self.transform.format
            origin = self.transform.schema_origin
            for columns in read_file(path, kind, schema, self.label, DRIVER, origin):
                yield Chunk(columns, len(next(iter(columns.values()), [])))


def write_files(
    path: str,
    format: str,
    mode: str,
    schema: Schema,
    chunks: Sequence[Chunk],
    paths: Paths = DRIVER,
) -> None:
    """One file, `part-00000.<format>`, under the directory `path` (a local path or any URI
    `paths` reaches), replacing what was there with `mode="overwrite"`."""
    if mode == "overwrite":
        paths.delete(path)
    paths.mkdirs(path)
    target = join(path, f"part-00000.{format}")
    if format == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        from sparkbeam.arrow import to_arrow

        columns = {name: [v for chunk in chunks for v in chunk.columns[name]] for name in schema}
        sink = pa.BufferOutputStream()
        pq.write_table(to_arrow(columns, schema, path), sink)
        paths.write_bytes(target, sink.getvalue().to_pybytes())
        return
    rows = [row for chunk in chunks for row in columns_to_rows(chunk.columns, schema)]
    lines = json_lines(rows) if format == "json" else csv_lines(schema.names, rows)
    paths.write_bytes(target, "".join(lines).encode("utf-8"))


class WriteFilesOperator(Operator):
    """Keeps the rows it passes on and writes them all at the end of input.

    With parallel units it runs as one unit (behind an exchange that gathers
    every row), so one file is written. Checkpoint: the chunks kept so far.
    """

    def __init__(self, node: Node, inputs: Sequence[EdgeInfo]) -> None:
        super().__init__(node, inputs)
        assert isinstance(node.transform, WriteFiles)
        self.transform = node.transform
        self.chunks: list[Chunk] = []

    def on_chunk(self, port: int, chunk: Chunk) -> list[Message]:
        self.chunks.append(chunk)
        return [chunk]

    def on_end(self) -> list[Message]:
        t = self.transform
        write_files(t.path, t.format, t.mode, self.node.info.schema, self.chunks)
        self.chunks = []
        return []

    def snapshot(self) -> list[Chunk]:
        return list(self.chunks)  # chunks are not changed once emitted

    def restore(self, state: list[Chunk]) -> None:
        self.chunks = list(state)

    def rescale(self, states: Sequence[Any], units: int, owner: Owner) -> list[Any]:
        kept = [chunk for state in states for chunk in state]
        return [kept] + [[] for _ in range(units - 1)]
