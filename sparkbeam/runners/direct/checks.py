"""The invariants checked on the edges of the direct runner.

Invariant W: after `Watermark(c, t)` on an edge, every later
row `d` on that edge has `d[c] >= t`, and watermark values on one column of
one edge never decrease. A violation raises `InvariantViolation` naming the
transform that produced the edge, the column, the watermark and the row.

Order: on the output of a transform that promises an order (`Sort`), each
row's sort column is `>=` that of the previous row of the same key.

Panes: on an edge that carries an update stream (`sparkbeam.updates`), the
rows of each group have increasing `pane_index`es, at most one has
`pane_is_last` and none comes after it; where no `Filter` removed rows (the
stream is whole) the indexes run 0, 1, 2, ... with no gap, and by the end of
input every group has had its last row. A group is forgotten once its last
row is passed by a watermark on a key column (no row of it can follow).

Global watermark (parallel units, `runners.direct.parallel`): at every
barrier, all the units behind one exchange hold the same watermark value on
each column (the merger of each has seen the same watermarks from every
producing unit).
"""

from __future__ import annotations

from itertools import islice
from operator import le
from typing import Any

from sparkbeam.errors import InvariantViolation
from sparkbeam.messages import Watermark
from sparkbeam.runners.direct.operator import Chunk
from sparkbeam.schema import Schema, one_nan_in, to_external
from sparkbeam.updates import PANE_INDEX, PANE_IS_LAST, UpdateStream


def _show(schema: Schema, column: str, value: Any) -> Any:
    convert = to_external(schema.type_of(column))
    return convert([value])[0] if convert and value is not None else value


class EdgeCheck:
    """Invariant W on one edge, and the pane rules where it carries an update stream."""

    __slots__ = ("label", "panes", "schema", "watermarks")

    def __init__(
        self,
        label: str,
        schema: Schema,
        updates: UpdateStream | None = None,
        resumed: bool = False,
    ) -> None:
        self.label = label
        self.schema = schema
        self.watermarks: dict[str, Any] = {}
        self.panes = None if updates is None else PaneCheck(label, schema, updates, resumed)

    def end(self) -> None:
        """The end of input: every group has had its last row."""
        if self.panes is not None:
            self.panes.end()

    def _show(self, column: str, value: Any) -> Any:
        return _show(self.schema, column, value)

    def watermark(self, watermark: Watermark) -> None:
        column, value = watermark.column, watermark.value
        last = self.watermarks.get(column)
        if last is not None and value < last:
            raise InvariantViolation(
                f"invariant W broken on the output of {self.label}: the watermark on "
                f"{column!r} went back from {self._show(column, last)!r} to "
                f"{self._show(column, value)!r}"
            )
        self.watermarks[column] = value
        if self.panes is not None:
            self.panes.watermark(column, value)

    def chunk(self, chunk: Chunk) -> None:
        if self.panes is not None:
            self.panes.chunk(chunk)
        for column, mark in self.watermarks.items():
            values = chunk.columns[column]
            try:
                if min(values) >= mark:
                    continue
            except TypeError:  # a None among the values
                pass
            for index, value in enumerate(values):
                if value is None or value < mark:
                    row = {name: self._show(name, v) for name, v in chunk.row(index).items()}
                    raise InvariantViolation(
                        f"invariant W broken on the output of {self.label}: row {row!r} has "
                        f"{column} = {self._show(column, value)!r}, below the watermark "
                        f"Watermark({column!r}, {self._show(column, mark)!r}) before it"
                    )


class PaneCheck:
    """The pane rules on one edge of an update stream (module docstring).

    `resumed`: the run went on from a checkpoint, so a group's first row here
    may have any index (its earlier rows came before the restore).
    """

    __slots__ = (
        "closed",
        "float_keys",
        "keys",
        "label",
        "next_index",
        "resumed",
        "schema",
        "whole",
    )

    def __init__(self, label: str, schema: Schema, updates: UpdateStream, resumed: bool) -> None:
        self.label = label
        self.schema = schema
        self.keys = updates.keys
        self.float_keys = [key for key in self.keys if schema.type_of(key) is float]
        self.whole = updates.whole
        self.resumed = resumed
        self.next_index: dict[tuple[Any, ...], int] = {}
        """Each open group's next pane index (the last index seen + 1)."""
        self.closed: set[tuple[Any, ...]] = set()
        """The groups whose last row came (until a watermark passes them)."""

    def _row(self, chunk: Chunk, index: int) -> dict[str, Any]:
        return {name: _show(self.schema, name, v) for name, v in chunk.row(index).items()}

    def _broken(self, chunk: Chunk, index: int, what: str) -> InvariantViolation:
        return InvariantViolation(
            f"pane rules broken on the output of {self.label}: row {self._row(chunk, index)!r} "
            f"{what}"
        )

    def chunk(self, chunk: Chunk) -> None:
        columns = one_nan_in(chunk.columns, self.float_keys)
        keys = zip(*(columns[key] for key in self.keys), strict=True) if self.keys else None
        indexes, lasts = chunk.columns[PANE_INDEX], chunk.columns[PANE_IS_LAST]
        next_index, closed = self.next_index, self.closed
        for row in range(chunk.size):
            key = next(keys) if keys is not None else ()
            if key in closed:
                raise self._broken(chunk, row, "comes after its group's last row")
            index = indexes[row]
            expected = next_index.get(key)
            if expected is None and not self.resumed and self.whole and index != 0:
                raise self._broken(chunk, row, f"is its group's first, with pane_index {index}")
            if expected is not None and (index != expected if self.whole else index < expected):
                wanted = expected if self.whole else f"at least {expected}"
                raise self._broken(chunk, row, f"has pane_index {index}, not {wanted}")
            if lasts[row]:
                next_index.pop(key, None)
                closed.add(key)
            else:
                next_index[key] = index + 1

    def watermark(self, column: str, value: Any) -> None:
        """Forget the closed groups `Watermark(column, value)` passes."""
        if column not in self.keys or not self.closed:
            return
        position = self.keys.index(column)
        self.closed = {k for k in self.closed if k[position] is None or k[position] >= value}

    def end(self) -> None:
        if self.whole and self.next_index:
            key = next(iter(self.next_index))
            group = dict(zip(self.keys, key, strict=True))
            raise InvariantViolation(
                f"pane rules broken on the output of {self.label}: the input ended, but group "
                f"{group!r} had no last row (pane_is_last) after pane {self.next_index[key] - 1}"
            )


class OrderCheck:
    """The order a `Sort` promises: non-decreasing `column` within each key."""

    __slots__ = ("column", "high", "keys", "label", "last", "schema")

    def __init__(self, label: str, schema: Schema, column: str, keys: tuple[str, ...]) -> None:
        self.label = label
        self.schema = schema
        self.column = column
        self.keys = keys
        self.last: dict[tuple[Any, ...], Any] = {}
        self.high: Any = None
        """The largest value seen (of any key)."""

    def chunk(self, chunk: Chunk) -> None:
        values = chunk.columns[self.column]
        if not values:
            return
        keys: list[tuple[Any, ...]] = (
            list(zip(*(chunk.columns[key] for key in self.keys), strict=True))
            if self.keys
            else [()] * len(values)
        )
        high = self.high
        if (high is None or values[0] >= high) and all(map(le, values, islice(values, 1, None))):
            # In order over all keys, from above every key's last value: in order within each.
            self.last.update(zip(keys, values, strict=True))
            self.high = values[-1]
            return
        last = self.last
        for key, value in zip(keys, values, strict=True):
            previous = last.get(key)
            if previous is not None and value < previous:
                convert = to_external(self.schema.type_of(self.column))
                shown = convert([value, previous]) if convert else [value, previous]
                raise InvariantViolation(
                    f"order broken on the output of {self.label}: {self.column} = {shown[0]!r} "
                    f"after {shown[1]!r}"
                    + (
                        f" within key {dict(zip(self.keys, key, strict=True))!r}"
                        if self.keys
                        else ""
                    )
                )
            last[key] = value
            if high is None or value > high:
                high = value
        self.high = high


class GlobalWatermarkCheck:
    """At every barrier, every unit behind one exchange holds the same watermarks.

    Each unit reports what its merger has emitted per column when it aligns
    a barrier; once every unit of the node has reported that barrier, the
    reports must be equal.
    """

    __slots__ = ("label", "reports", "schema", "units")

    def __init__(self, label: str, schema: Schema, units: int) -> None:
        self.label = label
        self.schema = schema
        self.units = units
        self.reports: dict[int, dict[int, dict[str, Any]]] = {}

    def barrier(self, epoch: int, unit: int, held: dict[str, Any]) -> None:
        reports = self.reports.setdefault(epoch, {})
        reports[unit] = dict(held)
        if len(reports) < self.units:
            return
        del self.reports[epoch]
        first = reports[0]
        for other, values in sorted(reports.items()):
            if values != first:
                shown = {
                    u: {c: _show(self.schema, c, v) for c, v in sorted(r.items())}
                    for u, r in sorted(reports.items())
                }
                raise InvariantViolation(
                    f"global watermark broken behind the exchange into {self.label}: at barrier "
                    f"{epoch} unit 0 and unit {other} hold different watermarks "
                    f"(per unit: {shown!r})"
                )
