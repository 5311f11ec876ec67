"""Dropped rows as data: `late_rows(pc)` and `invalid_rows(pc)`.

Spark drops late rows and only counts them; here they are a PCollection like
any other (count them, write them to files, union them back):

- `late_rows(w)` (`w.late_rows()`), where `w` is the output of a
  `WithWatermark`: every row it dropped as late, with one more column,
  `late_watermark`, the watermark the row was judged against (the row's time
  was below it).
- `late_rows(u)` where `u` is the output of a `Union` or a window `Join`: the
  rows they dropped because a watermarked column was below the output
  watermark (`policy="max"`, or an idle input coming back). A `Union`'s late
  rows have its schema; a `Join`'s are laid out as unmatched rows (the other
  side's columns `None`). `late_watermark` is the output watermark of the
  first watermarked column, in schema order, that the row was below; all
  watermarked columns must then have the same type.
- `invalid_rows(w)` (`w.invalid_rows()`): every row the `WithWatermark`
  dropped because its event time was `None`, with `w`'s schema.

The rows of epoch `i` are emitted in epoch `i`. These PCollections carry no
watermark: a late row is, by definition, behind one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sparkbeam.errors import PipelineError
from sparkbeam.graph import EdgeInfo, Node, PrimitiveTransform, input_node
from sparkbeam.schema import type_name
from sparkbeam.transforms.join import Join
from sparkbeam.transforms.union import Union
from sparkbeam.transforms.watermark import WithWatermark

if TYPE_CHECKING:
    from sparkbeam.pipeline import PCollection

LATE_WATERMARK = "late_watermark"
LATE = "late"
INVALID = "invalid"
SIDE_KINDS = (LATE, INVALID)


@dataclass(frozen=True, eq=False)
class DroppedRows(PrimitiveTransform):
    """The rows the transform of node `source` dropped: `kind` is `"late"` or `"invalid"`.

    Applied to the pipeline with `source`'s edge as its one input (read with
    `late_rows(pc)` / `invalid_rows(pc)`); a runner feeds it the rows that
    transform dropped, not the edge's own rows.
    """

    source: Node
    kind: str

    def default_label(self) -> str:
        return f"{self.public_name()}({self.source.label})"

    def public_name(self) -> str:
        return "LateRows" if self.kind == LATE else "InvalidRows"

    def extra_inputs(self) -> tuple[Node, ...]:
        return (self.source,)

    def infer(self, inputs: Sequence[EdgeInfo], label: str) -> EdgeInfo:
        (info,) = inputs
        producer = self.source
        transform = producer.transform
        if self.kind == INVALID:
            if not isinstance(transform, WithWatermark):
                raise PipelineError(
                    f"{label}: rows with no event time are dropped by WithWatermark; call "
                    f"invalid_rows() on the PCollection .with_watermark(...) returned, not on "
                    f"the output of {producer.label}"
                )
            return EdgeInfo(info.schema, info.bounded)
        if self.kind != LATE:
            raise PipelineError(f"{label}: kind={self.kind!r}; use one of {list(SIDE_KINDS)}")
        if LATE_WATERMARK in info.schema:
            raise PipelineError(
                f"{label}: the input already has a column {LATE_WATERMARK!r}, which late rows "
                "add; rename it with Select first"
            )
        kind = late_watermark_type(transform, info, producer.label, label)
        return EdgeInfo(info.schema.with_columns((LATE_WATERMARK, kind)), info.bounded)


def late_watermark_type(
    transform: PrimitiveTransform, info: EdgeInfo, producer: str, label: str
) -> type:
    """The type of `late_watermark` for the late rows of `transform`, whose output is `info`."""
    if isinstance(transform, WithWatermark):
        return info.schema.type_of(transform.column)
    if not isinstance(transform, (Union, Join)):
        raise PipelineError(
            f"{label}: {producer} drops no late rows; late rows come from WithWatermark, "
            "Union and Join: call late_rows() on the PCollection one of them returned"
        )
    columns = [name for name in info.schema.names if name in info.watermarked]
    if not columns:
        raise PipelineError(
            f"{label}: the output of {producer} carries no watermark, so no row can be late "
            "there; call late_rows() on the WithWatermark upstream"
        )
    kinds = {info.schema.type_of(name) for name in columns}
    if len(kinds) > 1:
        shown = ", ".join(f"{n} ({type_name(info.schema.type_of(n))})" for n in columns)
        raise PipelineError(
            f"{label}: {producer} has watermarks on columns of different types ({shown}), so "
            f"one {LATE_WATERMARK!r} column cannot hold them; drop the watermark of one "
            "(Select without it, or a Map that does not keep it) before the "
            f"{type(transform).__name__}"
        )
    return kinds.pop()


def late_rows(pcoll: PCollection) -> PCollection:
    """The rows dropped as late by the `WithWatermark`, `Union` or `Join` that produced `pcoll`."""
    node = input_node(pcoll, "late_rows")
    return pcoll.pipeline.apply(DroppedRows(node, LATE), ())


def invalid_rows(pcoll: PCollection) -> PCollection:
    """The rows the `WithWatermark` that produced `pcoll` dropped for a `None` event time."""
    node = input_node(pcoll, "invalid_rows")
    return pcoll.pipeline.apply(DroppedRows(node, INVALID), ())


def side_outputs(nodes: Sequence[Node]) -> dict[int, frozenset[str]]:
    """For each node id, the kinds of dropped rows some `DroppedRows` node reads from it."""
    wanted: dict[int, set[str]] = {}
    for node in nodes:
        transform = node.transform
        if isinstance(transform, DroppedRows):
            wanted.setdefault(transform.source.id, set()).add(transform.kind)
    return {node_id: frozenset(kinds) for node_id, kinds in wanted.items()}
