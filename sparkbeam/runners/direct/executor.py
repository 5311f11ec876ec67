"""The direct runner's executor: pushes messages through the graph, epoch by epoch.

Scheduling: for each pipeline epoch `i`, every source emits its chunks for
epoch `i`, then a barrier for `i`; after the last epoch, every source ends
(end of input: every watermark to +inf). A message is delivered depth-first
to every consumer of the edge it is on. An operator with several inputs gets
`on_barrier` and `on_end` once all of them have delivered the barrier (or
ended): barriers are aligned.

On every edge the executor checks invariant W (`checks.EdgeCheck`), and
records the rows and watermarks of the edges the user still holds. It counts
the rows on every edge and, per column with a watermark, the largest value
(for `result.metrics()`).

Dropped rows (`SideRows`) go only to the `DroppedRows` nodes reading that
kind from the edge's node, which get no other message but barriers and the
end of input; idleness (`Idleness`) goes to every other consumer.

With `max_drift` on some `WithWatermark` (`alignment`), sources no longer
advance together: after each epoch the executor may hold some back, a
source reads its next epoch only in an epoch it is not held, and the run
lasts until every source has read all of its epochs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sparkbeam.graph import EdgeInfo, Node
from sparkbeam.messages import Watermark
from sparkbeam.runners.direct.alignment import Alignment
from sparkbeam.runners.direct.checks import EdgeCheck, OrderCheck
from sparkbeam.runners.direct.operator import (
    Chunk,
    Idleness,
    Message,
    Operator,
    SideRows,
    SourceOperator,
)
from sparkbeam.transforms.late import DroppedRows, side_outputs

OperatorFactory = Callable[[Node, Sequence[EdgeInfo]], Operator]


class EdgeRecord:
    """What one edge carried: chunks per epoch (the last list is the end-of-input flush), and
    its watermarks with the epoch each came in."""

    __slots__ = ("chunks", "watermark_epochs", "watermarks")

    def __init__(self, epochs: int) -> None:
        self.chunks: list[list[Chunk]] = [[] for _ in range(epochs + 1)]
        self.watermarks: list[Watermark] = []
        self.watermark_epochs: list[int] = []


class EdgeCounters:
    """Rows on one edge, and the largest value of each column that may carry a watermark."""

    __slots__ = ("maxima", "rows")

    def __init__(self, watermarked: frozenset[str]) -> None:
        self.rows = 0
        self.maxima: dict[str, object] = dict.fromkeys(sorted(watermarked))

    def chunk(self, chunk: Chunk) -> None:
        self.rows += chunk.size
        maxima = self.maxima
        for column, top in maxima.items():
            values = chunk.columns[column]
            try:
                value = max(values)
            except TypeError:  # a None among the values
                present = [v for v in values if v is not None]
                if not present:
                    continue
                value = max(present)
            if top is None or value > top:
                maxima[column] = value


def connect_sides(nodes: Sequence[Node], operators: Sequence[Operator]) -> None:
    """Tell each operator which kinds of dropped rows some node reads from it."""
    for node_id, kinds in side_outputs(nodes).items():
        operators[node_id].sides = kinds


class Executor:
    def __init__(
        self,
        nodes: Sequence[Node],
        operators: Sequence[Operator],
        recorded: frozenset[int],
        check_invariants: bool,
    ) -> None:
        self.nodes = nodes
        self.operators = operators
        self.consumers: list[list[tuple[int, int]]] = [[] for _ in nodes]
        """Per edge, the consumers of its rows, watermarks and idleness: `(node, port)`."""
        self.side_consumers: list[list[tuple[int, str]]] = [[] for _ in nodes]
        """Per edge, the `DroppedRows` nodes reading its node's dropped rows: `(node, kind)`."""
        self.followers: list[list[int]] = [[] for _ in nodes]
        """Per edge, every consumer (barriers and the end of input go to all)."""
        for node in nodes:
            for port, producer in enumerate(node.inputs):
                transform = node.transform
                if isinstance(transform, DroppedRows):
                    self.side_consumers[producer].append((node.id, transform.kind))
                else:
                    self.consumers[producer].append((node.id, port))
                self.followers[producer].append(node.id)
        connect_sides(nodes, operators)
        self.sources = [op for op in operators if isinstance(op, SourceOperator)]
        self.epochs = max((op.epoch_count for op in self.sources), default=0)
        self.alignment = Alignment.of(nodes, [[op] for op in operators])
        self.counters = [EdgeCounters(node.info.watermarked) for node in nodes]
        self.records = {node_id: EdgeRecord(self.epochs) for node_id in recorded}
        self.checks = (
            [EdgeCheck(node.label, node.info.schema, node.info.updates) for node in nodes]
            if check_invariants
            else None
        )
        self.order_checks: dict[int, OrderCheck] = {}
        if check_invariants:
            for node in nodes:
                order = node.transform.output_order()
                if order is not None:
                    self.order_checks[node.id] = OrderCheck(
                        node.label, node.info.schema, order[0], order[1]
                    )
        self.peaks = [0] * len(nodes)
        self.arrivals = [0] * len(nodes)
        self.epoch = 0

    def run(self) -> None:
        if self.alignment is not None:
            self._run_aligned(self.alignment)
            return
        for epoch in range(self.epochs):
            self.epoch = epoch
            for source in self.sources:
                for chunk in source.epoch(epoch):
                    self.deliver(source.node.id, chunk)
            for source in self.sources:
                self._barrier(source.node.id, epoch)
        self.epoch = self.epochs
        for source in self.sources:
            self._end(source.node.id)
        self._ended()

    def _ended(self) -> None:
        """The input ended: the checks that hold only then."""
        for check in self.checks or ():
            check.end()

    def _run_aligned(self, alignment: Alignment) -> None:
        """Epochs until every source has read all of its own, some held back by `alignment`."""
        read = [0] * len(self.sources)
        held: set[int] = set()
        epoch = 0
        while any(n < source.epoch_count for n, source in zip(read, self.sources, strict=True)):
            self.epoch = epoch
            for record in self.records.values():
                if len(record.chunks) <= epoch + 1:
                    record.chunks.append([])
            for index, source in enumerate(self.sources):
                if source.node.id in held or read[index] >= source.epoch_count:
                    continue
                for chunk in source.epoch(read[index]):
                    self.deliver(source.node.id, chunk)
                read[index] += 1
            alignment.pause(held)
            for source in self.sources:
                self._barrier(source.node.id, epoch)
            running = {
                source.node.id
                for n, source in zip(read, self.sources, strict=True)
                if n < source.epoch_count
            }
            held = alignment.held(running)
            epoch += 1
        alignment.pause(set())
        self.epochs = self.epoch = epoch
        for source in self.sources:
            self._end(source.node.id)
        self._ended()

    def deliver(self, edge: int, message: Message) -> None:
        checks = self.checks
        record = self.records.get(edge)
        if isinstance(message, Chunk):
            if message.size == 0:
                return
            self.counters[edge].chunk(message)
            if checks is not None:
                checks[edge].chunk(message)
                if edge in self.order_checks:
                    self.order_checks[edge].chunk(message)
            if record is not None:
                record.chunks[self.epoch].append(message)
            for node_id, port in self.consumers[edge]:
                operator = self.operators[node_id]
                for out in operator.on_chunk(port, message):
                    self.deliver(node_id, out)
                state = operator.state_size()
                if state > self.peaks[node_id]:
                    self.peaks[node_id] = state
        elif isinstance(message, Watermark):
            if checks is not None:
                checks[edge].watermark(message)
            if record is not None:
                record.watermarks.append(message)
                record.watermark_epochs.append(self.epoch)
            for node_id, port in self.consumers[edge]:
                for out in self.operators[node_id].receive_watermark(port, message):
                    self.deliver(node_id, out)
        elif isinstance(message, SideRows):
            for node_id, kind in self.side_consumers[edge]:
                if kind == message.kind:
                    for out in self.operators[node_id].on_side(0, message):
                        self.deliver(node_id, out)
        else:
            self._status(edge, message)

    def _status(self, edge: int, status: Idleness) -> None:
        for node_id, port in self.consumers[edge]:
            for out in self.operators[node_id].on_status(port, status):
                self.deliver(node_id, out)

    def _aligned(self, node_id: int) -> bool:
        self.arrivals[node_id] += 1
        if self.arrivals[node_id] < len(self.nodes[node_id].inputs):
            return False
        self.arrivals[node_id] = 0
        return True

    def _barrier(self, edge: int, epoch: int) -> None:
        for node_id in self.followers[edge]:
            if self._aligned(node_id):
                for out in self.operators[node_id].on_barrier(epoch):
                    self.deliver(node_id, out)
                self._barrier(node_id, epoch)

    def _end(self, edge: int) -> None:
        for node_id in self.followers[edge]:
            if self._aligned(node_id):
                for out in self.operators[node_id].on_end():
                    self.deliver(node_id, out)
                self._end(node_id)
