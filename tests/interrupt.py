"""A suite stopped by SIGTERM (a CI job's time limit, `kill`) stops as on Ctrl-C.

Python's default for SIGTERM ends the process at once, so no fixture's teardown runs: the
Spark Connect server and the standalone cluster the tests start would be left running.
Raised as `KeyboardInterrupt` instead, pytest stops the test under way and tears down
every fixture set up, as it does on Ctrl-C. Loaded by `tests/conftest.py`.
"""

from __future__ import annotations

import signal
from types import FrameType

import pytest


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"stopped by signal {signum}")


def pytest_configure(config: pytest.Config) -> None:
    signal.signal(signal.SIGTERM, _interrupt)
