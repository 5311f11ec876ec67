"""Checkpoints, fail-over and rescale for the direct runner's parallel units.

A checkpoint is an aligned barrier (Chandy-Lamport with alignment, as in
Flink and RisingWave): when a unit has received barrier `e` on every input
it has processed every message before it and none after it, so its state
then, taken together with every other unit's at the same barrier, is a
consistent cut with nothing in flight. Barrier `e` is a checkpoint every
`checkpoint_every` epochs (`(e + 1) % checkpoint_every == 0`) and at every
epoch named in `rescale`.

What each unit saves (`UnitState`): its operator's `snapshot()` (the state
logic lives next to each operator), the watermarks it has emitted, whether
its output and each input is idle, the state of its mergers, and the state
of the invariant checks on its edges.
A source's saved state is its offset: the next epoch to read. The recorded
results are the sink: rows and watermarks are tagged with the epoch they
belong to, and a restore drops whatever came after the checkpoint, so a
replayed epoch is recorded once (exactly once).

Fail-over (`fail_at`): at the given steps the run is aborted wherever it is
(mid-epoch included); every unit is rebuilt and restored from the last
complete checkpoint (or from scratch when there is none), the channels
start empty, and the sources replay from their saved offsets.

Rescale (`rescale={epoch: units}`): once checkpoint `epoch` is complete the
run stops and restarts from it with the new parallelism. Keyed state goes to
the unit that now owns its key (`Operator.rescale`); watermark filters start
from the global watermark saved at the checkpoint (with `emit="periodic"` every
unit saved the same one; with `emit="event"`, the largest of the local ones),
so a run with failures and rescales gives the fault-free run at parallelism 1;
a source continues from its saved offset; everything that is a promise
about an edge (the watermarks an operator or merger has emitted, the state of
the invariant W checks) starts from what every old unit promised: per column,
the minimum over the old units (nothing when one of them had nothing). So
invariant W is still checked across the restore: no new unit may emit a row
or watermark below what all old units had promised.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sparkbeam.errors import PipelineError
from sparkbeam.runners.direct.exchange import MergerState, owner_of

if TYPE_CHECKING:
    from sparkbeam.runners.direct.units import Unit


MAX_PARALLELISM = 64
"""The most units `DirectRunner` runs a transform as. A parallel run's cost grows faster than
the cube of its units (measured on four rows through a window and a combine: 32 units a third
of a second, 64 about 2 s, 200 units 28 s, 10**6 never ends). The direct runner checks what
parallelism does to a pipeline; a few units already show it."""


def _positive(value: object, name: str) -> int:
    if isinstance(value, bool):
        raise PipelineError(
            f"DirectRunner: {name}={value!r} is a bool; give a whole number >= 1, for example "
            f"{name}=2"
        )
    if not isinstance(value, int) or value < 1:
        raise PipelineError(f"DirectRunner: {name} must be a whole number >= 1, got {value!r}")
    return value


def _units(value: object, name: str) -> int:
    units = _positive(value, name)
    if units > MAX_PARALLELISM:
        raise PipelineError(
            f"DirectRunner: {name}={units} is more than {MAX_PARALLELISM} units, and a parallel "
            "run's cost grows faster than the cube of its units (200 units take half a minute "
            f"on four rows); use at most {MAX_PARALLELISM} (a few units already check what "
            "parallelism does to a pipeline), or run it on the Spark runner"
        )
    return units


@dataclass(frozen=True)
class CheckpointPlan:
    """When checkpoints are taken, where the run fails and when it changes parallelism."""

    parallelism: int
    every: int | None = None
    fail_at: tuple[int, ...] = ()
    rescale: tuple[tuple[int, int], ...] = ()
    """`(epoch, units)` pairs, in epoch order: after checkpoint `epoch`, run as `units`."""

    @classmethod
    def of(
        cls,
        parallelism: int,
        every: int | None,
        fail_at: int | Iterable[int] | None,
        rescale: Mapping[int, int] | None,
    ) -> CheckpointPlan:
        """A plan from the `DirectRunner` arguments; `PipelineError` says what is wrong."""
        _units(parallelism, "parallelism")
        if every is not None:
            _positive(every, "checkpoint_every")
        points: tuple[int, ...] = ()
        if fail_at is not None:
            raw = (fail_at,) if isinstance(fail_at, int) else tuple(fail_at)
            for point in raw:
                if isinstance(point, bool) or not isinstance(point, int) or point < 0:
                    raise PipelineError(
                        f"DirectRunner: fail_at takes step numbers (whole numbers >= 0: the "
                        f"number of messages delivered before the failure), got {point!r}"
                    )
            points = tuple(sorted(raw))
        changes: list[tuple[int, int]] = []
        if rescale is not None:
            if not isinstance(rescale, Mapping):
                raise PipelineError(
                    "DirectRunner: rescale maps a checkpoint epoch to the new parallelism, "
                    f"for example rescale={{1: 3, 3: 1}}; got {rescale!r}"
                )
            for epoch, units in sorted(rescale.items()):
                if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
                    raise PipelineError(
                        f"DirectRunner: rescale epochs are epoch numbers >= 0, got {epoch!r}"
                    )
                changes.append((epoch, _units(units, f"the parallelism for epoch {epoch}")))
        return cls(parallelism, every, points, tuple(changes))

    def is_checkpoint(self, epoch: int) -> bool:
        if self.every is not None and (epoch + 1) % self.every == 0:
            return True
        return any(epoch == at for at, _ in self.rescale)

    def parallelism_after(self, epoch: int) -> int:
        """The parallelism of the epochs after `epoch` (`-1`: from the start)."""
        units = self.parallelism
        for at, changed in self.rescale:
            if at <= epoch:
                units = changed
        return units


@dataclass
class UnitState:
    """What one unit saves at a checkpoint barrier."""

    operator: Any
    emitted: dict[str, Any]
    idleness: tuple[bool, tuple[bool, ...]]
    """Whether the operator's output is idle, and each of its inputs."""
    mergers: list[MergerState | None]
    """Per input port: the merger's state, or None for a forward input."""
    check: dict[str, Any] | None
    merged_checks: list[dict[str, Any] | None]
    order: dict[Any, Any] | None
    estimates: tuple[dict[str, Any], dict[tuple[int, str], Any]] | None = None
    """The estimates the operator emitted and received (`Operator.estimates`)."""


@dataclass
class Checkpoint:
    """The units' states at one checkpoint barrier; complete once every unit has saved."""

    epoch: int
    units: tuple[int, ...]
    """The number of units of each node when it was taken."""
    offsets: dict[int, int]
    """Each source node's offset: the next epoch of its own it reads (`reading.Reading`)."""
    states: dict[tuple[int, int], UnitState] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return len(self.states) == sum(self.units)

    def of_node(self, node_id: int) -> list[UnitState]:
        return [self.states[(node_id, index)] for index in range(self.units[node_id])]


@dataclass(frozen=True)
class Recovery:
    """One restore during a run: where it happened and from which checkpoint."""

    step: int
    cause: str
    """`"failure"` (a `fail_at` point) or `"rescale"`."""
    checkpoint: int | None
    """The epoch of the checkpoint restored, or None when the run restarted from scratch."""
    parallelism_before: int
    parallelism_after: int


def save_unit(unit: Unit) -> UnitState:
    """A unit's state at a checkpoint barrier."""
    return UnitState(
        operator=unit.operator.snapshot(),
        emitted=unit.operator.emitted_watermarks(),
        idleness=unit.operator.idleness(),
        mergers=[None if merger is None else merger.snapshot() for merger in unit.mergers],
        check=None if unit.check is None else dict(unit.check.watermarks),
        merged_checks=[None if c is None else dict(c.watermarks) for c in unit.merged_checks],
        order=None if unit.order_check is None else dict(unit.order_check.last),
        estimates=unit.operator.estimates(),
    )


def restore_node(saved: Sequence[UnitState], units: Sequence[Unit]) -> None:
    """Restore the fresh `units` of one node from the states its units saved.

    The same number of units: each takes back its own state. Another number:
    the operator redistributes its state (`Operator.rescale`) and every
    promise about an edge starts from the old units' common floor.
    """
    if len(saved) == len(units):
        for unit, state in zip(units, saved, strict=True):
            _restore_unit(unit, state)
        return
    count = len(units)
    states = units[0].operator.rescale(
        [state.operator for state in saved], count, lambda key: owner_of(key, count)
    )
    emitted = _common_floor(state.emitted for state in saved)
    idle = all(state.idleness[0] for state in saved)
    idle_inputs = tuple(
        all(state.idleness[1][port] for state in saved) for port in range(len(units[0].mergers))
    )
    check = _common_floor(state.check for state in saved)
    order: dict[Any, Any] = {}
    for state in saved:
        order.update(state.order or {})
    ports = len(units[0].mergers)
    merged = [_common_floor(state.merged_checks[port] for state in saved) for port in range(ports)]
    estimates = (
        _common_floor(None if s.estimates is None else s.estimates[0] for s in saved),
        _common_floor(None if s.estimates is None else s.estimates[1] for s in saved),
    )
    merger_emitted = [
        _common_floor(_merger_emitted(state.mergers[port]) for state in saved)
        for port in range(ports)
    ]
    for unit, state in zip(units, states, strict=True):
        if state is not None:
            unit.operator.restore(state)
        unit.operator.restore_emitted_watermarks(emitted)
        unit.operator.restore_estimates(estimates)
        unit.operator.restore_idleness((idle, idle_inputs))
        if unit.check is not None:
            unit.check.watermarks = dict(check)
        if unit.order_check is not None:
            unit.order_check.last = dict(order)
        for port in range(ports):
            merger, merged_check = unit.mergers[port], unit.merged_checks[port]
            if merger is not None:
                merger.restore(MergerState(0, {}, merger_emitted[port], (idle_inputs[port],)))
            if merged_check is not None:
                merged_check.watermarks = dict(merged[port])


def _restore_unit(unit: Unit, state: UnitState) -> None:
    if state.operator is not None:
        unit.operator.restore(state.operator)
    unit.operator.restore_emitted_watermarks(state.emitted)
    unit.operator.restore_estimates(state.estimates)
    unit.operator.restore_idleness(state.idleness)
    if unit.check is not None and state.check is not None:
        unit.check.watermarks = dict(state.check)
    if unit.order_check is not None and state.order is not None:
        unit.order_check.last = dict(state.order)
    for port, merger in enumerate(unit.mergers):
        saved_merger = state.mergers[port]
        if merger is not None and saved_merger is not None:
            merger.restore(saved_merger)
        elif merger is not None:  # a forward input before: its status, for every producer
            merger.restore(MergerState(0, {}, {}, (state.idleness[1][port],)))
        merged_check, saved_check = unit.merged_checks[port], state.merged_checks[port]
        if merged_check is not None and saved_check is not None:
            merged_check.watermarks = dict(saved_check)


def _merger_emitted(state: MergerState | None) -> dict[str, Any] | None:
    return None if state is None else state.emitted


def _common_floor(promises: Iterable[dict[Any, Any] | None]) -> dict[Any, Any]:
    """Per column, the minimum over all promises; a column some promise lacks is dropped."""
    listed = list(promises)
    if not listed or any(promise is None for promise in listed):
        return {}
    columns = set.intersection(*(set(promise) for promise in listed if promise is not None))
    return {
        column: min(promise[column] for promise in listed if promise is not None)
        for column in columns
    }
