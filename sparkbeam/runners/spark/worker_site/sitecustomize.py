"""Imported by every Python process a session the Spark runner started launches (its directory
is on their `PYTHONPATH`: `sparkbeam.runners.spark.session.quiet`).

pyspark's `transform_with_state_driver_worker` prints progress lines to stdout, which the JVM
copies to the user's terminal; they are dropped here, with the blank line each print adds.
Every other line goes through unchanged. Then the `sitecustomize` this one hides, if any, runs.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from typing import Any

_MARKS = (
    "Starting Streaming TransformWithStateInPandas Python worker",
    "Streaming TransformWithStateInPandas Python worker",
)


class _Quiet:
    """A text stream that drops the planning worker's progress lines."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._dropped = False

    def write(self, text: str) -> int:
        if text.startswith(_MARKS):
            self._dropped = True
            return len(text)
        if self._dropped and text.strip() == "":
            self._dropped = False
            return len(text)
        self._dropped = False
        return int(self._stream.write(text))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


if sys.stdout is not None:
    sys.stdout = _Quiet(sys.stdout)


def _chain() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


_chain()
