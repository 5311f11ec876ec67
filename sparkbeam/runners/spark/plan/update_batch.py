"""Where the Spark runner's batch job cannot give an update stream's panes: the rows of an
update-mode `CombinePerKey` must all reach it in the one epoch of bounded input.

A batch job computes each group's aggregate over all its rows, and makes its pane rows from
that aggregate and the watermark after the epoch (`update_panes`). An operator upstream that
holds rows until the watermark passes them (`Session`, `Sort`, an `emit="close"`
`CombinePerKey`, an outer `Join`'s unmatched rows) lets out those the epoch's watermark does
not pass only at the end of input, where the direct runner gives their groups other panes
(no `"EARLY"` row, or a last row with a larger value): refused (`limits.UPDATE_AFTER_HELD_ROWS`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sparkbeam.graph import Node
from sparkbeam.runners.spark import limits
from sparkbeam.transforms.combine import CombinePerKey
from sparkbeam.transforms.join import Join
from sparkbeam.transforms.sort import Sort
from sparkbeam.transforms.windows import Session

Origins = Mapping[int, frozenset[int]]


def holds_rows(node: Node) -> bool:
    """Whether `node` lets rows out only once the watermark passes them (or at the end of
    input): a `Session`, a `Sort`, a `CombinePerKey`, a `Join` that keeps unmatched rows."""
    transform = node.transform
    if isinstance(transform, Join):
        return transform.how != "inner"
    return isinstance(transform, (Session, Sort, CombinePerKey))


def refuse_update_after_held_rows(nodes: Sequence[Node], origins: Origins) -> None:
    """An update-mode `CombinePerKey` downstream of an operator that holds rows (`holds_rows`)."""
    for node in nodes:
        transform = node.transform
        if not isinstance(transform, CombinePerKey) or not transform.updates:
            continue
        seen: set[int] = set()
        waiting = list(node.inputs)
        while waiting:
            index = waiting.pop()
            if index in seen:
                continue
            seen.add(index)
            upstream = nodes[index]
            if holds_rows(upstream):
                kind = type(upstream.transform).__name__
                raise limits.UPDATE_AFTER_HELD_ROWS.error(
                    node.label, kind=kind, upstream=upstream.label
                )
            waiting.extend(upstream.inputs)
