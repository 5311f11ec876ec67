"""A suite stopped by SIGTERM tears its fixtures down (`tests/interrupt.py`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

INNER = """
import subprocess
import time

import pytest


@pytest.fixture(scope="module")
def server():
    process = subprocess.Popen(["sleep", "600"])  # what a server fixture starts
    with open("server.pid", "w") as f:
        f.write(str(process.pid))
    yield process
    process.kill()
    process.wait()
    with open("torn-down", "w") as f:
        f.write("yes")


def test_waits(server):
    with open("running", "w") as f:
        f.write("yes")
    time.sleep(600)
"""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_sigterm_tears_down_the_fixtures_that_started_servers(tmp_path: Path) -> None:
    (tmp_path / "test_inner.py").write_text(textwrap.dedent(INNER))
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(root)}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "tests.interrupt", "test_inner.py"]
    args = [*command, "-p", "no:cacheprovider", "--rootdir", str(tmp_path)]
    inner = subprocess.Popen(args, cwd=tmp_path, env=env, stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (tmp_path / "running").exists():
        assert inner.poll() is None, inner.communicate()[0]
        assert time.monotonic() < deadline, "the inner test never started"
        time.sleep(0.05)
    pid = int((tmp_path / "server.pid").read_text())
    assert alive(pid)
    inner.send_signal(signal.SIGTERM)
    out, _ = inner.communicate(timeout=60)
    try:
        assert inner.returncode != 0, out
        assert (tmp_path / "torn-down").exists(), out
        assert not alive(pid), out
    finally:
        if alive(pid):  # this test failed: do not leave the inner fixture's process behind
            os.kill(pid, signal.SIGKILL)
