"""Driver processes killed in the middle of a micro-batch, for the restart tests.

A pytest plugin (`tests/conftest.py` loads it). Each killed driver is a
Python with its own JVM and SparkSession, started ahead of its test (`warm`):
as the first test of a module that holds a `killed_driver` test starts, so
that the driver's start (Python, the JVM, the session: most of its time)
runs beside that module's other tests; its test then hands it the script to
run (`kill_during_batch`). A driver still waiting when the suite ends is
killed (`pytest_unconfigure`).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

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

WAITING = (
    SESSION
    + """
import time
while not os.path.exists({script!r}):
    time.sleep(0.05)
with open({script!r}) as handle:
    exec(compile(handle.read(), {script!r}, "exec"))
"""
)
"""A driver that starts its session, then waits for the script it runs (`{script}`), which
finds the session as `spark`."""


class Driver:
    """A driver process (Python and its JVM, in a process group of their own) with its session
    started, waiting for its script."""

    def __init__(self) -> None:
        self.directory = tempfile.mkdtemp(prefix="sparkbeam-driver-")
        self.script = os.path.join(self.directory, "script.py")
        # What a killed driver leaves in its temporary directory (the runner's scratch
        # directories, Spark's local and artifact directories, the JVM's unpacked native
        # libraries) goes to the suite's own (`scratch`), deleted as the suite ends.
        temporary = scratch()
        env = {
            **os.environ,
            "TMPDIR": temporary,
            "JAVA_TOOL_OPTIONS": f"-Djava.io.tmpdir={temporary}",
        }
        self.process = subprocess.Popen(
            [sys.executable, "-c", WAITING.format(root=ROOT, script=self.script)],
            env=env,
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def run(self, script: str) -> None:
        """Hand the driver `script` (written whole, then renamed into place)."""
        with open(self.script + ".part", "w") as handle:
            handle.write(script)
        os.rename(self.script + ".part", self.script)

    def kill(self) -> None:
        """SIGKILL to the driver's process group, if it still runs."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=60)
        shutil.rmtree(self.directory, ignore_errors=True)


_scratch: str | None = None
"""The killed drivers' temporary directory, once made (`scratch`)."""


def scratch() -> str:
    """The killed drivers' temporary directory, made now if it was not yet."""
    global _scratch
    if _scratch is None:
        _scratch = tempfile.mkdtemp(prefix="sparkbeam-drivers-tmp-")
    return _scratch


_waiting: Driver | None = None
"""The driver started ahead for the next `kill_during_batch`, if any."""


def warm() -> None:
    """Start the next killed driver now, unless one waits already."""
    global _waiting
    if _waiting is None or _waiting.process.poll() is not None:
        _waiting = Driver()


def kill_during_batch(script: str, slow: str, seconds: float) -> None:
    """Run `script` in a driver (the one started ahead, else a new one), wait up to `seconds`
    until its slowed batch has started (the file `slow` + ".started"), kill it with SIGKILL,
    and let the next batch run at full speed (`slow` removed)."""
    global _waiting
    warm()
    driver, _waiting = _waiting, None
    assert driver is not None
    driver.run(script)
    deadline = time.monotonic() + seconds
    try:
        while not os.path.exists(slow + ".started") and time.monotonic() < deadline:
            assert driver.process.poll() is None, "the driver ended before its slowed batch"
            time.sleep(0.2)
        assert os.path.exists(slow + ".started")
    finally:
        driver.kill()
    os.remove(slow)


KILLED = pytest.StashKey[set[str]]()
"""The modules (paths) that hold a `killed_driver` test."""


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "killed_driver: runs a driver killed mid-batch (`kill_during_batch`)"
    )


def pytest_collection_finish(session: pytest.Session) -> None:
    session.config.stash[KILLED] = {
        str(item.path) for item in session.items if item.get_closest_marker("killed_driver")
    }


def pytest_runtest_setup(item: pytest.Item) -> None:
    """The first test of a module with a `killed_driver` test starts its driver."""
    if str(item.path) in item.config.stash.get(KILLED, set()):
        item.config.stash[KILLED].discard(str(item.path))
        warm()


def pytest_unconfigure(config: pytest.Config) -> None:
    """Never leave a waiting driver running (a run stopped early too), nor the drivers' temporary
    files."""
    global _waiting, _scratch
    if _waiting is not None:
        _waiting.kill()
        _waiting = None
    if _scratch is not None:
        shutil.rmtree(_scratch, ignore_errors=True)
        _scratch = None
