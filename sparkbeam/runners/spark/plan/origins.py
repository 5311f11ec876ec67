"""Where each node's watermarks come from: the `WithWatermark` nodes upstream of it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from sparkbeam.graph import Node
from sparkbeam.transforms.watermark import WithWatermark


def watermark_origins(nodes: Sequence[Node]) -> dict[int, frozenset[int]]:
    """For each node, the nodes its watermarks come from: its inputs' origins, and itself
    where it watermarks a column of its own (`WatermarkRule.own`: a `WithWatermark`)."""
    origins: dict[int, frozenset[int]] = {}
    for node in nodes:
        upstream = frozenset().union(*(origins.get(i, frozenset()) for i in node.inputs))
        origins[node.id] = upstream | ({node.id} if node.rule.own else frozenset())
    return origins


def redefines_watermark(origins: Mapping[int, frozenset[int]], node: Node) -> bool:
    """Whether `node` is a `WithWatermark` on a stream that already has a watermark: Spark
    refuses to redefine one ("Redefining watermark is disallowed"), whatever the columns."""
    return isinstance(node.transform, WithWatermark) and bool(origins.get(node.inputs[0]))


def merges_chained_origins(origins: Mapping[int, frozenset[int]], inputs: Iterable[int]) -> bool:
    """Whether watermarks of several `WithWatermark`s meet over `inputs` (of a `Union` or
    `Join`) and one of them is downstream of another: merges run as one stage query per
    origin, and a `WithWatermark` downstream of another cannot be cut out that way."""
    met: frozenset[int] = frozenset().union(*(origins.get(i, frozenset()) for i in inputs))
    nested = [o for o in met if any(o in origins.get(p, frozenset()) for p in met if p != o)]
    return len(met) > 1 and bool(nested)
