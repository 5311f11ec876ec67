"""Direct operators for `Tumble` and `Hop` (rules in `transforms.windows`)."""

from __future__ import annotations

from collections.abc import Sequence

from sparkbeam.errors import DataError
from sparkbeam.graph import EdgeInfo, Node
from sparkbeam.runners.direct.operator import Chunk, Message, Operator
from sparkbeam.schema import columns_to_rows
from sparkbeam.time import earliest_hop_start
from sparkbeam.transforms.windows import WINDOW_END, WINDOW_START, Hop, Tumble, bounds_of


def require_times(operator: Operator, chunk: Chunk, column: str) -> list[int]:
    times = chunk.columns[column]
    if None in times:
        index = times.index(None)
        row = columns_to_rows(chunk.take([index]).columns, operator.inputs[0].schema)[0]
        raise DataError(
            f"{operator.label}: row {row!r} has no {column!r} (None), so it has no window; "
            f"drop such rows first (.with_watermark({column!r}, ...) drops and counts them, "
            "or use a Filter)",
            row,
        )
    return times


def require_bounds(
    operator: Operator,
    chunk: Chunk,
    starts: Sequence[int],
    size: int,
    indices: Sequence[int],
    kind: type,
) -> None:
    """A `DataError` naming the row whose window (`starts[i]`, of row `indices[i]`) has a
    bound its time column, of type `kind`, cannot hold (`bounds_of`: years 1 to 9999 for
    datetimes, 64 bits for integers)."""
    low, high, words = bounds_of(kind)
    if min(starts) >= low and max(starts) + size <= high:
        return
    i = next(i for i, start in enumerate(starts) if start < low or start + size > high)
    row = columns_to_rows(chunk.take([indices[i]]).columns, operator.inputs[0].schema)[0]
    raise DataError(f"{operator.label}: {words}. The row: {row!r}", row)


class TumbleOperator(Operator):
    def __init__(self, node: Node, inputs: Sequence[EdgeInfo]) -> None:
        super().__init__(node, inputs)
        assert isinstance(node.transform, Tumble)
        self.transform = node.transform
        self.spec = node.transform.spec(inputs[0].schema)
        self.kind = inputs[0].schema.type_of(node.transform.column)

    def on_chunk(self, port: int, chunk: Chunk) -> list[Message]:
        times = require_times(self, chunk, self.transform.column)
        size, offset = self.spec.size, self.spec.offset
        if offset:
            starts = [t - (t - offset) % size for t in times]
        else:
            starts = [t - t % size for t in times]
        if starts:
            require_bounds(self, chunk, starts, size, range(chunk.size), self.kind)
        columns = dict(chunk.columns)
        columns[WINDOW_START] = starts
        columns[WINDOW_END] = [s + size for s in starts]
        return [Chunk(columns, chunk.size)]


class HopOperator(Operator):
    def __init__(self, node: Node, inputs: Sequence[EdgeInfo]) -> None:
        super().__init__(node, inputs)
        assert isinstance(node.transform, Hop)
        self.transform = node.transform
        self.spec = node.transform.spec(inputs[0].schema)
        self.kind = inputs[0].schema.type_of(node.transform.column)

    def on_chunk(self, port: int, chunk: Chunk) -> list[Message]:
        times = require_times(self, chunk, self.transform.column)
        size, slide, offset = self.spec.size, self.spec.slide, self.spec.offset
        indices: list[int] = []
        starts: list[int] = []
        for index, t in enumerate(times):
            start = earliest_hop_start(t, size, slide, offset)
            while start <= t:
                indices.append(index)
                starts.append(start)
                start += slide
        if not indices:
            return []
        require_bounds(self, chunk, starts, size, indices, self.kind)
        out = chunk.take(indices)
        out.columns[WINDOW_START] = starts
        out.columns[WINDOW_END] = [s + size for s in starts]
        return [out]
