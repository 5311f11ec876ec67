"""Direct operator for `CombinePerKey` (rules in `transforms.combine`).

State: the open groups (in arrival order), one accumulator table per
aggregate, and for each watermarked key column a heap of the values that
open groups hold in it. `W(c, wm)` on a key column releases every group whose
value in `c` is `< wm`, then passes on; the end of input releases the rest.

Checkpoint: the open groups in arrival order, each with its accumulators
(the heaps are rebuilt on restore). Rescale: each group goes to the unit
that owns its key.
"""

from __future__ import annotations

import copy
import heapq
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from sparkbeam.graph import EdgeInfo, Node
from sparkbeam.messages import Watermark
from sparkbeam.runners.direct.operator import Chunk, Message, Operator, Owner
from sparkbeam.schema import Schema, columns_to_rows, to_internal_value
from sparkbeam.transforms.combine import CombinePerKey, Count, Max, Mean, Min, Sum

Key = Hashable


class Accumulators:
    """One aggregate's state for every open group."""

    def add(self, keys: Sequence[Key], chunk: Chunk) -> None:
        raise NotImplementedError

    def pop(self, key: Key) -> Any:
        """The group's output; forgets the group."""
        raise NotImplementedError

    def save(self, key: Key) -> Any:
        """A copy of the group's accumulator, for a checkpoint."""
        raise NotImplementedError

    def load(self, key: Key, saved: Any) -> None:
        """Set the group's accumulator from what `save` gave."""
        raise NotImplementedError


class CountRows(Accumulators):
    def __init__(self) -> None:
        self.counts: Counter[Key] = Counter()

    def add(self, keys: Sequence[Key], chunk: Chunk) -> None:
        self.counts.update(keys)

    def pop(self, key: Key) -> Any:
        return self.counts.pop(key, 0)

    def save(self, key: Key) -> Any:
        return self.counts.get(key, 0)

    def load(self, key: Key, saved: Any) -> None:
        if saved:
            self.counts[key] = saved


class CountValues(CountRows):
    def __init__(self, column: str) -> None:
        super().__init__()
        self.column = column

    def add(self, keys: Sequence[Key], chunk: Chunk) -> None:
        values = chunk.columns[self.column]
        self.counts.update(k for k, v in zip(keys, values, strict=True) if v is not None)


class SumValues(Accumulators):
    def __init__(self, column: str) -> None:
        self.column = column
        self.sums: dict[Key, Any] = {}

    def add(self, keys: Sequence[Key], chunk: Chunk) -> None:
        sums = self.sums
        get = sums.get
        for key, value in zip(keys, chunk.columns[self.column], strict=True):
            if value is not None:
                current = get(key)
                sums[key] = value if current is None else current + value

    def pop(self, key: Key) -> Any:
        return self.sums.pop(key, None)

    def save(self, key: Key) -> Any:
        return self.sums.get(key)

    def load(self, key: Key, saved: Any) -> None:
        if saved is not None:
            self.sums[key] = saved


class MeanValues(Accumulators):
    def __init__(self, column: str) -> None:
        self.sums = SumValues(column)
        self.counts = CountValues(column)

    def add(self, keys: Sequence[Key], chunk: Chunk) -> None:
        self.sums.add(keys, chunk)
        self.counts.add(keys, chunk)

    def pop(self, key: Key) -> Any:
        total, count = self.sums.pop(key), self.counts.pop(key)
        return None if not count else total / count

    def save(self, key: Key) -> Any:
        return self.sums.save(key), self.counts.save(key)

    def load(self, key: Key, saved: Any) -> None:
        self.sums.load(key, saved[0])
        self.counts.load(key, saved[1])


class ExtremeValues(Accumulators):
    def __init__(self, column: str, better: Callable[[Any, Any], bool]) -> None:
        self.column = column
        self.better = better
        self.best: dict[Key, Any] = {}

    def add(self, keys: Sequence[Key], chunk: Chunk) -> None:
        best, better = self.best, self.better
        get = best.get
        for key, value in zip(keys, chunk.columns[self.column], strict=True):
            if value is not None:
                current = get(key)
                if current is None or better(value, current):
                    best[key] = value

    def pop(self, key: Key) -> Any:
        return self.best.pop(key, None)

    def save(self, key: Key) -> Any:
        return self.best.get(key)

    def load(self, key: Key, saved: Any) -> None:
        if saved is not None:
            self.best[key] = saved


class UserCombine(Accumulators):
    """A user `CombineFn`: an accumulator per group and chunk, merged into the group's."""

    def __init__(self, fn: Any, schema: Schema, output_type: type, where: str) -> None:
        self.fn = fn
        self.schema = schema
        self.output_type = output_type
        self.where = where
        self.accumulators: dict[Key, Any] = {}

    def add(self, keys: Sequence[Key], chunk: Chunk) -> None:
        fn = self.fn
        partial: dict[Key, Any] = {}
        for key, row in zip(keys, columns_to_rows(chunk.columns, self.schema), strict=True):
            if key not in partial:
                partial[key] = fn.create_accumulator()
            partial[key] = fn.add_input(partial[key], row)
        for key, accumulator in partial.items():
            if key in self.accumulators:
                accumulator = fn.merge_accumulators([self.accumulators[key], accumulator])
            self.accumulators[key] = accumulator

    def pop(self, key: Key) -> Any:
        value = self.fn.extract_output(self.accumulators.pop(key))
        return to_internal_value(value, self.output_type, self.where)

    def save(self, key: Key) -> Any:
        return copy.deepcopy(self.accumulators[key])

    def load(self, key: Key, saved: Any) -> None:
        self.accumulators[key] = copy.deepcopy(saved)


def _less(a: Any, b: Any) -> bool:
    return bool(a < b)


def _greater(a: Any, b: Any) -> bool:
    return bool(a > b)


def accumulators_for(
    aggregate: Any, schema: Schema, output_type: type = object, where: str = "CombineFn"
) -> Accumulators:
    if isinstance(aggregate, Count):
        return CountRows() if aggregate.column is None else CountValues(aggregate.column)
    if isinstance(aggregate, Sum):
        return SumValues(aggregate.column)
    if isinstance(aggregate, Mean):
        return MeanValues(aggregate.column)
    if isinstance(aggregate, Min):
        return ExtremeValues(aggregate.column, _less)
    if isinstance(aggregate, Max):
        return ExtremeValues(aggregate.column, _greater)
    return UserCombine(aggregate, schema, output_type, where)


class CombineOperator(Operator):
    def __init__(self, node: Node, inputs: Sequence[EdgeInfo]) -> None:
        super().__init__(node, inputs)
        transform = node.transform
        assert isinstance(transform, CombinePerKey)
        self.transform = transform
        self.keys = transform.keys
        self.names = [name for name, _ in transform.aggregates]
        schema = inputs[0].schema
        out = node.info.schema
        self.tables = [
            accumulators_for(aggregate, schema, out.type_of(name), f"{node.label} {name}")
            for name, aggregate in transform.aggregates
        ]
        self.groups: dict[Key, None] = {}
        self.positions = {key: i for i, key in enumerate(self.keys)}
        self.heaps: dict[str, list[Any]] = {c: [] for c in self.keys if c in inputs[0].watermarked}
        self.waiting: dict[str, dict[Any, list[Key]]] = {c: {} for c in self.heaps}

    def _key_values(self, key: Key, column: str) -> Any:
        if len(self.keys) == 1:
            return key
        assert isinstance(key, tuple)
        return key[self.positions[column]]

    def on_chunk(self, port: int, chunk: Chunk) -> list[Message]:
        key_columns = [chunk.columns[k] for k in self.keys]
        keys: list[Key]
        if len(key_columns) == 1:
            keys = key_columns[0]
        elif key_columns:
            keys = list(zip(*key_columns, strict=True))
        else:
            keys = [()] * chunk.size
        groups = self.groups
        self._open([key for key in dict.fromkeys(keys) if key not in groups])
        for table in self.tables:
            table.add(keys, chunk)
        return []

    def _open(self, new: list[Key]) -> None:
        """Open groups for the keys `new` (none of them open yet)."""
        groups = self.groups
        for key in new:
            groups[key] = None
            for column, waiting in self.waiting.items():
                value = self._key_values(key, column)
                if value in waiting:
                    waiting[value].append(key)
                else:
                    waiting[value] = [key]
                    heapq.heappush(self.heaps[column], value)

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
        return out + self.watermarks(self.transform.derive(column, mark))

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
        for name, table in zip(self.names, self.tables, strict=True):
            columns[name] = [table.pop(key) for key in keys]
        for key in keys:
            del self.groups[key]
        return Chunk(columns, len(keys))

    def state_size(self) -> int:
        return len(self.groups)

    def snapshot(self) -> list[tuple[Key, list[Any]]]:
        return [(key, [table.save(key) for table in self.tables]) for key in self.groups]

    def restore(self, state: list[tuple[Key, list[Any]]]) -> None:
        for key, saved in state:
            for table, value in zip(self.tables, saved, strict=True):
                table.load(key, value)
        self._open([key for key, _ in state])

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
