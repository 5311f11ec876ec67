"""Apache Beam's Python DirectRunner on the benchmark's pipeline, in Beam's own environment.

Run by `run.py` with `benchmarks/.venv-beam/bin/python` (made by
`benchmarks/setup.sh`): `beam_job.py DIRECTORY`. Prints one JSON line like
`jobs.py`.

The pipeline a Beam user would write for the same job: `ReadFromParquet` over
the same epoch files, `TimestampedValue` from the event time,
`FixedWindows(60 s)`, `CombinePerKey(sum)`, and the sums written out as text
(read back to check them). It runs as a batch pipeline: on bounded input
Beam's watermark only moves at the end, and no row of this data is late by
5 seconds, so the sums are the same as with a 5-second allowed delay. Batch
is Beam's faster mode on the Python DirectRunner (a `TestStream` needs the
streaming mode of the slower bundle-based runner), so this is Beam at its
best. Its running mode is `in_memory` with one worker, in this process.
"""

from __future__ import annotations

import datetime
import glob
import json
import os
import sys
import tempfile
import time
from typing import Any

import apache_beam as beam
import pyarrow.parquet as pq
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms.window import FixedWindows, TimestampedValue
from apache_beam.utils.timestamp import Timestamp


class FormatSum(beam.DoFn):  # type: ignore[misc]
    def process(self, element: Any, window: Any = beam.DoFn.WindowParam) -> Any:
        key, total = element
        yield f"{key},{window.start.micros},{total}"


EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
MICROSECOND = datetime.timedelta(microseconds=1)


def timestamped(row: dict[str, Any]) -> TimestampedValue:
    """The row's (key, value) at its event time, exactly (in microseconds)."""
    micros = (row["event_time"] - EPOCH) // MICROSECOND
    return TimestampedValue((row["key"], row["value"]), Timestamp(micros=micros))


def peak_mib() -> float:
    """This process's peak resident memory (VmHWM: unlike ru_maxrss, not inherited across exec)."""
    with open("/proc/self/status") as status:
        for entry in status:
            if entry.startswith("VmHWM:"):
                return int(entry.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def main() -> None:
    directory = sys.argv[1]
    files = sorted(glob.glob(os.path.join(directory, "*.parquet")))
    rows = sum(pq.read_metadata(path).num_rows for path in files)
    out = tempfile.mkdtemp(prefix="sparkbeam-bench-beam-")
    options = PipelineOptions(
        runner="DirectRunner", direct_running_mode="in_memory", direct_num_workers=1
    )
    start, cpu = time.perf_counter(), time.process_time()
    with beam.Pipeline(options=options) as p:
        (
            p
            | beam.io.ReadFromParquet(os.path.join(directory, "*.parquet"))
            | beam.Map(timestamped)
            | beam.WindowInto(FixedWindows(60))
            | beam.CombinePerKey(sum)
            | beam.ParDo(FormatSum())
            | beam.io.WriteToText(os.path.join(out, "sums"))
        )
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    peak = peak_mib()
    groups = total = 0
    for path in glob.glob(os.path.join(out, "sums*")):
        with open(path) as lines:
            for line in lines:
                groups += 1
                total += int(line.rsplit(",", 1)[1])
    report = {"job": "beam", "seconds": seconds, "cpu": cpu, "peak_mib": peak, "rows": rows}
    print(json.dumps({**report, "groups": groups, "total": total, "version": beam.__version__}))


if __name__ == "__main__":
    main()
