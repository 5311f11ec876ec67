"""Watermark alignment on the direct runner: the filters' watermarks fed to the shared rule
(`runners.shared.alignment`), and the held sources' filters told so (`idle_after`)."""

from __future__ import annotations

from collections.abc import Sequence

from sparkbeam.graph import Node
from sparkbeam.runners.direct.operator import Operator
from sparkbeam.runners.direct.watermark import WatermarkFilter
from sparkbeam.runners.shared.alignment import AlignmentGraph


class Alignment:
    """Which sources to hold back after each epoch, from the filters' watermarks."""

    def __init__(self, graph: AlignmentGraph, filters: dict[int, WatermarkFilter]) -> None:
        self.graph = graph
        self.filters = filters

    @classmethod
    def of(cls, nodes: Sequence[Node], operators: Sequence[Operator]) -> Alignment | None:
        """The alignment of a pipeline, or None when no `WithWatermark` has `max_drift`."""
        graph = AlignmentGraph.of(nodes)
        if graph is None:
            return None
        filters = {
            node_id: operator
            for node_id, operator in enumerate(operators)
            if isinstance(operator, WatermarkFilter)
        }
        return cls(graph, filters)

    def held(self, running: set[int]) -> set[int]:
        """The sources to hold back in the next epoch, of the `running` ones (with epochs left)."""
        filters = self.filters
        return self.graph.held(running, lambda f: filters[f].wm, lambda f: filters[f].idle)

    def pause(self, held: set[int]) -> None:
        """Tell each filter whether its sources were held this epoch (for `idle_after`)."""
        for node_id, operator in self.filters.items():
            operator.paused = bool(held & self.graph.sources_of[node_id])
