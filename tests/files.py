"""Writing the files a live source reads while its query runs."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def publish_parquet(table: pa.Table, path: str | Path, mtime: int | None = None) -> None:
    """Write `table` to `path` as a live source's writer must: under a hidden name ('.' first,
    which the sources skip) then renamed into place, so a reader never sees it half-written;
    its modification time `mtime` (Spark's order of files), if given, is set before it appears."""
    path = Path(path)
    hidden = path.with_name(f".{path.name}.tmp")
    pq.write_table(table, hidden)
    if mtime is not None:
        os.utime(hidden, (mtime, mtime))
    os.replace(hidden, path)
