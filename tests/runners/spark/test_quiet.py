"""What Spark prints on a session the runner starts: no per-query chatter, errors still shown
(issue 16 item 4, `runners/spark/quiet.py`)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.spark

ROOT = pathlib.Path(__file__).resolve().parents[3]

SCRIPT = textwrap.dedent(
    """
    import datetime as dt
    import sparkbeam as sb

    T = dt.datetime(2026, 1, 1)
    stream = sb.TestStream(schema={"k": str, "t": dt.datetime, "v": int})
    stream.add_epoch([{"k": "a", "t": T, "v": 2**62}, {"k": "a", "t": T, "v": 2**62}])
    p = sb.Pipeline(runner=sb.SparkRunner(master="local[2]"))
    # Sort: a transformWithState, whose planning worker prints; the Sum then overflows.
    ordered = (p | stream).with_watermark("t", "1 second").sort("t")
    sums = ordered.tumble("t", "1 minute").combine_per_key(["k", "window_start"], n=sb.Sum("v"))
    p.run().collect(sums)
    """
)

NOISE = (
    "TransformWithStateInPandas Python worker",
    "Disabling AQE",
    "is not supported in streaming DataFrames",
    "Failed to cancel job group",
    "SQLQueryContextLogger",
    '"level": "ERROR"',
    "ERROR Executor",
    "Lost task",
    "terminated with error",
)


def test_a_session_the_runner_starts_prints_no_chatter_and_still_the_error() -> None:
    """In a fresh process (the runner starts its own session there): a streaming pipeline
    with a `transformWithState` whose sum overflows. Without `quiet`, every line of `NOISE`
    was printed before the `DataError`."""
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
    }
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=600,
        check=False,
    )
    printed = done.stdout + done.stderr
    assert done.returncode == 1, printed[-3000:]
    error = "sparkbeam.errors.DataError: CombinePerKey(k, window_start) n: a sum left the 64-bit"
    assert error in printed
    shown = [line for line in NOISE if line in printed]
    assert shown == [], printed[-3000:]
