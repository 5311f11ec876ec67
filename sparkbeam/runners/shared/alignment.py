"""Watermark alignment, `WithWatermark(..., max_drift=...)`: the rule both runners apply.

Flink's watermark alignment (FLIP-182, FLIP-296 for SQL), by epochs. The
*peers* of a `WithWatermark` are the other `WithWatermark`s whose watermarks
meet its own in a `Union` or `Join` downstream (they feed another input of
it). After every epoch, a `WithWatermark` with `max_drift` whose watermark is
more than `max_drift` ahead of its slowest peer has the further epochs of
its sources held back: they are read one pipeline epoch later, and again,
until the peers catch up. So a source racing ahead does not fill the state
of the `Union`/`Join` (or what follows it) with rows the slow side's
watermark cannot yet release.

- A peer counts while it may still move: it is not idle
  (`idle_after`) and one of its sources has epochs left. A peer that has no
  watermark yet counts as the slowest of all.
- A source that feeds several `WithWatermark`s is held when any of them must
  wait.
- Progress: when every source with epochs left would be held, none is (two
  sources waiting on each other across different merges would otherwise
  wait forever).
- Epochs a source is held for do not count towards its `idle_after`.

Held epochs make the run longer than the longest source: the pipeline's
epoch `i` then holds a held source's epoch `j < i`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sparkbeam.errors import PipelineError
from sparkbeam.graph import Node
from sparkbeam.schema import type_name
from sparkbeam.transforms.join import Join
from sparkbeam.transforms.union import Union
from sparkbeam.transforms.watermark import WithWatermark


class AlignmentGraph:
    """Who holds back whom: each `max_drift` origin's peers and every `WithWatermark`'s
    sources; `held` applies the rule to watermarks a runner supplies (both runners)."""

    def __init__(
        self, drift: dict[int, int], peers: dict[int, set[int]], sources_of: dict[int, set[int]]
    ) -> None:
        self.drift = drift
        self.peers = peers
        self.sources_of = sources_of
        """For each `WithWatermark` node, the sources that feed it."""

    @classmethod
    def of(cls, nodes: Sequence[Node]) -> AlignmentGraph | None:
        """The alignment of a pipeline, or None when no `WithWatermark` has `max_drift`.

        Raises `PipelineError` when peers' time columns have different types.
        """
        drift: dict[int, int] = {}
        for node in nodes:
            transform = node.transform
            if isinstance(transform, WithWatermark) and transform.max_drift is not None:
                units = transform.drift_units(nodes[node.inputs[0]].info.schema, node.label)
                assert units is not None
                drift[node.id] = units
        if not drift:
            return None
        origins: list[set[int]] = []
        sources_of: list[set[int]] = []
        peers: dict[int, set[int]] = {node_id: set() for node_id in drift}
        for node in nodes:
            mine = set().union(*(origins[i] for i in node.inputs))
            feeds = set().union(*(sources_of[i] for i in node.inputs))
            if not node.inputs:
                feeds = {node.id}
            if isinstance(node.transform, WithWatermark):
                mine.add(node.id)
            origins.append(mine)
            sources_of.append(feeds)
            if isinstance(node.transform, (Union, Join)):
                for port, producer in enumerate(node.inputs):
                    others = set().union(
                        *(origins[p] for i, p in enumerate(node.inputs) if i != port)
                    )
                    for origin in origins[producer] & drift.keys():
                        peers[origin] |= others - {origin}
        for origin, group in peers.items():
            _same_types(nodes, origin, group)
        filters = [node.id for node in nodes if isinstance(node.transform, WithWatermark)]
        return cls(drift, peers, {f: sources_of[f] for f in filters})

    def held(
        self,
        running: set[int],
        watermark: Callable[[int], int | None],
        idle: Callable[[int], bool],
    ) -> set[int]:
        """The sources to hold back in the next epoch, of the `running` ones (with epochs left),
        given each `WithWatermark`'s current `watermark` (None: none yet) and `idle` status."""
        hold: set[int] = set()
        for origin, drift in self.drift.items():
            wm = watermark(origin)
            if wm is None:
                continue
            slowest = None
            unknown = False
            for peer in self.peers[origin]:
                if idle(peer) or not self.sources_of[peer] & running:
                    continue
                other = watermark(peer)
                if other is None:
                    unknown = True
                    break
                slowest = other if slowest is None else min(slowest, other)
            if unknown or (slowest is not None and wm - slowest > drift):
                hold |= self.sources_of[origin] & running
        if hold and running <= hold:
            return set()
        return hold


def _same_types(nodes: Sequence[Node], origin: int, peers: set[int]) -> None:
    node = nodes[origin]
    transform = node.transform
    assert isinstance(transform, WithWatermark)
    kind = node.info.schema.type_of(transform.column)
    for peer in sorted(peers):
        other = nodes[peer]
        other_transform = other.transform
        assert isinstance(other_transform, WithWatermark)
        other_kind = other.info.schema.type_of(other_transform.column)
        if other_kind is not kind:
            raise PipelineError(
                f"{node.label}: max_drift compares its watermark on {transform.column!r} "
                f"({type_name(kind)}) with that of {other.label} on {other_transform.column!r} "
                f"({type_name(other_kind)}), which meet downstream; they cannot be compared: "
                "use event times of one type on both, or drop max_drift"
            )
