"""Watermark alignment on the direct runner: the filters' watermarks fed to the shared rule
(`runners.shared.alignment`), and the held sources' filters told so (`idle_after`).

With parallel units a filter's watermark is the lowest of its units' (with
`emit="periodic"` they are all the same, `WatermarkFilter.agree`) and it is
idle when all its units are (they decide idleness together).
"""

from __future__ import annotations

from collections.abc import Sequence

from sparkbeam.graph import Node
from sparkbeam.runners.direct.operator import Operator, lowest_of
from sparkbeam.runners.direct.watermark import WatermarkFilter
from sparkbeam.runners.shared.alignment import AlignmentGraph


class Alignment:
    """Which sources to hold back after each epoch, from the filters' watermarks."""

    def __init__(self, graph: AlignmentGraph, filters: dict[int, list[WatermarkFilter]]) -> None:
        self.graph = graph
        self.filters = filters
        """Each `WithWatermark` node's filters, one per unit."""

    @classmethod
    def of(cls, nodes: Sequence[Node], operators: Sequence[Sequence[Operator]]) -> Alignment | None:
        """The alignment of a pipeline (each node's operators, one per unit), or None when no
        `WithWatermark` has `max_drift`."""
        graph = AlignmentGraph.of(nodes)
        if graph is None:
            return None
        return cls(graph, filters_of(operators))

    def held(self, running: set[int]) -> set[int]:
        """The sources to hold back in the next epoch, of the `running` ones (with epochs left)."""
        filters = self.filters
        return self.graph.held(
            running,
            lambda f: lowest_of(unit.wm for unit in filters[f]),
            lambda f: all(unit.idle for unit in filters[f]),
        )

    def pause(self, held: set[int]) -> None:
        """Tell each filter whether its sources were held this epoch (for `idle_after`)."""
        for node_id, units in self.filters.items():
            paused = bool(held & self.graph.sources_of[node_id])
            for unit in units:
                unit.paused = paused

    def pause_filter(self, node_id: int, held: set[int]) -> None:
        """`pause` for one filter's units, as they end an epoch in which `held` were held."""
        paused = bool(held & self.graph.sources_of[node_id])
        for unit in self.filters[node_id]:
            unit.paused = paused


def filters_of(operators: Sequence[Sequence[Operator]]) -> dict[int, list[WatermarkFilter]]:
    """Each `WithWatermark` node's filters, from every node's operators (one per unit)."""
    return {
        node_id: [unit for unit in units if isinstance(unit, WatermarkFilter)]
        for node_id, units in enumerate(operators)
        if units and isinstance(units[0], WatermarkFilter)
    }
