"""A runner's refusal: one thing it cannot run, where, why, and what to do instead.

Each runner lists all of its refusals in its `limits` module
(`runners/direct/limits.py`, `runners/spark/limits.py`) and raises them with
`Refusal.error`; the docs' "Where each runs" table (docs/support.md) is generated from those
lists and the support matrix (`scripts/support_table.py`).
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass

from sparkbeam.errors import PipelineError

DIRECT = "direct"
"""The direct runner, one unit (`sb.DirectRunner()`)."""
PARALLEL = "parallel"
"""The direct runner with parallel units (`sb.DirectRunner(parallelism=2)`, ...)."""
BATCH = "batch"
"""The Spark runner on bounded input: a batch job."""
STREAMING = "streaming"
"""The Spark runner on unbounded input it replays epoch by epoch (`TestStream`, `ReadFiles`
collected): Structured Streaming."""
LIVE = "live"
"""The Spark runner on live sources (`ReadFromSpark`, `ReadFiles(streaming=True)` into a sink):
Structured Streaming reading as the input grows."""

MODES = (DIRECT, PARALLEL, BATCH, STREAMING, LIVE)


def _fields(template: str) -> frozenset[str]:
    return frozenset(name for _, name, _, _ in string.Formatter().parse(template) if name)


@dataclass(frozen=True)
class Refusal:
    """One thing a runner refuses, raised as a `PipelineError` before anything runs.

    The message is `"<label>: <reason>; <advice>"`, where `reason` and
    `advice` are `str.format` templates over the fields the call site gives
    (the offending value, column or source).
    """

    name: str
    """A short stable name (`"emit-event"`): the docs and the tests refer to it."""
    refused: str
    """What is refused, in the docs' words (Markdown)."""
    modes: tuple[str, ...]
    """Where it is refused (`MODES`)."""
    reason: str
    """Why: what the engine cannot do (a template)."""
    advice: str
    """What to do instead (a template)."""

    def __post_init__(self) -> None:
        unknown = set(self.modes) - set(MODES)
        if unknown or not self.modes:
            raise ValueError(f"refusal {self.name!r}: modes {self.modes!r}, not of {MODES}")

    @property
    def fields(self) -> frozenset[str]:
        """The names the call site must give `error`."""
        return _fields(self.reason) | _fields(self.advice)

    def error(self, label: str, **fields: object) -> PipelineError:
        """The error to raise at `label`'s node, with the template's `fields` filled in."""
        if set(fields) != self.fields:
            raise TypeError(
                f"refusal {self.name!r} takes fields {sorted(self.fields)}, got {sorted(fields)}"
            )
        reason, advice = self.reason.format(**fields), self.advice.format(**fields)
        return PipelineError(f"{label}: {reason}; {advice}")

    def matches(self, message: str) -> bool:
        """Whether `message` is this refusal's (for any label and fields)."""
        return re.fullmatch(self._pattern(), message, re.DOTALL) is not None

    def _pattern(self) -> str:
        parts = []
        for template in (self.reason, self.advice):
            pieces = []
            for text, name, _, _ in string.Formatter().parse(template):
                pieces.append(re.escape(text))
                if name:
                    pieces.append(".+?")
            parts.append("".join(pieces))
        return rf".+?: {parts[0]}; {parts[1]}"

    def describe(self, template: str) -> str:
        """`template` for the docs (Markdown): each field shown as `*name*`."""
        return template.format(**{name: _Placeholder(name) for name in _fields(template)})


class _Placeholder:
    """A field in the docs: `*name*`, whatever the conversion (`!r`, `!s`)."""

    def __init__(self, name: str) -> None:
        self.text = f"*{name}*"

    def __format__(self, spec: str) -> str:
        return self.text

    def __repr__(self) -> str:
        return self.text

    def __str__(self) -> str:
        return self.text
