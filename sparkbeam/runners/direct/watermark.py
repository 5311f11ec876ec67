"""Direct operator for `WithWatermark`: the watermark filter (rules in `transforms.watermark`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sparkbeam.graph import EdgeInfo, Node
from sparkbeam.messages import Watermark
from sparkbeam.runners.direct.operator import Chunk, Message, Operator
from sparkbeam.transforms.watermark import WithWatermark


class WatermarkFilter(Operator):
    """Drops rows below the watermark and rows with no event time; emits `W(column, wm)`.

    State: the watermark `wm` and the largest event time seen. Each chunk is
    filtered with the watermark from before it.
    """

    def __init__(self, node: Node, inputs: Sequence[EdgeInfo]) -> None:
        super().__init__(node, inputs)
        transform = node.transform
        assert isinstance(transform, WithWatermark)
        self.column = transform.column
        self.function = transform.watermark_function(inputs[0].schema)
        self.per_event = transform.emit == "event"
        self.wm: int | None = None
        self.upstream: Any = None
        self.max_time: int | None = None
        self.late_count = 0
        self.invalid_count = 0

    def on_chunk(self, port: int, chunk: Chunk) -> list[Message]:
        times = chunk.columns[self.column]
        if None in times:
            keep = [t is not None for t in times]
            kept = sum(keep)
            self.invalid_count += chunk.size - kept
            chunk = chunk.compress(keep, kept)
            times = chunk.columns[self.column]
            if not kept:
                return []
        if self.per_event:
            return self._per_event(chunk, times)
        wm = self.wm
        if wm is not None and min(times) < wm:
            keep = [t >= wm for t in times]
            kept = sum(keep)
            self.late_count += chunk.size - kept
            if not kept:
                return []
            chunk = chunk.compress(keep, kept)
            times = chunk.columns[self.column]
        top = max(times)
        if self.max_time is None or top > self.max_time:
            self.max_time = top
        return [chunk]

    def _per_event(self, chunk: Chunk, times: list[int]) -> list[Message]:
        out: list[Message] = []
        wm, function = self.wm, self.function
        kept: list[int] = []
        for index, t in enumerate(times):
            if wm is not None and t < wm:
                self.late_count += 1
                continue
            kept.append(index)
            candidate = function(t)
            if wm is None or candidate > wm:
                out.append(chunk.take(kept))
                kept = []
                wm = candidate
                out.extend(self._raise(wm))
        if kept:
            out.append(chunk.take(kept))
        self.wm = wm
        return out

    def _raise(self, wm: int) -> list[Message]:
        self.wm = wm
        upstream = self.upstream
        return self.watermarks([(self.column, wm if upstream is None else max(wm, upstream))])

    def on_barrier(self, epoch: int) -> list[Message]:
        if self.per_event or self.max_time is None:
            return []
        candidate = self.function(self.max_time)
        if self.wm is not None and candidate <= self.wm:
            return []
        return self._raise(candidate)

    def on_watermark(self, port: int, watermark: Watermark) -> list[Message]:
        if watermark.column != self.column:
            return self.watermarks([(watermark.column, watermark.value)])
        self.upstream = watermark.value
        own = self.wm
        return self.watermarks(
            [(self.column, self.upstream if own is None else max(own, self.upstream))]
        )
