"""Aggregate state both runners keep: one table per aggregate, a slot per open group.

The direct runner's `CombinePerKey` and the Spark runner's Python aggregation
paths (a user `CombineFn` in batch and in `transformWithState`) use the same
tables, so both runners aggregate with the same code. Values are the
internal ones (datetimes as integer microseconds); a user `CombineFn` still
sees rows as dicts with datetimes.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Sequence
from itertools import compress
from typing import Any

from sparkbeam.errors import DataError, described
from sparkbeam.schema import (
    INT64_MAX,
    INT64_MIN,
    Columns,
    Schema,
    columns_to_rows,
    one_nan,
    to_internal_value,
)
from sparkbeam.transforms.combine import (
    All,
    CollectSet,
    Count,
    CountDistinct,
    Max,
    MaxBy,
    Mean,
    Min,
    MinBy,
    Sum,
)
from sparkbeam.transforms.combine import Any as AnyOf


class Accumulators:
    """One aggregate's state for every open group, in a list indexed by the group's slot.

    The operator gives each open group a slot (a small integer, reused once
    the group is emitted) and passes each chunk's rows as their groups'
    slots: adding a row is then a list index, not a hash of the key. A fresh
    table has slot 0.
    """

    initial: Any = None
    """A slot's value before its group's first row (immutable: it is shared)."""

    column: str
    """The column it aggregates (not set for `Count()`, which counts rows)."""

    def __init__(self) -> None:
        self.values: list[Any] = [self.initial]

    def ensure(self, size: int) -> None:
        """Have slots `0 .. size - 1`."""
        missing = size - len(self.values)
        if missing > 0:
            self.values.extend([self.initial] * missing)

    def add(self, slots: Sequence[int], columns: Columns) -> None:
        raise NotImplementedError

    def pop(self, slot: int) -> Any:
        """The group's output; the slot is fresh again."""
        value = self.values[slot]
        self.values[slot] = self.initial
        return value

    def current(self, slot: int) -> Any:
        """The group's output so far; the group stays open (an update stream's row)."""
        saved = self.save(slot)
        value = self.pop(slot)
        self.load(slot, saved)
        return value

    def save(self, slot: int) -> Any:
        """A copy of the group's accumulator, for a checkpoint."""
        return self.values[slot]

    def load(self, slot: int, saved: Any) -> None:
        """Set the group's accumulator from what `save` gave."""
        self.values[slot] = saved

    def merge(self, slot: int, saved: Any) -> None:
        """Fold in `saved`, what `save` gave for the same aggregate over other rows: the group
        then holds the aggregate of both. Here a partial is itself a value of the column (a
        sum, the least or greatest value, an or/and of booleans), added as one more row."""
        if saved is not None:
            self.add([slot], {self.column: [saved]})


def _present(slots: Sequence[int], values: list[Any]) -> tuple[Sequence[int], list[Any]]:
    """The slots and values of the rows whose value is not None."""
    if None not in values:
        return slots, values
    keep = [value is not None for value in values]
    return list(compress(slots, keep)), list(compress(values, keep))


class CountRows(Accumulators):
    initial = 0

    def add(self, slots: Sequence[int], columns: Columns) -> None:
        counts = self.values
        for slot, n in Counter(slots).items():
            counts[slot] += n

    def merge(self, slot: int, saved: Any) -> None:
        self.values[slot] += saved


class CountValues(CountRows):
    def __init__(self, column: str) -> None:
        super().__init__()
        self.column = column

    def add(self, slots: Sequence[int], columns: Columns) -> None:
        counts = self.values
        for slot, n in Counter(_present(slots, columns[self.column])[0]).items():
            counts[slot] += n


class SumValues(Accumulators):
    """A group's sum is its first value, then `+` each next one, in arrival order.

    With `where` (a `Sum` of its own, not a `Mean`'s), an integer sum outside 64 bits is
    a `DataError` naming it (Spark's `long` with ANSI on). Python sums
    exactly, so it is the group's total that is checked: a sum whose running total leaves
    the range and comes back is fine here, where Spark may stop at it (that depends on
    the order Spark adds rows in, which no model can pin).
    """

    def __init__(self, column: str, where: str | None = None) -> None:
        super().__init__()
        self.column = column
        self.where = where

    def pop(self, slot: int) -> Any:
        value = super().pop(slot)
        if self.where is not None and type(value) is int and not INT64_MIN <= value <= INT64_MAX:
            raise DataError(
                f"{self.where}: the sum {value} is outside the 64-bit integers "
                f"({INT64_MIN} to {INT64_MAX}) both runners hold; sum a float column "
                "(convert the values in a Map) for totals that large"
            )
        return value

    def add(self, slots: Sequence[int], columns: Columns) -> None:
        sums = self.values
        present, values = _present(slots, columns[self.column])
        for slot, value in zip(present, values, strict=True):
            try:
                sums[slot] += value
            except TypeError:  # None + value: the group's first value
                if sums[slot] is not None:
                    raise
                sums[slot] = value


class MeanValues(Accumulators):
    def __init__(self, column: str) -> None:
        self.sums = SumValues(column)
        self.counts = CountValues(column)

    def ensure(self, size: int) -> None:
        self.sums.ensure(size)
        self.counts.ensure(size)

    def add(self, slots: Sequence[int], columns: Columns) -> None:
        self.sums.add(slots, columns)
        self.counts.add(slots, columns)

    def pop(self, slot: int) -> Any:
        total, count = self.sums.pop(slot), self.counts.pop(slot)
        return None if not count else total / count

    def save(self, slot: int) -> Any:
        return self.sums.save(slot), self.counts.save(slot)

    def load(self, slot: int, saved: Any) -> None:
        self.sums.load(slot, saved[0])
        self.counts.load(slot, saved[1])

    def merge(self, slot: int, saved: Any) -> None:
        self.sums.merge(slot, saved[0])
        self.counts.merge(slot, saved[1])


class MinValues(Accumulators):
    """The least value; NaN is larger than every other value (Spark's rule), so the
    minimum is NaN only when every value is (`current != current` is NaN)."""

    def __init__(self, column: str) -> None:
        super().__init__()
        self.column = column

    def add(self, slots: Sequence[int], columns: Columns) -> None:
        best = self.values
        for slot, value in zip(*_present(slots, columns[self.column]), strict=True):
            current = best[slot]
            if current is None or value < current or current != current:
                best[slot] = value


class MaxValues(MinValues):
    """The greatest value; a NaN among them is the maximum (Spark's rule)."""

    def add(self, slots: Sequence[int], columns: Columns) -> None:
        best = self.values
        for slot, value in zip(*_present(slots, columns[self.column]), strict=True):
            current = best[slot]
            if current is None or value > current or value != value:
                best[slot] = value


def order_key(value: Any) -> tuple[Any, ...]:
    """A sort key in Spark's order: None least, NaN greatest."""
    if value is None:
        return (0,)
    if value != value:
        return (2,)
    return (1, value)


class DistinctValues(Accumulators):
    """The set of distinct non-None values (one NaN for all); `CountDistinct` counts it."""

    def __init__(self, column: str) -> None:
        super().__init__()
        self.column = column

    def add(self, slots: Sequence[int], columns: Columns) -> None:
        sets = self.values
        present, values = _present(slots, columns[self.column])
        for slot, value in zip(present, one_nan(values), strict=True):
            found = sets[slot]
            if found is None:
                sets[slot] = {value}
            else:
                found.add(value)

    def pop(self, slot: int) -> Any:
        found = super().pop(slot)
        return 0 if found is None else len(found)

    def save(self, slot: int) -> Any:
        found = self.values[slot]
        return None if found is None else set(found)

    def load(self, slot: int, saved: Any) -> None:
        self.values[slot] = None if saved is None else set(saved)

    def merge(self, slot: int, saved: Any) -> None:
        if saved is None:
            return
        found = self.values[slot]
        values = one_nan(list(saved))  # a NaN that crossed a process is another object
        self.values[slot] = set(values) if found is None else found.union(values)


class SortedSet(DistinctValues):
    """`CollectSet`: the distinct non-None values as a list in Spark's order (NaN last)."""

    def pop(self, slot: int) -> Any:
        found = Accumulators.pop(self, slot)
        return [] if found is None else sorted(found, key=order_key)


class ValueAtLeast(Accumulators):
    """`MinBy`: a slot holds `(key, value)` for the best row so far, where the key orders
    rows by `by`, then `value` (None least, NaN greatest); rows with a None `by` are
    skipped."""

    def __init__(self, value: str, by: str) -> None:
        super().__init__()
        self.value = value
        self.by = by

    def better(self, key: tuple[Any, ...], best: tuple[Any, ...]) -> bool:
        return key < best

    def add(self, slots: Sequence[int], columns: Columns) -> None:
        bests = self.values
        present, bys = _present(slots, columns[self.by])
        if len(present) == len(slots):
            values = columns[self.value]
        else:
            keep = [by is not None for by in columns[self.by]]
            values = list(compress(columns[self.value], keep))
        better = self.better
        for slot, by, value in zip(present, bys, values, strict=True):
            key = (order_key(by), order_key(value))
            best = bests[slot]
            if best is None or better(key, best[0]):
                bests[slot] = (key, value)

    def pop(self, slot: int) -> Any:
        best = super().pop(slot)
        return None if best is None else best[1]

    def merge(self, slot: int, saved: Any) -> None:
        best = self.values[slot]
        if saved is not None and (best is None or self.better(saved[0], best[0])):
            self.values[slot] = saved


class ValueAtMost(ValueAtLeast):
    """`MaxBy`: `ValueAtLeast` with the greatest key."""

    def better(self, key: tuple[Any, ...], best: tuple[Any, ...]) -> bool:
        return key > best


class EitherTrue(Accumulators):
    """`Any`: or of the non-None booleans (None until the first one)."""

    def __init__(self, column: str) -> None:
        super().__init__()
        self.column = column

    def add(self, slots: Sequence[int], columns: Columns) -> None:
        found = self.values
        for slot, value in zip(*_present(slots, columns[self.column]), strict=True):
            current = found[slot]
            found[slot] = value if current is None else current or value


class BothTrue(EitherTrue):
    """`All`: and of the non-None booleans (None until the first one)."""

    def add(self, slots: Sequence[int], columns: Columns) -> None:
        found = self.values
        for slot, value in zip(*_present(slots, columns[self.column]), strict=True):
            current = found[slot]
            found[slot] = value if current is None else current and value


class UserCombine(Accumulators):
    """A user `CombineFn`: an accumulator per group and chunk, merged into the group's.

    An exception of the `CombineFn` is a `DataError` naming `where` (the
    `CombinePerKey` and the aggregate), the method that raised it, the
    exception with its file and line and, for `add_input`, the row; the same
    on every runner.
    """

    def __init__(self, fn: Any, schema: Schema, output_type: type, where: str) -> None:
        self.fn = fn
        self.schema = schema
        self.output_type = output_type
        self.where = where
        self.accumulators: dict[int, Any] = {}

    def ensure(self, size: int) -> None:
        pass

    def _failed(self, method: str, exc: Exception, row: Any = None) -> DataError:
        on = "" if row is None else f" on row {row!r}"
        return DataError(f"{self.where}: the CombineFn's {method} raised {described(exc)}{on}", row)

    def add(self, slots: Sequence[int], columns: Columns) -> None:
        fn = self.fn
        partial: dict[int, Any] = {}
        for slot, row in zip(slots, columns_to_rows(columns, self.schema), strict=True):
            if slot not in partial:
                try:
                    partial[slot] = fn.create_accumulator()
                except Exception as exc:
                    raise self._failed("create_accumulator", exc) from exc
            try:
                partial[slot] = fn.add_input(partial[slot], row)
            except Exception as exc:
                raise self._failed("add_input", exc, row) from exc
        for slot, accumulator in partial.items():
            if slot in self.accumulators:
                try:
                    accumulator = fn.merge_accumulators([self.accumulators[slot], accumulator])
                except Exception as exc:
                    raise self._failed("merge_accumulators", exc) from exc
            self.accumulators[slot] = accumulator

    def pop(self, slot: int) -> Any:
        try:
            value = self.fn.extract_output(self.accumulators.pop(slot))
        except Exception as exc:
            raise self._failed("extract_output", exc) from exc
        return to_internal_value(value, self.output_type, self.where)

    def current(self, slot: int) -> Any:
        try:
            value = self.fn.extract_output(copy.deepcopy(self.accumulators[slot]))
        except Exception as exc:
            raise self._failed("extract_output", exc) from exc
        return to_internal_value(value, self.output_type, self.where)

    def save(self, slot: int) -> Any:
        return copy.deepcopy(self.accumulators[slot])

    def load(self, slot: int, saved: Any) -> None:
        self.accumulators[slot] = copy.deepcopy(saved)

    def merge(self, slot: int, saved: Any) -> None:
        if slot in self.accumulators:
            try:
                saved = self.fn.merge_accumulators([self.accumulators[slot], saved])
            except Exception as exc:
                raise self._failed("merge_accumulators", exc) from exc
        self.accumulators[slot] = saved


def accumulators_for(
    aggregate: Any, schema: Schema, output_type: type = object, where: str = "CombineFn"
) -> Accumulators:
    if isinstance(aggregate, Count):
        return CountRows() if aggregate.column is None else CountValues(aggregate.column)
    if isinstance(aggregate, Sum):
        return SumValues(aggregate.column, where)
    if isinstance(aggregate, Mean):
        return MeanValues(aggregate.column)
    if isinstance(aggregate, Min):
        return MinValues(aggregate.column)
    if isinstance(aggregate, Max):
        return MaxValues(aggregate.column)
    if isinstance(aggregate, CountDistinct):
        return DistinctValues(aggregate.column)
    if isinstance(aggregate, CollectSet):
        return SortedSet(aggregate.column)
    if isinstance(aggregate, MaxBy):
        return ValueAtMost(aggregate.value, aggregate.by)
    if isinstance(aggregate, MinBy):
        return ValueAtLeast(aggregate.value, aggregate.by)
    if isinstance(aggregate, AnyOf):
        return EitherTrue(aggregate.column)
    if isinstance(aggregate, All):
        return BothTrue(aggregate.column)
    return UserCombine(aggregate, schema, output_type, where)
