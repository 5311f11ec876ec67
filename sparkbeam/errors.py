"""The three exceptions a user of sparkbeam can get.

- `PipelineError`: the pipeline's shape is wrong; raised when a transform is
  applied (or, for runner limits, when the pipeline is translated).
- `DataError`: a row is wrong; raised at run time, naming the row.
- `InvariantViolation`: the direct runner saw a stream break invariant W or
  the order promised by `Sort`.
"""

from __future__ import annotations

import inspect
import os
import re
import sys
import traceback
from typing import Any

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep

SHIPPED_PREFIX = "sparkbeam/"
"""How the zip the Spark runner ships names sparkbeam's files, and so how its compiled code
names them (`shipping.compiled`): `sparkbeam/errors.py`, wherever a worker keeps the zip."""


class PipelineError(ValueError):
    """A transform cannot be applied as written; the message says what to change.

    On the Spark runner, an error made from one of Spark's keeps Spark's exception as
    `spark_error` (its JVM stack, its Python worker's traceback); it is not chained to the
    error (no `__cause__`), so an uncaught error prints as short as the direct runner's.
    """

    spark_error: BaseException | None = None
    """The Spark exception this error was made from (Spark runner), else None."""


class DataError(ValueError):
    """A row cannot be processed as the pipeline says; the message names the row.

    On the Spark runner, a `DataError` found in Spark's failure (a Python worker's, a file
    Spark could not parse) keeps Spark's exception as `spark_error`, not as its `__cause__`:
    printed, it is as short as the direct runner's.
    """

    spark_error: BaseException | None = None
    """The Spark exception this error was found in (Spark runner), else None."""

    def __init__(self, message: str, row: Any = None) -> None:
        super().__init__(message)
        self.row = row


class InvariantViolation(AssertionError):
    """A stream broke invariant W (a row below a watermark, a watermark going back)
    or a `Sort` emitted rows out of order."""


def described(exc: BaseException) -> str:
    """A user function's exception in one line: its type and message, then the file and
    line where it was raised (the innermost frame outside sparkbeam), as a `DataError`
    quotes it; the exception itself goes along as the `DataError`'s `__cause__`."""
    frames = [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if not frame.filename.startswith(SHIPPED_PREFIX)
        and not os.path.abspath(frame.filename).startswith(_PACKAGE)
    ]
    if not frames:
        return repr(exc)
    return f"{exc!r} at {frames[-1].filename}:{frames[-1].lineno}"


_JVM_NAME = re.compile(r"\b(?:[a-z_][\w$]*\.)+([A-Z][\w$]*)")
"""A qualified JVM or Python class name (`org.apache.hadoop.fs.ParentNotDirectoryException`):
only its last part is kept in a message."""


def clean_line(text: str, limit: int = 400) -> str:
    """One line of an error for a user: qualified class names shortened to their own name
    (so no `java.`/`py4j` package shows), at most `limit` characters."""
    line = _JVM_NAME.sub(r"\1", " ".join(text.split()))
    line = line.replace("java.", "").replace("py4j", "Py4J")
    return line if len(line) <= limit else line[: limit - 3] + "..."


def first_line(exc: BaseException) -> str:
    """An exception as its type and the first non-empty line of its message."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def where_raised(exc: BaseException) -> str:
    """` at file:line` of the innermost frame of `exc`'s traceback (any file), or ""."""
    frames = traceback.extract_tb(exc.__traceback__)
    return f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""


def unexpected(label: str, exc: BaseException, line: str | None = None) -> PipelineError:
    """A `PipelineError` naming the transform `label` for an exception sparkbeam has no words
    of its own for (a file system's, an engine's, its own bug), with the first useful line of
    it (`line`, else its type and first line and where it was raised); the exception goes
    along as the `__cause__` (on the Spark runner: as `spark_error`)."""
    said = clean_line(line if line is not None else first_line(exc) + where_raised(exc))
    return PipelineError(
        f"{label}: the run failed: {said}. This is no check of sparkbeam's: if it is not about "
        "your files, disk, permissions or cluster, please report it with this message"
    )


SPARKBEAM_ERRORS = (PipelineError, DataError, AssertionError)
"""The exceptions a run lets through as they are: sparkbeam's, and
`AssertionError`s (`InvariantViolation`, and `assert_that`'s failures, which a test expects
as they are)."""


def call_form(fn: Any) -> str:
    """How a class or function is called, its required arguments by name: `sb.Map(fn)`,
    `sb.Count()`, `sb.Tumble(column, size)`, `MyCombineFn()` (`sb.` when sparkbeam exports it),
    for a message about a class given where an instance was meant."""
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        parameters = []
    shown = []
    for parameter in parameters:
        if parameter.kind is parameter.VAR_POSITIONAL:
            shown.append(f"*{parameter.name}")
        elif parameter.kind is parameter.VAR_KEYWORD:
            shown.append(f"**{parameter.name}")
        elif parameter.default is parameter.empty:
            shown.append(parameter.name)
    name = getattr(fn, "__name__", type(fn).__name__)
    exported = getattr(sys.modules.get("sparkbeam"), name, None) is fn
    return f"{'sb.' if exported else ''}{name}({', '.join(shown)})"
