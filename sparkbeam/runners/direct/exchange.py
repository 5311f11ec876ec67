"""The exchange between parallel units: dispatchers route rows, mergers merge watermarks.

RisingWave's design. An exchange sits before every transform that keeps
state per key (`CombinePerKey`, `Session`, `Join`, `Sort`, and `WriteFiles`,
which gathers everything in one unit):

- **Dispatcher** (one per producing unit and consuming edge): a row goes to
  the unit that owns its key, `owner(key) = stable_hash(key) % units`, the key
  being the tuple of the consumer's partitioning columns (a consumer with no
  key columns runs as one unit and gets every row). Watermarks, barriers and
  the end of input go to every consumer unit (broadcast). Between transforms
  with different numbers of units and no key, all the rows of producing unit
  `j` go to consuming unit `j % units`.
- **Merger** (one per consuming unit and input port): rows are forwarded at
  once. Watermarks are buffered, one queue per input and column; once every
  queue of a column holds a value, the minimum is taken off (from every queue
  whose head equals it) and this repeats while every queue holds one; the
  last minimum taken is emitted when it raises the column. Barriers are
  aligned by the unit (`parallel.ParallelExecutor`).

Because every consumer unit gets the same watermarks from every producer,
every merger behind one exchange reaches the same value by each barrier: the
global watermark (checked by `checks.GlobalWatermarkCheck`).

`stable_hash` does not use Python's `hash` for strings and bytes (it is
salted per process), so a key goes to the same unit in every run.
"""

from __future__ import annotations

import zlib
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sparkbeam.messages import Watermark
from sparkbeam.runners.direct.operator import ACTIVE, IDLE, Chunk, Idleness

_MASK = (1 << 64) - 1


def _mix(x: int) -> int:
    """SplitMix64's finalizer: spreads the bits of `x` over the whole word."""
    x &= _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def _value_hash(value: Any) -> int:
    if value is None:
        return 0x9E3779B97F4A7C15
    if isinstance(value, (int, float)):  # equal numbers (1, 1.0, True) hash alike
        return hash(value) if value == value else 0x7FF8  # every NaN in one place
    if isinstance(value, str):
        return zlib.crc32(value.encode("utf-8", "surrogatepass"))
    if isinstance(value, bytes):
        return zlib.crc32(value)
    if isinstance(value, tuple):
        return stable_hash(value)
    return zlib.crc32(repr(value).encode("utf-8", "backslashreplace"))


def stable_hash(key: tuple[Any, ...]) -> int:
    """A hash of a key tuple that is the same in every process (equal keys hash alike)."""
    h = 0x345678
    for value in key:
        h = _mix(h * 1_000_003 + _value_hash(value))
    return _mix(h)


def owner_of(key: tuple[Any, ...], units: int) -> int:
    """The unit that owns `key` among `units`."""
    return stable_hash(key) % units if units > 1 else 0


class Route:
    """Where a producing unit's chunks go: a list of `(consumer unit, part of the chunk)`."""

    def split(self, chunk: Chunk) -> list[tuple[int, Chunk]]:
        raise NotImplementedError


class FixedRoute(Route):
    """Every row to one unit: a forward edge, or the spread between unequal unit counts."""

    __slots__ = ("target",)

    def __init__(self, target: int) -> None:
        self.target = target

    def split(self, chunk: Chunk) -> list[tuple[int, Chunk]]:
        return [(self.target, chunk)]


class KeyRoute(Route):
    """Each row to the unit that owns its values in `columns`."""

    __slots__ = ("columns", "units")

    def __init__(self, columns: Sequence[str], units: int) -> None:
        self.columns = tuple(columns)
        self.units = units

    def split(self, chunk: Chunk) -> list[tuple[int, Chunk]]:
        units = self.units
        if units == 1 or not self.columns:
            return [(owner_of((), units), chunk)]
        parts: dict[int, list[int]] = {}
        keys = zip(*(chunk.columns[column] for column in self.columns), strict=True)
        for index, key in enumerate(keys):
            parts.setdefault(owner_of(key, units), []).append(index)
        if len(parts) == 1:
            return [(next(iter(parts)), chunk)]
        return [(unit, chunk.take(indices)) for unit, indices in sorted(parts.items())]


class Merger:
    """Buffered watermarks: a queue per input and column; the minimum once every queue holds one.

    Statuses: the port is idle when every producing unit is (`on_status`).
    The units of one node share their idleness at barriers (a filter's units
    decide it together), so no idle unit holds the others' watermarks back.

    State: the queues, the last value emitted per column (the global
    watermark of this input port) and each producing unit's status.
    """

    __slots__ = ("emitted", "estimates", "idle", "inputs", "queues")

    def __init__(self, inputs: int, emitted: dict[str, Any] | None = None) -> None:
        self.inputs = inputs
        self.queues: dict[str, list[deque[Any]]] = {}
        self.emitted: dict[str, Any] = dict(emitted or {})
        self.estimates: dict[str, Any] = {}
        """The estimate last emitted beside each column's value (`Watermark.estimate`)."""
        self.idle = [False] * inputs

    def on_status(self, source: int, status: Idleness) -> Idleness | None:
        """The port's new status when producing unit `source`'s changes it, else None."""
        before = all(self.idle)
        self.idle[source] = status.idle
        after = all(self.idle)
        if after == before:
            return None
        return IDLE if after else ACTIVE

    def on_watermark(self, source: int, watermark: Watermark) -> Watermark | None:
        """The merged watermark this input's new one lets out, if it raises the column."""
        column = watermark.column
        queues = self.queues.get(column)
        if queues is None:
            queues = self.queues[column] = [deque() for _ in range(self.inputs)]
        queues[source].append((watermark.value, watermark.estimate))
        low = low_estimate = None
        while all(queues):
            low = min(queue[0][0] for queue in queues)
            low_estimate = min(queue[0][1] for queue in queues)
            for queue in queues:
                if queue[0][0] == low:
                    queue.popleft()
        last = self.emitted.get(column)
        last_estimate = self.estimates.get(column)
        if low is None or (last is not None and low < last):
            return None
        estimate_rises = (
            last_estimate is not None and low_estimate is not None and low_estimate > last_estimate
        )
        if last is not None and low == last and not estimate_rises:
            return None
        self.emitted[column] = low
        self.estimates[column] = low_estimate
        return Watermark(column, low, low_estimate)

    def snapshot(self) -> MergerState:
        queues = {column: [tuple(queue) for queue in qs] for column, qs in self.queues.items()}
        return MergerState(
            self.inputs, queues, dict(self.emitted), tuple(self.idle), dict(self.estimates)
        )

    def restore(self, state: MergerState) -> None:
        """Take back a saved state; from another number of inputs only the emitted values
        and, for every new input, whether all the old ones were idle.

        (The queues belonged to producing units that are gone after a rescale.)
        """
        self.emitted = dict(state.emitted)
        self.estimates = dict(state.estimates)
        if state.inputs == self.inputs:
            self.queues = {c: [deque(queue) for queue in qs] for c, qs in state.queues.items()}
            self.idle = list(state.idle)
        else:
            self.idle = [bool(state.idle) and all(state.idle)] * self.inputs


@dataclass(frozen=True)
class MergerState:
    inputs: int
    queues: dict[str, list[tuple[Any, ...]]]
    emitted: dict[str, Any]
    idle: tuple[bool, ...] = ()
    estimates: dict[str, Any] = field(default_factory=dict)
