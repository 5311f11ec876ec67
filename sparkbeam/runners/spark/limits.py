"""What the Spark runner refuses on unbounded input, for now, before any query runs.

Structured Streaming runs the model's late-row filter, windows, joins and
sorts, late and invalid rows as data, `policy="max"`, `idle_after` in
epochs and `max_drift` over replayed sources (`streaming`); these features of
the model have no streaming form.
Each is refused with a `PipelineError` naming the transform and what to do;
bounded pipelines run as batch jobs, where all of them work (`translate`).
Why:

- `idle_after` as processing time (a duration): Spark has no idle inputs; the
  runner applies `idle_after` in epochs to the sources it replays
  (`streaming.IdleInputs`); a live query's watermarks never meet another's
  (refused in `streaming.StreamingRun`), so idleness changes nothing there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NoReturn

from sparkbeam.errors import PipelineError
from sparkbeam.graph import Node
from sparkbeam.transforms.watermark import WithWatermark

ADVICE = "run this pipeline on the direct runner, or on bounded input (Create, ReadFiles) on Spark"


def refuse_streaming_limits(nodes: Sequence[Node]) -> None:
    """Raise `PipelineError` for the first node of an unbounded pipeline Spark cannot run yet."""
    for node in nodes:
        transform = node.transform
        if not isinstance(transform, WithWatermark):
            continue
        if transform.idle_after is not None and transform.idle_epochs(node.label) is None:
            raise PipelineError(
                f"{node.label}: idle_after={transform.idle_after!r} is processing time, which "
                "Spark cannot apply to a source: a query keeps one watermark, the minimum (or "
                "maximum) of all its inputs', with no notion of an idle input. Give a number of "
                "epochs (idle_after=3), which the Spark runner applies to the sources it replays "
                "(TestStream, Create, ReadFiles collected)"
            )


def refuse_held_watermark(node: Node, column: str) -> NoReturn:
    """`node` keys state or late rows on `column`, whose watermark is a Session's held
    `window_start` (`sparkbeam.derivation.Derived.held`)."""
    raise PipelineError(
        f"{node.label}: the watermark of {column!r} comes from a Session's window_start, "
        "which the model holds at the start of the oldest open session of any key; Spark's "
        "stateful operators see one key at a time and cannot follow it here (only a "
        "CombinePerKey right after the Session can). Key this transform on window_end (or a "
        "column derived from it) instead, or run the pipeline on the direct runner"
    )
