"""The direct runner's executor: pushes messages through the graph, epoch by epoch.

Scheduling: for each pipeline epoch `i`, every source emits its chunks for
epoch `i`, then a barrier for `i`; after the last epoch, every source ends
(end of input: every watermark to +inf). A message is delivered depth-first
to every consumer of the edge it is on. An operator with several inputs gets
`on_barrier` and `on_end` once all of them have delivered the barrier (or
ended): barriers are aligned.

On every edge the executor checks invariant W (`checks.EdgeCheck`), and
records the rows and watermarks of the edges the user still holds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sparkbeam.graph import EdgeInfo, Node
from sparkbeam.messages import Watermark
from sparkbeam.runners.direct.checks import EdgeCheck, OrderCheck
from sparkbeam.runners.direct.operator import Chunk, Message, Operator, SourceOperator

OperatorFactory = Callable[[Node, Sequence[EdgeInfo]], Operator]


class EdgeRecord:
    """What one edge carried: chunks per epoch (the last list is the end-of-input flush)."""

    __slots__ = ("chunks", "watermarks")

    def __init__(self, epochs: int) -> None:
        self.chunks: list[list[Chunk]] = [[] for _ in range(epochs + 1)]
        self.watermarks: list[Watermark] = []


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
        for node in nodes:
            for port, producer in enumerate(node.inputs):
                self.consumers[producer].append((node.id, port))
        self.sources = [op for op in operators if isinstance(op, SourceOperator)]
        self.epochs = max((op.epoch_count for op in self.sources), default=0)
        self.records = {node_id: EdgeRecord(self.epochs) for node_id in recorded}
        self.checks = (
            [EdgeCheck(node.label, node.info.schema) for node in nodes]
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

    def deliver(self, edge: int, message: Message) -> None:
        checks = self.checks
        record = self.records.get(edge)
        if isinstance(message, Chunk):
            if message.size == 0:
                return
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
        else:
            if checks is not None:
                checks[edge].watermark(message)
            if record is not None:
                record.watermarks.append(message)
            for node_id, port in self.consumers[edge]:
                for out in self.operators[node_id].on_watermark(port, message):
                    self.deliver(node_id, out)

    def _aligned(self, node_id: int) -> bool:
        self.arrivals[node_id] += 1
        if self.arrivals[node_id] < len(self.nodes[node_id].inputs):
            return False
        self.arrivals[node_id] = 0
        return True

    def _barrier(self, edge: int, epoch: int) -> None:
        for node_id, _ in self.consumers[edge]:
            if self._aligned(node_id):
                for out in self.operators[node_id].on_barrier(epoch):
                    self.deliver(node_id, out)
                self._barrier(node_id, epoch)

    def _end(self, edge: int) -> None:
        for node_id, _ in self.consumers[edge]:
            if self._aligned(node_id):
                for out in self.operators[node_id].on_end():
                    self.deliver(node_id, out)
                self._end(node_id)
