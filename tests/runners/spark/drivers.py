"""A driver process killed in the middle of a micro-batch, for the restart tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
"""The repository, for the driver scripts' `sys.path`."""


SESSION = """
import os, sys
sys.path.insert(0, {root!r})
os.environ["PYSPARK_PYTHON"] = sys.executable
from pyspark.sql import SparkSession
from tests.conftest import SPARK_CONF
builder = SparkSession.builder
for key, value in SPARK_CONF.items():
    builder = builder.config(key, value)
spark = builder.getOrCreate()
"""
"""The start of a driver script: the test session's settings, the repository (`{root}`) on its
path."""


def kill_during_batch(script: str, slow: str, seconds: float) -> None:
    """Run `script` as a driver (Python and its JVM in a process group of their own), wait up to
    `seconds` until its slowed batch has started (the file `slow` + ".started"), kill the group
    with SIGKILL, and let the next batch run at full speed (`slow` removed)."""
    driver = subprocess.Popen(
        [sys.executable, "-c", script],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + seconds
    while not os.path.exists(slow + ".started") and time.monotonic() < deadline:
        assert driver.poll() is None, "the driver ended before its slowed batch"
        time.sleep(0.2)
    assert os.path.exists(slow + ".started")
    os.killpg(driver.pid, signal.SIGKILL)
    driver.wait(timeout=60)
    os.remove(slow)
