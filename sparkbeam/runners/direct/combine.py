"""Direct operator for `CombinePerKey` (rules in `transforms.combine`).

State: the open groups (in arrival order), each with a slot, one
accumulator table per aggregate (a list indexed by slot), and for each
watermarked key column a heap of the values that open groups hold in it.
`W(c, wm)` on a key column releases every group whose value in `c` is
`< wm`, then passes on; the end of input releases the rest.

Checkpoint: the open groups in arrival order, each with its accumulators
(the heaps are rebuilt on restore). Rescale: each group goes to the unit
that owns its key.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Iterable, Sequence
from itertools import repeat
from typing import Any

from sparkbeam.graph import EdgeInfo, Node
from sparkbeam.messages import Watermark
from sparkbeam.runners.direct.operator import Chunk, Message, Operator, Owner
from sparkbeam.runners.shared.accumulators import accumulators_for
from sparkbeam.schema import one_nan_in
from sparkbeam.transforms.combine import CombinePerKey

Key = Hashable


class CombineOperator(Operator):
    def __init__(self, node: Node, inputs: Sequence[EdgeInfo]) -> None:
        super().__init__(node, inputs)
        transform = node.transform
        assert isinstance(transform, CombinePerKey)
        self.transform = transform
        self.keys = transform.keys
        self.names = [name for name, _ in transform.aggregates]
        schema = inputs[0].schema
        self.float_keys = [key for key in self.keys if schema.type_of(key) is float]
        out = node.info.schema
        self.tables = [
            accumulators_for(aggregate, schema, out.type_of(name), f"{node.label} {name}")
            for name, aggregate in transform.aggregates
        ]
        self.groups: dict[Key, int] = {}
        """The open groups, in arrival order, each with its slot in the tables."""
        self.free: list[int] = []
        self.slot_count = 0
        """Slots handed out so far (the tables have at least that many)."""
        self.positions = {key: i for i, key in enumerate(self.keys)}
        self.heaps: dict[str, list[Any]] = {c: [] for c in self.keys if c in inputs[0].watermarked}
        self.waiting: dict[str, dict[Any, list[Key]]] = {c: {} for c in self.heaps}

    def _key_values(self, key: Key, column: str) -> Any:
        if len(self.keys) == 1:
            return key
        assert isinstance(key, tuple)
        return key[self.positions[column]]

    def _keys(self, chunk: Chunk) -> Iterable[Key]:
        """Each row's key, as an iterator: a tuple made and looked up at once is cheap."""
        columns = one_nan_in(chunk.columns, self.float_keys)
        key_columns = [columns[k] for k in self.keys]
        if len(key_columns) == 1:
            return key_columns[0]
        if key_columns:
            return zip(*key_columns, strict=True)
        return repeat((), chunk.size)

    def on_chunk(self, port: int, chunk: Chunk) -> list[Message]:
        groups = self.groups
        try:
            slots = list(map(groups.__getitem__, self._keys(chunk)))
        except KeyError:  # rows of groups not open yet
            self._open([key for key in dict.fromkeys(self._keys(chunk)) if key not in groups])
            slots = list(map(groups.__getitem__, self._keys(chunk)))
        for table in self.tables:
            table.add(slots, chunk.columns)
        return []

    def _open(self, new: list[Key]) -> None:
        """Open groups for the keys `new` (none of them open yet)."""
        groups, free = self.groups, self.free
        for key in new:
            if free:
                groups[key] = free.pop()
            else:
                groups[key] = self.slot_count
                self.slot_count += 1
            for column, waiting in self.waiting.items():
                value = self._key_values(key, column)
                if value in waiting:
                    waiting[value].append(key)
                else:
                    waiting[value] = [key]
                    heapq.heappush(self.heaps[column], value)
        for table in self.tables:
            table.ensure(self.slot_count)

    def on_watermark(self, port: int, watermark: Watermark) -> list[Message]:
        column, mark = watermark.column, watermark.value
        out: list[Message] = []
        if column in self.heaps:
            heap, waiting = self.heaps[column], self.waiting[column]
            released: list[Key] = []
            while heap and heap[0] < mark:
                released.extend(k for k in waiting.pop(heapq.heappop(heap)) if k in self.groups)
            if released:
                out.append(self._emit(released))
        return out + self.watermarks(self.derive(column, mark))

    def on_end(self) -> list[Message]:
        if not self.groups:
            return []
        chunk = self._emit(list(self.groups))
        for heap in self.heaps.values():
            heap.clear()
        for waiting in self.waiting.values():
            waiting.clear()
        return [chunk]

    def _emit(self, keys: list[Key]) -> Chunk:
        columns: dict[str, list[Any]] = {}
        if len(self.keys) == 1:
            columns[self.keys[0]] = list(keys)
        else:
            for i, name in enumerate(self.keys):
                columns[name] = [key[i] for key in keys]  # type: ignore[index]
        groups = self.groups
        slots = [groups.pop(key) for key in keys]
        for name, table in zip(self.names, self.tables, strict=True):
            columns[name] = [table.pop(slot) for slot in slots]
        self.free.extend(slots)
        return Chunk(columns, len(keys))

    def state_size(self) -> int:
        return len(self.groups)

    def snapshot(self) -> list[tuple[Key, list[Any]]]:
        tables = self.tables
        return [(key, [table.save(slot) for table in tables]) for key, slot in self.groups.items()]

    def restore(self, state: list[tuple[Key, list[Any]]]) -> None:
        self._open([key for key, _ in state])
        for key, saved in state:
            slot = self.groups[key]
            for table, value in zip(self.tables, saved, strict=True):
                table.load(slot, value)

    def _key_tuple(self, key: Key) -> tuple[Any, ...]:
        if len(self.keys) == 1:
            return (key,)
        assert isinstance(key, tuple)
        return key

    def rescale(self, states: Sequence[Any], units: int, owner: Owner) -> list[Any]:
        moved: list[list[tuple[Key, list[Any]]]] = [[] for _ in range(units)]
        for state in states:
            for key, saved in state:
                moved[owner(self._key_tuple(key))].append((key, saved))
        return moved
