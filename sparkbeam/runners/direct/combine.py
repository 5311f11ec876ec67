"""Direct operator for `CombinePerKey` (rules in `transforms.combine`).

State: the open groups (in arrival order), each with a slot, one
accumulator table per aggregate (a list indexed by slot), and for each
watermarked key column a heap of the values that open groups hold in it.
`W(c, wm)` on a key column releases every group whose value in `c` is
`< wm`, then passes on; the end of input releases the rest.

Checkpoint: the open groups in arrival order, each with its accumulators
(the heaps are rebuilt on restore). Rescale: each group goes to the unit
that owns its key.

`emit="update"` (`UpdateCombineOperator`): the same groups, each with its
next pane index. Rows are added as they come and the groups they touch are
noted; watermarks are held until the epoch's barrier. There, step 1: one
`"EARLY"` row per touched group (its value so far); step 2: the held
watermarks in arrival order, each releasing the groups it passes as above,
as `"ON_TIME"` last rows, then passing on. The end of input runs step 2
only (every group left is released). A checkpoint (taken after the
barrier, with nothing touched or held) adds each group's pane index.

With `allowed_lateness` upstream, a watermark's estimate runs ahead of its
value: at the barrier, the groups the estimate passes (and no earlier one
did) emit `"ON_TIME"` (last only if the value passes them too), and the
groups the value passes emit their last row (`"LATE"` when their
`"ON_TIME"` row came before). A step-1 row of a group an earlier estimate
passed is `"LATE"`. The groups the estimate has passed are kept in a set
(checkpointed with each group); the estimate is found by scanning the open
groups, so only pipelines with lateness pay for it.
`FinalsOperator` keeps the last rows and drops the pane columns.
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
from sparkbeam.updates import (
    EARLY,
    LATE,
    ON_TIME,
    PANE_COLUMNS,
    PANE_INDEX,
    PANE_IS_LAST,
    PANE_TIMING,
)

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

    def _add(self, chunk: Chunk) -> list[int]:
        """Add the rows to their groups (opening those not open yet); each row's slot."""
        groups = self.groups
        try:
            slots = list(map(groups.__getitem__, self._keys(chunk)))
        except KeyError:  # rows of groups not open yet
            self._open([key for key in dict.fromkeys(self._keys(chunk)) if key not in groups])
            slots = list(map(groups.__getitem__, self._keys(chunk)))
        for table in self.tables:
            table.add(slots, chunk.columns)
        return slots

    def on_chunk(self, port: int, chunk: Chunk) -> list[Message]:
        self._add(chunk)
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

    def _key_columns(self, keys: list[Key]) -> dict[str, list[Any]]:
        """The key columns of the groups `keys`."""
        if len(self.keys) == 1:
            return {self.keys[0]: list(keys)}
        return {name: [key[i] for key in keys] for i, name in enumerate(self.keys)}  # type: ignore[index]

    def _emit(self, keys: list[Key]) -> Chunk:
        columns = self._key_columns(keys)
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


class UpdateCombineOperator(CombineOperator):
    """`CombinePerKey(emit="update")`: an update stream, per epoch (module docstring)."""

    holds_watermarks = True

    def __init__(self, node: Node, inputs: Sequence[EdgeInfo]) -> None:
        super().__init__(node, inputs)
        self.panes: list[int] = []
        """Each open group's next pane index, by slot."""
        self.slot_keys: list[Key] = []
        """Each open group's key, by slot."""
        self.touched: dict[int, None] = {}
        """The slots of the groups that received rows in this epoch, in the order of their
        first row (no group closes within an epoch: its watermarks are held to its end)."""
        self.held: list[Watermark] = []
        """This epoch's watermarks, applied at its barrier."""
        self.on_time: set[Key] = set()
        """Open groups an estimate has passed: their `"ON_TIME"` row is out (or they have
        none, born after it), so every later row of theirs is `"LATE"`."""
        self.estimated: dict[str, Any] = {}
        """The estimate applied last on each watermarked key column (`E'` of the next epoch),
        from the first that ran ahead of its value: until then `E'` is the watermark, which
        no kept row's group is below, so no group can be born late."""

    def _open(self, new: list[Key]) -> None:
        super()._open(new)
        panes, slot_keys = self.panes, self.slot_keys
        if len(panes) < self.slot_count:
            panes.extend([0] * (self.slot_count - len(panes)))
            slot_keys.extend([None] * (self.slot_count - len(slot_keys)))
        groups = self.groups
        for key in new:
            slot = groups[key]
            panes[slot] = 0
            slot_keys[slot] = key

    def on_chunk(self, port: int, chunk: Chunk) -> list[Message]:
        self.touched.update(dict.fromkeys(self._add(chunk)))
        return []

    def _passed_by_estimate(self, key: Key) -> bool:
        estimated = self.estimated
        return any(
            self._key_values(key, column) < estimate for column, estimate in estimated.items()
        )

    def on_watermark(self, port: int, watermark: Watermark) -> list[Message]:
        self.held.append(watermark)
        return []

    def on_barrier(self, epoch: int) -> list[Message]:
        out: list[Message] = []
        if self.touched:
            slot_keys = self.slot_keys
            out.append(self._updates([slot_keys[slot] for slot in self.touched]))
            self.touched.clear()
        return out + self._apply_held()

    def on_end(self) -> list[Message]:
        out = self._apply_held()
        self.touched.clear()
        return out + super().on_end()

    def _apply_held(self) -> list[Message]:
        """Step 2: the held watermarks, in arrival order (`_apply`)."""
        held, self.held = self.held, []
        out: list[Message] = []
        for watermark in held:
            out += self._apply(watermark)
        return out

    def _apply(self, watermark: Watermark) -> list[Message]:
        """The groups the estimate passes emit `"ON_TIME"`, those the value passes their last
        row (the module docstring); then the watermark passes on."""
        column, mark, estimate = watermark.column, watermark.value, watermark.estimate
        self.note_estimate(0, watermark)
        if column not in self.heaps:
            return self.watermarks(self.derive(column, mark))
        heap, waiting = self.heaps[column], self.waiting[column]
        released: list[Key] = []
        while heap and heap[0] < mark:
            released.extend(k for k in waiting.pop(heapq.heappop(heap)) if k in self.groups)
        on_time = self.on_time
        due: list[Key] = []
        if estimate > mark:
            closing = set(released)
            due = [
                key
                for key in self.groups
                if key not in on_time
                and key not in closing
                and self._key_values(key, column) < estimate
            ]
        out: list[Message] = []
        if due:
            out.append(self._rows(due, ON_TIME, last=False))
            on_time.update(due)
        if released:
            out.append(self._emit(released))
        previous = self.estimated.get(column)
        if (previous is None and estimate > mark) or (previous is not None and estimate > previous):
            self.estimated[column] = estimate  # kept only once it runs ahead of the value
        return out + self.watermarks(self.derive(column, mark))

    def _updates(self, keys: list[Key]) -> Chunk:
        """Step 1: each group's value so far, not its last row: `"EARLY"`, or `"LATE"` once an
        estimate passed the group (a group born after it is marked so here)."""
        on_time = self.on_time
        if self.estimated:
            on_time.update(key for key in keys if self._passed_by_estimate(key))
        timings = [LATE if key in on_time else EARLY for key in keys] if on_time else None
        chunk = self._rows(keys, EARLY, last=False)
        if timings is not None:
            chunk.columns[PANE_TIMING] = timings
        return chunk

    def _rows(self, keys: list[Key], timing: str, last: bool) -> Chunk:
        """Each group's value so far as one pane row of `timing` (the groups stay open)."""
        columns = self._key_columns(keys)
        slots = [self.groups[key] for key in keys]
        for name, table in zip(self.names, self.tables, strict=True):
            columns[name] = [table.current(slot) for slot in slots]
        panes = self.panes
        indexes = [panes[slot] for slot in slots]
        for slot in slots:
            panes[slot] += 1
        columns[PANE_TIMING] = [timing] * len(keys)
        columns[PANE_INDEX] = indexes
        columns[PANE_IS_LAST] = [last] * len(keys)
        return Chunk(columns, len(keys))

    def _emit(self, keys: list[Key]) -> Chunk:
        """A group's closing row, its last (the group is dropped): `"ON_TIME"`, or `"LATE"`
        when its `"ON_TIME"` row came before (or it has none)."""
        indexes = [self.panes[self.groups[key]] for key in keys]
        on_time = self.on_time
        timings = [LATE if key in on_time else ON_TIME for key in keys]
        on_time.difference_update(keys)
        chunk = super()._emit(keys)
        chunk.columns[PANE_TIMING] = timings
        chunk.columns[PANE_INDEX] = indexes
        chunk.columns[PANE_IS_LAST] = [True] * len(keys)
        return chunk

    def restore_estimates(
        self, state: tuple[dict[str, Any], dict[tuple[int, str], Any]] | None
    ) -> None:
        """A checkpoint is taken with nothing held: the estimates received are those applied."""
        super().restore_estimates(state)
        self.estimated = {
            column: estimate
            for (_, column), estimate in self._estimates_in.items()
            if column in self.heaps
        }

    def snapshot(self) -> list[tuple[Key, list[Any]]]:
        panes, groups, on_time = self.panes, self.groups, self.on_time
        return [
            (key, [*saved, panes[groups[key]], key in on_time]) for key, saved in super().snapshot()
        ]

    def restore(self, state: list[tuple[Key, list[Any]]]) -> None:
        super().restore([(key, saved[:-2]) for key, saved in state])
        for key, saved in state:
            self.panes[self.groups[key]] = saved[-2]
            if saved[-1]:
                self.on_time.add(key)


def combine_operator(node: Node, inputs: Sequence[EdgeInfo]) -> CombineOperator:
    """The operator of a `CombinePerKey`, by its `emit` mode."""
    transform = node.transform
    assert isinstance(transform, CombinePerKey)
    if transform.updates:
        return UpdateCombineOperator(node, inputs)
    return CombineOperator(node, inputs)


class FinalsOperator(Operator):
    """`finals()`: the rows with `pane_is_last`, without the pane columns."""

    def on_chunk(self, port: int, chunk: Chunk) -> list[Message]:
        last = chunk.columns[PANE_IS_LAST]
        kept = sum(1 for flag in last if flag)
        if not kept:
            return []
        columns = {
            name: values for name, values in chunk.columns.items() if name not in PANE_COLUMNS
        }
        return [Chunk(columns, chunk.size).compress(last, kept)]
