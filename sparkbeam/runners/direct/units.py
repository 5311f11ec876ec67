"""The parts of a parallel run: units, their channels and outputs, and how many of each.

`Layout.of` decides how many units each node runs as and where exchanges go
(rules in `runners.direct.parallel`); a `Unit` holds one operator instance,
its input `Channel`s (FIFO, one per producing unit), a `Merger` per exchange
input and an `Output` per consuming edge (the dispatcher's route and the
consumer units' channels). A `SourceUnit` reads its share of each epoch.
`UnitsRecord` keeps what the units of one recorded node emitted, tagged
with the epoch it belongs to, so that a restore can drop what came after
its checkpoint.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from sparkbeam.graph import Node
from sparkbeam.messages import Watermark
from sparkbeam.runners.direct.checks import EdgeCheck, OrderCheck
from sparkbeam.runners.direct.exchange import Merger, Route
from sparkbeam.runners.direct.executor import EdgeRecord
from sparkbeam.runners.direct.operator import Chunk, Idleness, Operator, SourceOperator
from sparkbeam.runners.direct.reading import Reading
from sparkbeam.updates import ON_TIME, PANE_IS_LAST, PANE_TIMING


@dataclass(frozen=True)
class Barrier:
    """The end of epoch `epoch` on a channel."""

    epoch: int


class EndOfInput:
    """The end of input on a channel: every watermark is +inf; flush."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "END"


END = EndOfInput()
Signal = Chunk | Watermark | Idleness | Barrier | EndOfInput


@dataclass(frozen=True)
class Layout:
    """How many units each node runs as, and which of them sit behind an exchange."""

    parallelism: int
    units: tuple[int, ...]
    keys: tuple[tuple[str, ...] | None, ...]

    @classmethod
    def of(cls, nodes: Sequence[Node], parallelism: int) -> Layout:
        units: list[int] = []
        keys: list[tuple[str, ...] | None] = []
        for node in nodes:
            key = node.transform.partition_keys()
            if not node.inputs:
                count = parallelism
            elif key is not None:
                count = parallelism if key else 1
            else:
                count = max(units[i] for i in node.inputs)
            units.append(count)
            keys.append(key)
        return cls(parallelism, tuple(units), tuple(keys))

    def exchange(self, producer: int, consumer: int) -> bool:
        return self.keys[consumer] is not None or self.units[producer] != self.units[consumer]


class Candidates:
    """The units that may be able to take a step: a set with uniform random choice.

    Kept in a list (swap-remove) so that a run is reproducible from its seed.
    """

    __slots__ = ("items", "positions")

    def __init__(self) -> None:
        self.items: list[Unit] = []
        self.positions: dict[Unit, int] = {}

    def add(self, unit: Unit) -> None:
        if unit not in self.positions:
            self.positions[unit] = len(self.items)
            self.items.append(unit)

    def remove(self, unit: Unit) -> None:
        position = self.positions.pop(unit)
        last = self.items.pop()
        if last is not unit:
            self.items[position] = last
            self.positions[last] = position


class Channel:
    """One input of a unit: the messages of one producing unit, in order.

    A message put in adds the consuming unit to `pending` (when given), the
    units the random schedule chooses from.
    """

    __slots__ = ("blocked", "pending", "port", "queue", "source", "unit")

    def __init__(
        self,
        port: int,
        source: int,
        unit: Unit | None = None,
        pending: Candidates | None = None,
    ) -> None:
        self.port = port
        self.source = source
        self.unit = unit
        self.pending = pending
        self.queue: deque[Signal] = deque()
        self.blocked = False

    def put(self, signal: Signal) -> None:
        self.queue.append(signal)
        if self.pending is not None and self.unit is not None:
            self.pending.add(self.unit)


class Output:
    """One consuming edge of a unit: the dispatcher's route and the consumer units' channels.

    `side`: the kind of dropped rows the consumer reads (a `DroppedRows`
    node), which then gets those rows as its chunks and no watermark; None
    for every other consumer.
    """

    __slots__ = ("route", "side", "targets")

    def __init__(self, route: Route, targets: list[Channel], side: str | None = None) -> None:
        self.route = route
        self.targets = targets
        self.side = side

    def send(self, chunk: Chunk) -> None:
        targets = self.targets
        for unit, part in self.route.split(chunk):
            targets[unit].put(part)

    def broadcast(self, signal: Signal) -> None:
        for channel in self.targets:
            channel.put(signal)


class Unit:
    """One parallel instance of a node: its operator, input channels, mergers and outputs."""

    def __init__(self, node: Node, index: int, count: int, operator: Operator) -> None:
        self.node = node
        self.index = index
        self.count = count
        self.operator = operator
        self.channels: list[Channel] = []
        ports = len(node.inputs)
        self.mergers: list[Merger | None] = [None] * ports
        self.merged_checks: list[EdgeCheck | None] = [None] * ports
        self.outputs: list[Output] = []
        self.deferred: list[tuple[int, Watermark | Idleness]] | None = [] if ports > 1 else None
        """A merging unit's watermarks and statuses of the epoch, applied when it aligns the
        barrier (`parallel.ParallelExecutor`); None for a unit with one input."""
        self.check: EdgeCheck | None = None
        self.order_check: OrderCheck | None = None
        self.epoch = 0
        self.waiting = 0
        self.done = False
        self.state = 0

    @property
    def name(self) -> str:
        return f"{self.node.label} (unit {self.index} of {self.count})"

    def open_channels(self) -> list[Channel]:
        return [channel for channel in self.channels if channel.queue and not channel.blocked]


class SourceUnit(Unit):
    """A source's unit: its share of each epoch's rows, then the epoch's barrier.

    Which epoch of its own it reads in each pipeline epoch: `reading.Reading`.
    """

    def __init__(self, node: Node, index: int, count: int, operator: Operator) -> None:
        super().__init__(node, index, count, operator)
        assert isinstance(operator, SourceOperator)
        self.source = operator
        self.pending: Iterator[Chunk] | None = None

    def ready(self, reading: Reading) -> bool:
        """Whether this unit can take a step: not done, and what it does in its epoch known."""
        return not self.done and (self.pending is not None or reading.known(self.epoch))

    def next_signal(self, reading: Reading) -> Signal:
        """The next chunk of this unit's share, the barrier ending the epoch, or `END`."""
        if self.pending is None:
            if reading.ends_at(self.epoch):
                return END
            own = reading.reads(self.node.id, self.epoch)
            self.pending = self._share(self.source.epoch(own) if own is not None else ())
        chunk = next(self.pending, None)
        if chunk is None:
            self.pending = None
            return Barrier(self.epoch)
        return chunk

    def _share(self, chunks: Iterable[Chunk]) -> Iterator[Chunk]:
        seen, index, count = 0, self.index, self.count
        for chunk in chunks:
            if count == 1:
                if chunk.size:
                    yield chunk
                continue
            mine = range((index - seen) % count, chunk.size, count)
            seen += chunk.size
            if len(mine):
                yield chunk.take(mine)


class UnitsRecord:
    """What the units of one recorded node emitted, tagged with the epoch it belongs to.

    On an update stream (`updates`), each epoch lists the rows every unit made
    in step 1 (a touched group's update) before those of step 2 (a closing
    row: `"ON_TIME"` or last), as one unit does.
    """

    def __init__(self, epochs: int, units: int, updates: bool = False) -> None:
        self.chunks: list[list[Chunk]] = [[] for _ in range(epochs + 1)]
        """Per epoch (grown as epochs come: with `max_drift` their number is not known)."""
        self.units = units
        self.updates = updates
        self.events: list[tuple[int, int, Any]] = []
        """`(epoch, unit, Watermark)`, or `(epoch, -1, units)` where the unit count changed."""

    def truncate(self, epoch: int) -> None:
        """Forget what came after checkpoint `epoch` (it will be replayed)."""
        for later in self.chunks[epoch + 1 :]:
            later.clear()
        self.events = [event for event in self.events if event[0] <= epoch]

    def epoch(self, epoch: int) -> list[Chunk]:
        """The chunks of `epoch`."""
        chunks = self.chunks
        while len(chunks) <= epoch:
            chunks.append([])
        return chunks[epoch]

    def finish(self, epochs: int) -> EdgeRecord:
        """The node's edge as one: its rows per epoch, and the units' watermarks merged as an
        exchange would merge them, epoch by epoch (every unit's watermarks of an epoch before
        any of the next: a unit running ahead must not hide the value the epoch ended on)."""
        self.epoch(epochs)
        record = EdgeRecord(epochs)
        record.chunks = self.chunks[: epochs + 1]
        if self.updates:
            record.chunks = [updates_first(chunks) for chunks in record.chunks]
        merger = Merger(self.units)
        for epoch, unit, item in sorted(self.events, key=lambda event: event[0]):
            if unit < 0:
                merger = Merger(item, merger.emitted)
                continue
            merged = merger.on_watermark(unit, item)
            if merged is not None:
                record.watermarks.append(merged)
                record.watermark_epochs.append(epoch)
        return record


def updates_first(chunks: Sequence[Chunk]) -> list[Chunk]:
    """An epoch's chunks of an update stream: the step-1 rows of all of them, then the step-2
    rows (`"ON_TIME"` or `pane_is_last`), each part in the order given."""
    first: list[Chunk] = []
    second: list[Chunk] = []
    for chunk in chunks:
        closing = [
            timing == ON_TIME or last
            for timing, last in zip(
                chunk.columns[PANE_TIMING], chunk.columns[PANE_IS_LAST], strict=True
            )
        ]
        count = sum(closing)
        if count < chunk.size:
            first.append(chunk.compress([not c for c in closing], chunk.size - count))
        if count:
            second.append(chunk.compress(closing, count))
    return first + second
