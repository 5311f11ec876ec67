"""The benchmarks' input: N rows over 100 keys, out of order by up to 5 seconds.

Row `i` has `key = f"k{i % 100}"`, `value = i % 1000` and an event time of
2026-04-01 + `i` milliseconds - a jitter of up to 5 seconds (a multiplicative
hash of `i`, so neighbours are scrambled). With a 5-second watermark delay no
row is late, so every tool computes the same sums, whatever it does about
lateness.

The rows are written once as parquet files of 100,000 rows each (one epoch
each), in `<data>/rows-<N>/`, and every job reads those same files.
"""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

EPOCH_ROWS = 100_000
START_MICROS = 1_775_001_600_000_000  # 2026-04-01T00:00:00Z
KEYS = np.array([f"k{i}" for i in range(100)], dtype=object)
COMPLETE = "_complete"  # a name ReadFiles skips


def epoch_table(start: int, stop: int) -> pa.Table:
    """Rows `start .. stop - 1`."""
    i = np.arange(start, stop, dtype=np.int64)
    jitter = (i * 2_654_435_761) % 5_000_000
    times = pa.array(START_MICROS + i * 1000 - jitter, pa.int64())
    return pa.table(
        {
            "key": pa.array(KEYS[i % 100], pa.string()),
            "value": pa.array(i % 1000, pa.int64()),
            "event_time": times.cast(pa.timestamp("us", tz="UTC")),
        }
    )


def rows_directory(data: str, rows: int) -> str:
    """The directory of `rows` rows' epoch files, written on first use."""
    directory = os.path.join(data, f"rows-{rows}")
    if os.path.exists(os.path.join(directory, COMPLETE)):
        return directory
    os.makedirs(directory, exist_ok=True)
    for epoch, start in enumerate(range(0, rows, EPOCH_ROWS)):
        table = epoch_table(start, min(rows, start + EPOCH_ROWS))
        pq.write_table(table, os.path.join(directory, f"epoch-{epoch:05d}.parquet"))
    with open(os.path.join(directory, COMPLETE), "w") as marker:
        marker.write(f"{rows}\n")
    return directory
