"""Progress lines of the Spark runner: what it is doing while a job starts and runs.

A Spark job on a handful of rows takes tens of seconds (a JVM starting, a query per
PCollection, a micro-batch per epoch); with nothing printed it looks hung. The runner says
each phase at INFO through Python's `logging`, under the `sparkbeam` logger (`LOGGER`,
`sparkbeam.spark`): starting Spark, translating, each query started, each replayed epoch
fed and run, the end of input, stopping.

Where they show (`SparkRunner(progress=...)`, `show_progress`):

- `None` (the default): on stderr when nothing in the process configured logging for
  `sparkbeam` (no handler on it or its ancestors and no level set on it: a plain
  `python job.py`) and stderr is a terminal; else where the application's logging puts
  `sparkbeam`'s INFO records, if anywhere (a test run, a service with its own logging, a
  scheduler's log file: quiet).
- `True`: on stderr as well when no handler is configured, and `sparkbeam` records at INFO
  reach the configured handlers otherwise.
- `False`: no handler is added and no level set; the records still go to `logging`.
"""

from __future__ import annotations

import logging
import sys
import time

LOGGER = logging.getLogger("sparkbeam.spark")
"""Where the Spark runner's progress lines go (INFO)."""

_PACKAGE = logging.getLogger("sparkbeam")

_HANDLER = logging.StreamHandler(sys.stderr)
_HANDLER.setFormatter(logging.Formatter("%(asctime)s sparkbeam: %(message)s", "%H:%M:%S"))


def _on_a_terminal() -> bool:
    isatty = getattr(sys.stderr, "isatty", None)
    return bool(isatty and isatty())


def show_progress(progress: bool | None) -> None:
    """Make the progress lines show as `progress` says (module docstring): the stderr handler
    is added to the `sparkbeam` logger once, and its level set to INFO where it was unset."""
    if progress is False:
        return
    configured = _PACKAGE.hasHandlers() and _HANDLER not in _PACKAGE.handlers
    leveled = _PACKAGE.level != logging.NOTSET and _HANDLER not in _PACKAGE.handlers
    if progress is None and (configured or leveled or not _on_a_terminal()):
        return
    if not configured and _HANDLER not in _PACKAGE.handlers:
        _HANDLER.setStream(sys.stderr)
        _PACKAGE.addHandler(_HANDLER)
    if _PACKAGE.getEffectiveLevel() > logging.INFO:
        _PACKAGE.setLevel(logging.INFO)


def say(message: str, *args: object) -> None:
    """A progress line (`message % args`) at INFO."""
    LOGGER.info(message, *args)


def counted(count: int, one: str, more: str) -> str:
    """`1 epoch`, `3 epochs`."""
    return f"{count} {one if count == 1 else more}"


class Clock:
    """Seconds since it was made, for a progress line (`f"{clock}"`: `12.3 s`)."""

    def __init__(self) -> None:
        self.start = time.monotonic()

    def __str__(self) -> str:
        return f"{time.monotonic() - self.start:.1f} s"
