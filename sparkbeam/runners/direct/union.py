"""Direct operator for `Union` (rules in `transforms.union`): the watermark merger."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sparkbeam.graph import EdgeInfo, Node
from sparkbeam.messages import Watermark
from sparkbeam.runners.direct.operator import Chunk, Message, Operator, Owner, lowest_of


class WatermarkMerger:
    """The latest watermark of each input per column; the output is their minimum.

    A column has an output watermark only once every input has given one.
    """

    def __init__(self, inputs: int, columns: frozenset[str]) -> None:
        self.latest: dict[str, list[Any]] = {column: [None] * inputs for column in columns}

    def update(self, port: int, watermark: Watermark) -> Any:
        """The merged value of the watermark's column after this input's new one (or None)."""
        values = self.latest.get(watermark.column)
        if values is None:
            return None
        values[port] = watermark.value
        if any(value is None for value in values):
            return None
        return min(values)


class UnionOperator(Operator):
    """Rows pass at once; watermarks through the merger.

    Checkpoint: the merger's latest watermark of each input. Rescale: each
    value becomes the minimum over the old units (None if one had none).
    """

    def __init__(self, node: Node, inputs: Sequence[EdgeInfo]) -> None:
        super().__init__(node, inputs)
        self.merger = WatermarkMerger(len(inputs), node.info.watermarked)

    def on_chunk(self, port: int, chunk: Chunk) -> list[Message]:
        return [chunk]

    def on_watermark(self, port: int, watermark: Watermark) -> list[Message]:
        merged = self.merger.update(port, watermark)
        return [] if merged is None else self.watermarks([(watermark.column, merged)])

    def snapshot(self) -> dict[str, list[Any]]:
        return {column: list(values) for column, values in self.merger.latest.items()}

    def restore(self, state: dict[str, list[Any]]) -> None:
        self.merger.latest = {column: list(values) for column, values in state.items()}

    def rescale(self, states: Sequence[Any], units: int, owner: Owner) -> list[Any]:
        inputs = len(self.inputs)
        merged = {
            column: [lowest_of(state[column][port] for state in states) for port in range(inputs)]
            for column in self.merger.latest
        }
        return [{column: list(values) for column, values in merged.items()} for _ in range(units)]
