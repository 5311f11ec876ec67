"""What flows on the direct runner's edges, and the base of its operators.

An edge carries `Chunk`s (a batch of rows, held as columns of internal
values: datetimes as integer microseconds) and `Watermark`s. Epoch barriers
and the end of input are delivered by the executor once every input of an
operator has reached them (aligned), through `on_barrier` and `on_end`.

Two more messages travel beside them:

- `SideRows(kind, chunk)`: rows the operator dropped (`"late"` or
  `"invalid"`). They are not on the edge's stream: the executor hands them
  only to the `DroppedRows` nodes reading that kind from the node
  (`on_side`), and an operator emits them only for the kinds in its `sides`.
- `Idleness` (`IDLE` / `ACTIVE`): the edge brings no rows for now, or brings
  them again (Flink's watermark status). A `WithWatermark` with `idle_after`
  starts it; an operator's output is idle when all its inputs are
  (`on_status`); `Union` and `Join` leave idle inputs out of the minimum.

Each operator is a small state machine with one handler per message kind;
it returns the messages it emits, in order.

Checkpoints (`runners.direct.checkpoint`): an operator whose state must
survive a failure implements `snapshot` (a copy of its state that later
changes do not touch) and `restore` (on a fresh operator; it copies again, so
one checkpoint can be restored more than once), and `rescale` (the states of
a different number of units from the old ones: keyed state goes to the unit
that now owns its key). The memory of the output watermarks already emitted
is saved by the runner for every operator (`emitted_watermarks`), and so is
its idleness (`idleness`) and the estimates it received and emitted (`estimates`).

Estimates (`Watermark.estimate`): the executors hand a watermark to an
operator through `receive_watermark`, which keeps its estimate per input and
column; whenever the operator emits a watermark value, the estimate beside it
is the node's rule evaluated on those estimates and merged over the inputs as
the value is (`estimate_of`), never below the value. So no operator computes
an estimate itself except the one that makes it (`WithWatermark`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from itertools import compress
from typing import Any

from sparkbeam.graph import EdgeInfo, Node
from sparkbeam.messages import Watermark


class Chunk:
    """A batch of rows as columns: `columns[name][i]` is row `i`'s value."""

    __slots__ = ("columns", "size")

    def __init__(self, columns: dict[str, list[Any]], size: int) -> None:
        self.columns = columns
        self.size = size

    @classmethod
    def from_rows(cls, names: Sequence[str], rows: Sequence[Sequence[Any]]) -> Chunk:
        """A chunk of `rows`, each a sequence of values in the order of `names`."""
        if not rows:
            return cls({name: [] for name in names}, 0)
        transposed = zip(*rows, strict=True)
        return cls(
            {name: list(values) for name, values in zip(names, transposed, strict=True)}, len(rows)
        )

    def take(self, indices: Sequence[int]) -> Chunk:
        """The rows at `indices`, in that order."""
        return Chunk(
            {name: [values[i] for i in indices] for name, values in self.columns.items()},
            len(indices),
        )

    def compress(self, keep: Sequence[bool], kept: int) -> Chunk:
        """The rows where `keep` is true (`kept` of them)."""
        return Chunk(
            {name: list(compress(values, keep)) for name, values in self.columns.items()}, kept
        )

    def row(self, index: int) -> dict[str, Any]:
        return {name: values[index] for name, values in self.columns.items()}

    def rows(self) -> Iterable[dict[str, Any]]:
        names = list(self.columns)
        for values in zip(*self.columns.values(), strict=True):
            yield dict(zip(names, values, strict=True))


class SideRows:
    """Rows an operator dropped, of one `kind` (`"late"`, `"invalid"`), for `DroppedRows`."""

    __slots__ = ("chunk", "kind")

    def __init__(self, kind: str, chunk: Chunk) -> None:
        self.kind = kind
        self.chunk = chunk


class Idleness:
    """The status of an edge: idle (no rows for now) or active again."""

    __slots__ = ("idle",)

    def __init__(self, idle: bool) -> None:
        self.idle = idle

    def __repr__(self) -> str:
        return "IDLE" if self.idle else "ACTIVE"


IDLE = Idleness(True)
ACTIVE = Idleness(False)

Message = Chunk | Watermark | SideRows | Idleness

Owner = Callable[[tuple[Any, ...]], int]
"""The unit (an index) that owns a key, given as the tuple of its partitioning columns' values."""


class Operator:
    """One transform's state machine on the direct runner."""

    sides: frozenset[str] = frozenset()
    """The kinds of dropped rows some node reads from this one (set by the executor)."""

    def __init__(self, node: Node, inputs: Sequence[EdgeInfo]) -> None:
        self.node = node
        self.label = node.label
        self.inputs = inputs
        self._emitted: dict[str, Any] = {}
        self._emitted_estimates: dict[str, Any] = {}
        self._estimates_in: dict[tuple[int, str], Any] = {}
        """The latest estimate received per (input port, column)."""
        self._idle_inputs = [False] * len(inputs)
        self.idle = False
        """Whether the output is idle (the last status emitted)."""

    def on_chunk(self, port: int, chunk: Chunk) -> list[Message]:
        return [chunk]

    holds_watermarks = False
    """Whether `on_watermark` only holds a watermark, applied at the barrier: such an
    operator keeps the estimate itself when it applies it (`note_estimate`), so the
    estimates it merges are those of the values it merges."""

    def receive_watermark(self, port: int, watermark: Watermark) -> list[Message]:
        """What the executors call: keep the watermark's estimate, then `on_watermark`."""
        if not self.holds_watermarks:
            self.note_estimate(port, watermark)
        return self.on_watermark(port, watermark)

    def note_estimate(self, port: int, watermark: Watermark) -> None:
        self._estimates_in[(port, watermark.column)] = watermark.estimate

    def on_watermark(self, port: int, watermark: Watermark) -> list[Message]:
        return self.watermarks(self.derive(watermark.column, watermark.value))

    def on_side(self, port: int, rows: SideRows) -> list[Message]:
        """Rows the producer of input `port` dropped (only `DroppedRows` reads them)."""
        return []

    def on_status(self, port: int, status: Idleness) -> list[Message]:
        """Input `port` went idle or active; the output is idle when every input is."""
        self._idle_inputs[port] = status.idle
        return self.status(all(self._idle_inputs))

    def inputs_idle(self, ports: Sequence[int]) -> list[Message]:
        """Inputs `ports` are idle now; the output's status if that changes it."""
        if not ports:
            return []
        for port in ports:
            self._idle_inputs[port] = True
        return self.status(all(self._idle_inputs))

    def status(self, idle: bool) -> list[Message]:
        """The status message when the output's idleness changes, else nothing."""
        if idle == self.idle:
            return []
        self.idle = idle
        return [IDLE if idle else ACTIVE]

    def on_barrier(self, epoch: int) -> list[Message]:
        """All inputs finished epoch `epoch`."""
        return []

    def on_end(self) -> list[Message]:
        """All inputs ended: every watermark is now +inf; flush what is held."""
        return []

    def derive(self, column: str, value: Any) -> list[tuple[str, Any]]:
        """The output watermarks an input watermark gives: the transform's rule
        (`Node.rule`, `sparkbeam.derivation`), evaluated."""
        return self.node.rule.derive(column, value)

    def state_size(self) -> int:
        """Rows or groups held: what the watermark must release."""
        return 0

    def snapshot(self) -> Any:
        """A copy of the state a checkpoint keeps (None: the operator holds nothing)."""
        return None

    def restore(self, state: Any) -> None:
        """Take back, on a fresh operator, the state `snapshot` gave (copying it)."""

    def rescale(self, states: Sequence[Any], units: int, owner: Owner) -> list[Any]:
        """The states of `units` new units from the `states` of the old ones.

        Called on a fresh operator of the same node. Keyed state moves to
        `owner(key)`, the unit the exchange now sends that key to. Stateless
        operators need nothing; a stateful one that does not implement this
        cannot be rescaled.
        """
        if any(state is not None for state in states):
            raise NotImplementedError(f"{self.label}: {type(self).__name__} cannot be rescaled")
        return [None] * units

    def idleness(self) -> tuple[bool, tuple[bool, ...]]:
        """Whether the output is idle, and each input (saved by the runner at checkpoints)."""
        return self.idle, tuple(self._idle_inputs)

    def restore_idleness(self, state: tuple[bool, tuple[bool, ...]]) -> None:
        self.idle, inputs = state
        self._idle_inputs = list(inputs)

    def emitted_watermarks(self) -> dict[str, Any]:
        """The last watermark emitted on each column (what `watermarks` compares with)."""
        return dict(self._emitted)

    def restore_emitted_watermarks(self, emitted: dict[str, Any]) -> None:
        self._emitted = dict(emitted)

    def estimates(self) -> tuple[dict[str, Any], dict[tuple[int, str], Any]]:
        """The estimates emitted per column and received per (port, column) (for checkpoints)."""
        return dict(self._emitted_estimates), dict(self._estimates_in)

    def restore_estimates(
        self, state: tuple[dict[str, Any], dict[tuple[int, str], Any]] | None
    ) -> None:
        if state is not None:
            self._emitted_estimates, self._estimates_in = dict(state[0]), dict(state[1])

    def estimate_inputs(self) -> tuple[Sequence[bool], bool]:
        """Which inputs are left out of the estimate's merge (idle), and whether it takes the
        maximum (`policy="max"`); `Union` and `Join` answer from their merger."""
        return self._idle_inputs, False

    def estimate_of(self, column: str, value: Any) -> Any:
        """The estimate beside output watermark `value` on `column`: the rule on each input's
        estimate, merged over the inputs that are not idle (the minimum, or the maximum), never
        below `value`. `value` itself where an input has none, or the rule caps `column` by
        rows held (`Derived.held`)."""
        idle, highest = self.estimate_inputs()
        ports = [port for port in range(len(self.inputs)) if not idle[port]]
        rules = [d for d in self.node.rule.derived if d.column == column]
        if not ports or not rules or any(d.held for d in rules):
            return value
        per_port = []
        for port in ports:
            found = [
                d.apply(self._estimates_in[(port, d.source)])
                for d in rules
                if (port, d.source) in self._estimates_in
            ]
            if found:
                per_port.append(max(found))
            elif not highest:
                return value
        if not per_port:
            return value
        merged = max(per_port) if highest else min(per_port)
        return merged if merged > value else value

    def watermarks(self, pairs: Iterable[tuple[str, Any]]) -> list[Message]:
        """`Watermark` messages for `pairs` with their estimates (`estimate_of`), skipping
        those that raise neither the column's value nor its estimate."""
        out: list[Message] = []
        for column, value in pairs:
            estimate = self.estimate_of(column, value)
            last = self._emitted.get(column)
            last_estimate = self._emitted_estimates.get(column)
            if last is not None and value < last:
                continue
            if (
                last is None
                or value > last
                or (last_estimate is not None and estimate > last_estimate)
            ):
                self._emitted[column] = value
                if last_estimate is not None and estimate < last_estimate:
                    estimate = last_estimate
                self._emitted_estimates[column] = estimate
                out.append(Watermark(column, value, estimate))
        return out


class SourceOperator(Operator):
    """An input: produces the chunks of each epoch."""

    epoch_count: int = 1

    def epoch(self, epoch: int) -> Iterable[Chunk]:
        raise NotImplementedError


def lowest_of(values: Iterable[Any]) -> Any:
    """The smallest value, or None when any is None: the watermark every old unit promised."""
    listed = list(values)
    if not listed or any(value is None for value in listed):
        return None
    return min(listed)


def highest_of(values: Iterable[Any]) -> Any:
    """The largest value that is not None (None when there is none)."""
    present = [value for value in values if value is not None]
    return max(present) if present else None
