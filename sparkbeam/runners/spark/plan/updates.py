"""What the Spark runner refuses of `CombinePerKey(emit="update")` on unbounded input, and the
allowed lateness its operator reads (`update_groups`).

Spark keeps one watermark per query, the model's `W`; the update-mode operator
finds the estimate as `E = W + allowed_lateness`. That holds when every
`WithWatermark` the group's watermarks come from has the same
`allowed_lateness` (the minimum or maximum of `W_i + L` is that of the `W_i`,
plus `L`); where they differ, `E` is not a function of Spark's watermark.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping, Sequence

from sparkbeam.graph import Node
from sparkbeam.runners.spark import limits
from sparkbeam.runners.spark.plan.ancestry import ancestors, first_meeting
from sparkbeam.runners.spark.plan.judging import pipeline_judges
from sparkbeam.runners.spark.plan.origins import watermark_origins
from sparkbeam.time import shown_value
from sparkbeam.transforms.combine import CombinePerKey
from sparkbeam.transforms.watermark import WithWatermark

Origins = Mapping[int, frozenset[int]]


def _updates(nodes: Sequence[Node]) -> list[Node]:
    return [
        node
        for node in nodes
        if isinstance(node.transform, CombinePerKey) and node.transform.updates
    ]


def lateness_ms(node: Node) -> int:
    """A `WithWatermark`'s `allowed_lateness` in Spark milliseconds (integer times are read as
    milliseconds inside Spark)."""
    transform = node.transform
    assert isinstance(transform, WithWatermark)
    schema = node.info.schema
    units = transform.lateness_units(schema, node.label)
    return units // 1000 if schema.type_of(transform.column) is _dt.datetime else units


def lateness_of(nodes: Sequence[Node], node: Node) -> int:
    """The allowed lateness (Spark milliseconds) of the `WithWatermark`s an update-mode
    `CombinePerKey` reads the watermarks of: one value (`refuse_update_streaming`)."""
    origins = watermark_origins(nodes)[node.id]
    latenesses = {lateness_ms(nodes[o]) for o in origins}
    assert len(latenesses) == 1, "refused by the plan (`refuse_update_streaming`)"
    return latenesses.pop()


def refuse_update_streaming(nodes: Sequence[Node], origins: Origins) -> None:
    """An update-mode `CombinePerKey` on unbounded input with no `WithWatermark` upstream (no
    end of input reaches it), or whose `WithWatermark`s differ in `allowed_lateness`."""
    for node in _updates(nodes):
        marks = sorted(origins.get(node.id, frozenset()))
        if not marks:
            raise limits.UPDATE_WITHOUT_WATERMARK.error(node.label)
        first = nodes[marks[0]]
        for other in (nodes[o] for o in marks[1:]):
            if lateness_ms(other) != lateness_ms(first):
                raise limits.UPDATE_LATENESS_APART.error(
                    node.label,
                    first=first.label,
                    first_lateness=_lateness_shown(first),
                    other=other.label,
                    other_lateness=_lateness_shown(other),
                )


def _lateness_shown(node: Node) -> str:
    transform = node.transform
    assert isinstance(transform, WithWatermark)
    return shown_value(transform.allowed_lateness)


def refuse_held_update_keys(nodes: Sequence[Node], origins: Origins) -> None:
    """An update-mode `CombinePerKey` keyed on a column whose watermark depends on rows another
    operator holds: a `Session`'s `window_start`."""
    updates = _updates(nodes)
    if not updates:
        return
    judges = pipeline_judges(nodes, origins)
    for node in updates:
        transform = node.transform
        assert isinstance(transform, CombinePerKey)
        judged = judges[node.inputs[0]]
        held = [k for k in transform.keys if k in judged and judged[k].held]
        if held:
            raise limits.UPDATE_HELD_KEY.error(node.label, column=held[0])


def refuse_update_live_merge(nodes: Sequence[Node], target: Node) -> None:
    """An update-mode `CombinePerKey` upstream of `target` (a sink over live sources) that reads
    a merge where watermarks of different `WithWatermark`s meet: there each input runs as a
    stage query (`execute.live_merges`), and the merge's query takes whatever stage batches
    are committed when it triggers, so the epochs of its update rows follow the timing."""
    for node in _updates([nodes[n] for n in sorted(ancestors(nodes, target))]):
        merge = first_meeting(nodes, ancestors(nodes, node))
        if merge is not None:
            raise limits.UPDATE_LIVE_MERGE.error(node.label, merge=nodes[merge].label)
