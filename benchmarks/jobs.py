"""One measurement in this (fresh) process: `python benchmarks/jobs.py JOB DIRECTORY`.

Prints one JSON line: the job, rows, wall seconds (pipeline built, run and
its output collected; imports and input files are ready before the clock
starts) and the process's CPU seconds, its peak resident memory, and what the job
computed (groups and the total of their sums, so that `run.py` can check that
every tool computed the same thing).

Jobs, all over the epoch files of `data.py` in DIRECTORY:

- `loop`: a plain Python loop computing the same sums, reading the files as
  the direct runner does (pyarrow batches to Python lists): the floor for any
  Python runner.
- `direct-on` / `direct-off`: `ReadFiles(streaming=True)` (one epoch per
  file) + `with_watermark(5 s)` + `tumble(60 s)` + per-key `Sum`, with the
  invariant checks on / off.
- `direct-memory`: the same with checks on, from a `TestStream` of Python
  dicts (one epoch per file, read into memory before the clock starts).
- `sort`: `ReadFiles(streaming=True)` + `with_watermark(5 s)` + `sort` on
  the event time, checks on (the sorted rows are checked, not kept).
- `update`: `direct-on` with `emit="update"`: early rows each epoch, the
  change rows collected (groups and sums: of each group's last row).
- `update-late` / `close-late`: `update` / `direct-on` with 2 minutes of
  `allowed_lateness`.
"""

from __future__ import annotations

import json
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

import sparkbeam as sb
from sparkbeam.runners.direct.runner import DirectResult
from sparkbeam.transforms.files import data_files

WINDOW_MICROS = 60_000_000
SCHEMA = {"key": str, "value": int, "event_time": datetime}


def plain_loop(directory: str) -> dict[str, Any]:
    sums: dict[tuple[str, int], int] = defaultdict(int)
    for path in data_files(directory, "loop"):
        for batch in pq.ParquetFile(path).iter_batches(8192):
            keys = batch.column("key").to_pylist()
            values = batch.column("value").to_pylist()
            times = batch.column("event_time").view(pa.int64()).to_pylist()
            for key, value, t in zip(keys, values, times, strict=True):
                sums[(key, t - t % WINDOW_MICROS)] += value
    return {"groups": len(sums), "total": sum(sums.values())}


def windowed_sums(
    source: sb.PTransform, check: bool, emit: str = "close", lateness: str | int = 0
) -> dict[str, Any]:
    p = sb.Pipeline(runner=sb.DirectRunner(check_invariants=check))
    sums = (
        (p | source)
        .with_watermark("event_time", "5 seconds", allowed_lateness=lateness)
        .tumble("event_time", "60 seconds")
        .combine_per_key(["key", "window_start", "window_end"], emit=emit, total=sb.Sum("value"))
    )
    result = p.run()
    assert isinstance(result, DirectResult)
    rows = result.collect(sums)
    finals = [row for row in rows if row.get("pane_is_last", True)]
    return {
        "groups": len(finals),
        "total": sum(row["total"] for row in finals),
        "changes": len(rows),
        "peak_state": result.peak_state_size(sums),
    }


def in_memory(directory: str) -> Callable[[], dict[str, Any]]:
    stream = sb.TestStream(schema=SCHEMA)
    for path in data_files(directory, "memory"):
        table = pq.read_table(path)
        naive = table.set_column(2, "event_time", table["event_time"].cast(pa.timestamp("us")))
        stream.add_epoch(naive.to_pylist())
    return lambda: windowed_sums(stream, True)


def sorted_rows(directory: str) -> dict[str, Any]:
    p = sb.Pipeline(runner=sb.DirectRunner(check_invariants=True))
    ordered = (
        (p | sb.ReadFiles(directory, format="parquet", streaming=True))
        .with_watermark("event_time", "5 seconds")
        .sort("event_time")
    )
    node = ordered.node.id
    del ordered  # not kept: the run checks the order and forgets the rows
    result = p.run()
    assert isinstance(result, DirectResult)
    return {"peak_state": result.peaks[node]}


def job(name: str, directory: str) -> Callable[[], dict[str, Any]]:
    files = sb.ReadFiles(directory, format="parquet", streaming=True)
    jobs: dict[str, Callable[[], Callable[[], dict[str, Any]]]] = {
        "loop": lambda: lambda: plain_loop(directory),
        "direct-on": lambda: lambda: windowed_sums(files, True),
        "direct-off": lambda: lambda: windowed_sums(files, False),
        "direct-memory": lambda: in_memory(directory),
        "sort": lambda: lambda: sorted_rows(directory),
        "update": lambda: lambda: windowed_sums(files, True, "update"),
        "update-late": lambda: lambda: windowed_sums(files, True, "update", "2 minutes"),
        "close-late": lambda: lambda: windowed_sums(files, True, "close", "2 minutes"),
    }
    if name not in jobs:
        raise SystemExit(f"unknown job {name!r}; use one of {sorted(jobs)}")
    return jobs[name]()


def peak_mib() -> float:
    """This process's peak resident memory (VmHWM: unlike ru_maxrss, not inherited across exec)."""
    with open("/proc/self/status") as status:
        for entry in status:
            if entry.startswith("VmHWM:"):
                return int(entry.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def main() -> None:
    name, directory = sys.argv[1], sys.argv[2]
    rows = sum(pq.read_metadata(path).num_rows for path in data_files(directory, name))
    run = job(name, directory)
    start, cpu = time.perf_counter(), time.process_time()
    out = run()
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    peak = peak_mib()
    print(
        json.dumps(
            {"job": name, "seconds": seconds, "cpu": cpu, "peak_mib": peak, "rows": rows, **out}
        )
    )


if __name__ == "__main__":
    main()
