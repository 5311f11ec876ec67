"""Where the Spark runner's progress lines show (`runners/spark/execute/progress.py`): the decision
for each `progress=` and set-up of logging, on a logger of its own (no Spark runs)."""

from __future__ import annotations

import logging

import pytest

from sparkbeam.runners.spark.execute import progress


@pytest.fixture
def package(monkeypatch: pytest.MonkeyPatch) -> logging.Logger:
    """A `sparkbeam` logger as in a plain script: no handler, no level, under a root logger
    at WARNING with no handler."""
    logger = logging.Logger("sparkbeam")
    logger.parent = logging.Logger("root", logging.WARNING)
    monkeypatch.setattr(progress, "_PACKAGE", logger)
    return logger


@pytest.mark.parametrize(
    ("given", "terminal", "shown"),
    [
        (None, True, True),  # python job.py, by hand
        (None, False, False),  # output to a file or a pipe: a scheduler's log
        (True, False, True),
        (False, True, False),
    ],
)
def test_progress_shows_on_stderr_for_a_plain_script(
    package: logging.Logger,
    monkeypatch: pytest.MonkeyPatch,
    given: bool | None,
    terminal: bool,
    shown: bool,
) -> None:
    monkeypatch.setattr(progress, "_on_a_terminal", lambda: terminal)
    progress.show_progress(given)
    assert (progress._HANDLER in package.handlers) is shown
    assert package.level == (logging.INFO if shown else logging.NOTSET)


def test_configured_logging_is_left_as_it_is_unless_asked(
    package: logging.Logger, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(progress, "_on_a_terminal", lambda: True)
    own = logging.NullHandler()
    package.addHandler(own)
    package.setLevel(logging.WARNING)
    progress.show_progress(None)
    assert package.handlers == [own] and package.level == logging.WARNING
    progress.show_progress(True)  # asked for: its records reach the handler configured
    assert package.handlers == [own] and package.level == logging.INFO
