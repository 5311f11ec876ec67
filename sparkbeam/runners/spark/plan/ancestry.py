"""Which nodes a query holds, and what that says about it: ancestors, whether watermarks of
different origins meet, how deep its chain of stateful operators is.
"""

from __future__ import annotations

from collections.abc import Sequence

from sparkbeam.graph import Node
from sparkbeam.transforms.watermark import WithWatermark


def stateful_depth(nodes: Sequence[Node], selected: set[int]) -> int:
    """The most stateful operators (late-row filters included) on one path of a query."""
    depth: dict[int, int] = {}
    for node_id in sorted(selected):
        node = nodes[node_id]
        above = max((depth.get(i, 0) for i in node.inputs), default=0)
        depth[node_id] = above + node.transform.holds_state()
    return max(depth.values(), default=0)


def origins_meet(nodes: Sequence[Node], ancestors: set[int]) -> bool:
    """Whether watermarks of different `WithWatermark`s meet at a Union or Join."""
    return first_meeting(nodes, ancestors) is not None


def first_meeting(nodes: Sequence[Node], ancestors: set[int]) -> int | None:
    """The first Union or Join among `ancestors` where watermarks of different
    `WithWatermark`s meet (None: nowhere)."""
    origins: dict[int, frozenset[int]] = {}
    for node_id in sorted(ancestors):
        node = nodes[node_id]
        inputs = [origins[i] for i in node.inputs]
        if len({o for o in inputs if o}) > 1:
            return node_id
        mine = frozenset().union(*inputs)
        if isinstance(node.transform, WithWatermark):
            mine = mine | {node_id}
        origins[node_id] = mine
    return None


def ancestors(nodes: Sequence[Node], target: Node, stop: set[int] | None = None) -> set[int]:
    """`target` and the nodes it reads from, not going past the nodes in `stop`."""
    seen: set[int] = set()
    stack = [target.id]
    while stack:
        node_id = stack.pop()
        if node_id not in seen:
            seen.add(node_id)
            if not stop or node_id not in stop:
                stack.extend(nodes[node_id].inputs)
    return seen
