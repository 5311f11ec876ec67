"""Update streams: what `CombinePerKey(emit="update")` makes, and what may read one.

An update stream is a stream of accumulating upserts keyed by the keys of
the `CombinePerKey` that made it: each row is its group's whole value so far,
and a later row of a group replaces the earlier. Three columns follow the
aggregates (Beam's `PaneInfo`):

- `pane_timing` (`str`): `"EARLY"` (before the watermark passed the group),
  `"ON_TIME"` (the row of the epoch whose watermark passed it) or `"LATE"`;
- `pane_index` (`int`): 0, 1, 2, ... per group, in emission order;
- `pane_is_last` (`bool`): `True` on exactly one row per group, its last.

Only what keeps upserts meaningful reads an update stream (each transform
says so in `PrimitiveTransform.update_stream`): a `Map` that keeps every key
and pane column, a `Select` that passes them through, a `Filter` whose
expression reads only them, `finals()`, `WriteFiles`, `ForEachBatch`.
Everything else is refused when applied (`refused_over_updates`): a
`CombinePerKey` or a `Filter` on a value over upserts would mix a group's
corrections with its earlier values.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sparkbeam.errors import PipelineError

if TYPE_CHECKING:
    from sparkbeam.graph import EdgeInfo

PANE_TIMING = "pane_timing"
PANE_INDEX = "pane_index"
PANE_IS_LAST = "pane_is_last"
PANE_COLUMNS = (PANE_TIMING, PANE_INDEX, PANE_IS_LAST)
PANE_TYPES: tuple[tuple[str, type], ...] = (
    (PANE_TIMING, str),
    (PANE_INDEX, int),
    (PANE_IS_LAST, bool),
)

EARLY = "EARLY"
ON_TIME = "ON_TIME"
LATE = "LATE"

EMIT_CLOSE = "close"
EMIT_UPDATE = "update"
EMIT_MODES = (EMIT_CLOSE, EMIT_UPDATE)


@dataclass(frozen=True)
class UpdateStream:
    """An edge of upserts: the key columns its rows upsert by, and the transform that made it."""

    keys: tuple[str, ...]
    source: str
    """The label of the `CombinePerKey(emit="update")` that made it."""
    whole: bool = True
    """Whether every change row of each group is on the edge (no `Filter` removed any): its
    pane indexes then run 0, 1, 2, ... and it ends with its last row."""

    @property
    def kept(self) -> tuple[str, ...]:
        """The columns every reader must keep as they are: the keys and the pane columns."""
        return self.keys + PANE_COLUMNS


def refused_over_updates(
    label: str, kind: str, stream: UpdateStream, detail: str = ""
) -> PipelineError:
    """The error for applying `kind` (at `label`) to the update stream `stream`: what it may
    not do there (`detail`, a sentence) and the two ways out, `finals()` and `emit="close"`."""
    what = detail or (
        f"{kind} cannot read an update stream: its rows are upserts (a later row of a group "
        "replaces the earlier one), not rows to combine, join, window or order"
    )
    return PipelineError(
        f"{label}: {what}. The input is the update stream of {stream.source} (emit='update'); "
        f"apply {kind} to its .finals() (each group's last row, an append stream), or make it "
        "with emit='close' (each group once, when the watermark passes it)"
    )


def passes_over_updates(
    inputs: Sequence[EdgeInfo], label: str, kind: str, kept: Sequence[str], how: str
) -> UpdateStream | None:
    """The update stream a row-wise transform (`kind`, at `label`) keeps: its input's, when
    it keeps every key and pane column (`kept`: those it passes on as they are); a
    `PipelineError` saying `how` to keep them otherwise. None over an append stream."""
    stream = inputs[0].updates if inputs else None
    if stream is None:
        return None
    missing = [name for name in stream.kept if name not in kept]
    if missing:
        raise refused_over_updates(
            label,
            kind,
            stream,
            f"{kind} over an update stream must keep every key and pane column as it is, so "
            f"that each row still upserts its group, but it does not keep {missing} ({how})",
        )
    return stream
