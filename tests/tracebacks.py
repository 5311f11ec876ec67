"""How an uncaught error prints: its traceback as the interpreter shows it, checked to be as
short as the direct runner's for the same mistake and free of Spark's engine."""

from __future__ import annotations

import traceback

ENGINE_MARKS = ("at org.apache", "py4j", "Py4J", "StreamingQueryException", "pyspark/worker")
"""What a traceback shows when Spark's exception is chained to the error: JVM frames, Py4J's
error, the query's exception, a Python worker's traceback."""

SHORT = 40
"""Lines an error with no direct-runner counterpart prints at most (a Spark-only mistake)."""


def printed(error: BaseException) -> str:
    """`error` printed as the interpreter prints an uncaught one."""
    return "".join(traceback.format_exception(error))


def assert_short_as_direct(error: BaseException, direct: BaseException | None = None) -> None:
    """`error` (of the Spark runner) prints no engine frame and at most twice the lines the
    direct runner's error `direct` for the same mistake prints (`SHORT` without one)."""
    text = printed(error)
    shown = [mark for mark in ENGINE_MARKS if mark in text]
    assert shown == [], text
    limit = 2 * len(printed(direct).splitlines()) if direct is not None else SHORT
    assert len(text.splitlines()) <= limit, text


def original(error: BaseException) -> BaseException | None:
    """What `error` was made from: Spark's exception (`spark_error`), else its cause."""
    return getattr(error, "spark_error", None) or error.__cause__
