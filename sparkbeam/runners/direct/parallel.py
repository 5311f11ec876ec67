"""Parallel units on the direct runner: each transform as several units, with exchanges.

`ParallelExecutor` runs a pipeline the way a production engine does, in one
process and deterministically, to check that the model's rules hold there
too (`sb.DirectRunner(parallelism=N, ...)`). The single-unit `Executor`
stays the fast path; this one is for checking.

Layout (`Layout.of`), for parallelism N:

- A source runs as N units; unit `i` takes rows `i, i + N, i + 2N, ...` of
  each epoch (round robin, in order).
- A transform that keeps state per key runs behind an exchange that
  partitions by its key columns (`exchange.KeyRoute`): `CombinePerKey` (its
  keys), `Session` and `Sort` (their `keys`), `Join` (`on`, both sides). With
  no key columns (a `Sort` or `Session` without keys, a global
  `CombinePerKey`) and for `WriteFiles` it runs as one unit and the exchange
  gathers every row. So a `Sort` always sees the global watermark: the
  minimum over the units that feed it, never one unit's local watermark.
- Every other transform runs as many units as its input (`Union`: the most
  of its inputs), unit `i` fed by unit `i` of its input (a forward edge).
  `WithWatermark` is one of them: each unit filters its own rows. An input
  with fewer units than its consumer is spread by an exchange without a key.

Watermark filters: the units of one `WithWatermark` meet at every barrier
(Spark's micro-batch; RisingWave's filter makes its watermark global at
barriers too): each waits, its inputs blocked, until all have aligned it,
then `WatermarkFilter.agree` gives them what all of them saw, and they pass
it on in unit order. With `emit="periodic"` every unit then raises the same
watermark, from the largest event time seen by all units, and filters the
next epoch with it: which rows are late never depends on how rows are spread
over units, and a unit that saw no row follows the global watermark too.
With `emit="event"` each unit keeps its own (the watermark rises within an
epoch, row by row). Idleness is decided per filter, from all its units.

Messages: chunks, watermarks, `Barrier(epoch)` and `END` (end of input).
Every input of a unit is a FIFO channel; a unit takes one message at a
time. An exchange input goes through the unit's merger for that port
(`exchange.Merger`). A channel that delivers a barrier is blocked until every
channel of the unit has delivered it (aligned barriers; for a filter, until
all its units have: above); then the operator's `on_barrier` runs, a
checkpoint barrier saves the unit's state, and the barrier goes out on every
output. `END` is aligned the same way (`on_end`).

Schedules: one step delivers one message (a source's step emits its next
chunk, barrier or `END`). `"fixed"` (default): the units in one order,
shuffled with `seed` and the parallelism (the same order again after a
fail-over); each step serves the first unit in that order with a message to
take (its first open channel), and only when no unit has one does a source
emit: the first in that order among those furthest behind (so the sources'
units keep in step, epoch by epoch). `"random"`: each step picks, with a
`random.Random(seed)`, one of the units (sources included) that can take a
step, and one of its open channels: units, inputs and sources interleave at
random, and sources may run epochs ahead.

Checks (with `check_invariants`): invariant W on every unit's output and on
every merger's output (so watermarks never decrease on any edge), the order
after `Sort`, and at every barrier the global watermark
(`checks.GlobalWatermarkCheck`).

Merges: a unit with several inputs (`Union`, `Join`) takes the rows of an
epoch at once and its inputs' watermarks and statuses when it aligns the
barrier (`_apply_deferred`), every `ACTIVE` first and the rest in the order
parallelism 1 delivers them; the operators themselves apply an epoch's
watermarks at its end (`union.UnionOperator`), so every row of an epoch is
judged against the watermark of the epoch before, whatever the schedule.
Statuses (`Idleness`) travel like watermarks: broadcast, and through an
exchange's merger (a port is idle when every producing unit is).

Dropped rows (`SideRows`) go only to the units of the `DroppedRows` nodes
reading that kind (forward edges, as for any transform without keys), as
their chunks; they get no watermark. Watermark alignment (`max_drift`): which
epoch each source reads is planned per pipeline epoch (`reading.Reading`),
the next one once every filter has ended the last.

What parallelism changes: with `emit="periodic"` everywhere, nothing a run
gives (rows and late rows per epoch, the sort order within each key, the
watermark each epoch ends on, late and invalid counts; tested by random
pipelines in `tests/runners/direct/test_parallel.py`). What remains: the
order of rows within an epoch, ties of a `Sort` across units, the
watermarks in between those an epoch ends on where inputs do not come
straight from their filters, peak state sizes, and, with `emit="event"`,
the filters' local watermarks (docs/testing.md).

Results are merged over units: the rows of a PCollection per epoch in the
order its units emitted them; its watermarks are those its units emitted,
merged epoch by epoch as an exchange would merge them (the PCollection's
global watermark); counters are summed over units and the peak state is the
peak of the sum over units. `fail_at` and `rescale`: see `checkpoint`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import cast

from sparkbeam.graph import EdgeInfo, Node
from sparkbeam.messages import Watermark
from sparkbeam.runners.direct.alignment import Alignment, filters_of
from sparkbeam.runners.direct.checkpoint import (
    Checkpoint,
    CheckpointPlan,
    Recovery,
    restore_node,
    save_unit,
)
from sparkbeam.runners.direct.checks import EdgeCheck, GlobalWatermarkCheck, OrderCheck
from sparkbeam.runners.direct.exchange import FixedRoute, KeyRoute, Merger, Route
from sparkbeam.runners.direct.executor import EdgeCounters, EdgeRecord
from sparkbeam.runners.direct.operator import Chunk, Idleness, Message, Operator, SideRows
from sparkbeam.runners.direct.reading import Reading, hold_none
from sparkbeam.runners.direct.units import (
    END,
    Barrier,
    Candidates,
    Channel,
    EndOfInput,
    Layout,
    Output,
    SourceUnit,
    Unit,
    UnitsRecord,
)
from sparkbeam.runners.direct.watermark import WatermarkFilter
from sparkbeam.runners.shared.alignment import AlignmentGraph
from sparkbeam.transforms.late import DroppedRows, side_outputs
from sparkbeam.transforms.watermark import WithWatermark

OperatorFactory = Callable[[Node, Sequence[EdgeInfo]], Operator]
SCHEDULES = ("fixed", "random")


def barrier_ranks(nodes: Sequence[Node]) -> list[int]:
    """Per node, its place in the order the single-unit executor ends an epoch on the nodes
    (`on_barrier`; `executor.Executor._barrier`): sources in graph order, each followed depth
    first, a node once its last input has ended the epoch."""
    followers: list[list[int]] = [[] for _ in nodes]
    for node in nodes:
        for producer in node.inputs:
            followers[producer].append(node.id)
    arrivals = [0] * len(nodes)
    ranks = [0] * len(nodes)
    order = [0]

    def end_epoch(node_id: int) -> None:
        ranks[node_id] = order[0]
        order[0] += 1
        for follower in followers[node_id]:
            arrivals[follower] += 1
            if arrivals[follower] == len(nodes[follower].inputs):
                end_epoch(follower)

    for node in nodes:
        if not node.inputs:
            end_epoch(node.id)
    return ranks


class ParallelExecutor:
    """Runs the graph as parallel units with exchanges, a schedule, checkpoints and failures."""

    def __init__(
        self,
        nodes: Sequence[Node],
        factory: OperatorFactory,
        recorded: frozenset[int],
        check_invariants: bool,
        plan: CheckpointPlan,
        schedule: str = "fixed",
        seed: int = 0,
    ) -> None:
        self.nodes = nodes
        self.factory = factory
        self.check_invariants = check_invariants
        self.plan = plan
        self.schedule = schedule
        self.seed = seed
        self.rng = random.Random(seed)
        self.layout = Layout.of(nodes, plan.parallelism_after(-1))
        self.ranks = barrier_ranks(nodes)
        self.sides = side_outputs(nodes)
        self.aligned = AlignmentGraph.of(nodes)
        self._build(start_epoch=0)
        self.reading = Reading(
            {u.node.id: u.source.epoch_count for u in self.sources}, self.aligned is not None
        )
        self.epochs = self.reading.end or 0
        """The number of pipeline epochs (with `max_drift`: known once the input has ended)."""
        self.released = [0]
        """Per epoch: how many filters have ended it (with `max_drift` the next is then planned)."""
        self.records = {
            node_id: UnitsRecord(
                self.epochs, self.layout.units[node_id], nodes[node_id].info.updates is not None
            )
            for node_id in recorded
        }
        self.counters = [
            [EdgeCounters(node.info.watermarked) for _ in range(self.epochs + 1)] for node in nodes
        ]
        """Per node and epoch: the rows emitted and their largest watermarked values."""
        self.peaks = [0] * len(nodes)
        self.steps = 0
        self.recoveries: list[Recovery] = []
        self.latest: Checkpoint | None = None
        self.taking: dict[int, Checkpoint] = {}
        self.rescale_due: Checkpoint | None = None

    # building the units

    def _build(self, start_epoch: int) -> None:
        layout, nodes = self.layout, self.nodes
        self.units: list[list[Unit]] = []
        for node in nodes:
            infos = [nodes[i].info for i in node.inputs]
            count = layout.units[node.id]
            kind = SourceUnit if not node.inputs else Unit
            units = [kind(node, i, count, self.factory(node, infos)) for i in range(count)]
            for unit in units:
                unit.operator.sides = self.sides.get(node.id, frozenset())
            self.units.append(units)
        self.global_checks: dict[tuple[int, int], GlobalWatermarkCheck] = {}
        self.groups: dict[int, list[Unit]] = {
            node.id: [] for node in nodes if isinstance(node.transform, WithWatermark)
        }
        """Per `WithWatermark` node: its units waiting at the barrier for the others."""
        self.pending = Candidates()
        """Units that may have a step to take: unfinished sources, units with messages."""
        for node in nodes:
            for port, producer in enumerate(node.inputs):
                self._connect(producer, node, port)
        for node in nodes:
            for unit in self.units[node.id]:
                unit.epoch = start_epoch
                if self.check_invariants:
                    unit.check = EdgeCheck(
                        unit.name, node.info.schema, node.info.updates, resumed=start_epoch > 0
                    )
                    order = node.transform.output_order()
                    if order is not None:
                        unit.order_check = OrderCheck(
                            unit.name, node.info.schema, order[0], order[1]
                        )
        self.sources = [u for units in self.units for u in units if isinstance(u, SourceUnit)]
        for source in self.sources:
            self.pending.add(source)
        self.order = [unit for units in self.units for unit in units]
        random.Random(self.seed * 1009 + layout.parallelism).shuffle(self.order)
        self.totals = [0] * len(nodes)
        self.alignment = (
            None if self.aligned is None else Alignment(self.aligned, filters_of(self.operators()))
        )

    def _connect(self, producer: int, node: Node, port: int) -> None:
        layout = self.layout
        producers, consumers = self.units[producer], self.units[node.id]
        pending = self.pending
        side = node.transform.kind if isinstance(node.transform, DroppedRows) else None
        if not layout.exchange(producer, node.id):
            for source, target in zip(producers, consumers, strict=True):
                channel = Channel(port, 0, target, pending)
                target.channels.append(channel)
                source.outputs.append(Output(FixedRoute(0), [channel], side))
            return
        schema = self.nodes[producer].info.schema
        inbound = [
            [Channel(port, j, target, pending) for j in range(len(producers))]
            for target in consumers
        ]
        for target, channels in zip(consumers, inbound, strict=True):
            target.channels.extend(channels)
            target.mergers[port] = Merger(len(producers))
            if self.check_invariants:
                target.merged_checks[port] = EdgeCheck(
                    f"the exchange into {target.name}, input {port}", schema
                )
        keys = layout.keys[node.id]
        for j, source in enumerate(producers):
            route: Route = (
                KeyRoute(keys, len(consumers))
                if keys is not None
                else FixedRoute(j % len(consumers))
            )
            source.outputs.append(Output(route, [channels[j] for channels in inbound]))
        if self.check_invariants:
            self.global_checks[(node.id, port)] = GlobalWatermarkCheck(
                f"{node.label}, input {port}", schema, len(consumers)
            )

    # the run

    def run(self) -> None:
        failures = list(self.plan.fail_at)
        while True:
            if self.rescale_due is not None:
                checkpoint, self.rescale_due = self.rescale_due, None
                self._restore(checkpoint, "rescale")
                continue
            if failures and self.steps >= failures[0]:
                failures.pop(0)
                self._restore(self.latest, "failure")
                continue
            picked = self._pick()
            if picked is None:
                break
            unit, channel = picked
            self.steps += 1
            if channel is None:
                assert isinstance(unit, SourceUnit)
                self._source_step(unit)
            else:
                self._deliver(unit, channel)
        stuck = [unit.name for units in self.units for unit in units if not unit.done]
        if stuck:
            raise RuntimeError(f"parallel run ended with units still running: {stuck}")
        for units in self.units:
            for unit in units:
                if unit.check is not None:
                    unit.check.end()
        assert self.reading.end is not None
        self.epochs = self.reading.end

    def _pick(self) -> tuple[Unit, Channel | None] | None:
        if self.schedule == "random":
            pending, rng = self.pending, self.rng
            while pending.items:
                unit = pending.items[rng.randrange(len(pending.items))]
                if isinstance(unit, SourceUnit):
                    if unit.ready(self.reading):
                        return unit, None
                else:
                    channels = unit.open_channels()
                    if channels:
                        return unit, rng.choice(channels)
                pending.remove(unit)  # added again when a message comes or it unblocks
            return None
        for unit in self.order:
            for channel in unit.channels:
                if channel.queue and not channel.blocked:
                    return unit, channel
        behind: SourceUnit | None = None
        for source in self.order:
            if (
                isinstance(source, SourceUnit)
                and source.ready(self.reading)
                and (behind is None or source.epoch < behind.epoch)
            ):
                behind = source
        return None if behind is None else (behind, None)

    def _source_step(self, unit: SourceUnit) -> None:
        signal = unit.next_signal(self.reading)
        if isinstance(signal, Chunk):
            self._emit(unit, [signal])
        elif isinstance(signal, Barrier):
            self._pass_barrier(unit, signal)
        else:
            self._pass_end(unit)

    def _deliver(self, unit: Unit, channel: Channel) -> None:
        signal = channel.queue.popleft()
        port = channel.port
        out: list[Message]
        if isinstance(signal, Chunk):
            merged_check = unit.merged_checks[port]
            if merged_check is not None:
                merged_check.chunk(signal)
            out = unit.operator.on_chunk(port, signal)
        elif isinstance(signal, Watermark):
            merger = unit.mergers[port]
            if merger is not None:
                merged = merger.on_watermark(channel.source, signal)
                if merged is None:
                    return
                merged_check = unit.merged_checks[port]
                if merged_check is not None:
                    merged_check.watermark(merged)
                signal = merged
            if unit.deferred is not None:
                unit.deferred.append((port, signal))
                return
            out = unit.operator.receive_watermark(port, signal)
        elif isinstance(signal, Idleness):
            merger = unit.mergers[port]
            if merger is not None:
                status = merger.on_status(channel.source, signal)
                if status is None:
                    return
                signal = status
            if unit.deferred is not None:
                unit.deferred.append((port, signal))
                return
            out = unit.operator.on_status(port, signal)
        else:
            channel.blocked = True
            unit.waiting += 1
            if unit.waiting == len(unit.channels):
                self._align(unit, signal)
            return
        self._emit(unit, out)
        self._track_state(unit)

    def _align(self, unit: Unit, signal: Barrier | EndOfInput) -> None:
        unit.waiting = 0
        group = self.groups.get(unit.node.id)
        if group is not None and isinstance(signal, Barrier):
            # A filter's units meet at the barrier: its channels stay blocked until all are here.
            group.append(unit)
            if len(group) < len(self.units[unit.node.id]):
                return
            self.groups[unit.node.id] = []
            filters = [cast(WatermarkFilter, u.operator) for u in group]
            if self.alignment is not None:
                self.alignment.pause_filter(unit.node.id, self.reading.held[signal.epoch])
            WatermarkFilter.agree(filters)
            for parked in sorted(group, key=lambda u: u.index):
                self._release(parked, signal)
            self._filter_ended(signal.epoch)
            return
        self._release(unit, signal)

    def _release(self, unit: Unit, signal: Barrier | EndOfInput) -> None:
        for channel in unit.channels:
            channel.blocked = False
        self.pending.add(unit)
        if unit.deferred:
            self._apply_deferred(unit)
        if isinstance(signal, Barrier):
            self._emit(unit, unit.operator.on_barrier(signal.epoch))
            self._track_state(unit)
            for port, merger in enumerate(unit.mergers):
                check = self.global_checks.get((unit.node.id, port))
                if merger is not None and check is not None:
                    check.barrier(signal.epoch, unit.index, merger.emitted)
            self._pass_barrier(unit, signal)
        else:
            self._emit(unit, unit.operator.on_end())
            self._track_state(unit)
            self._pass_end(unit)

    def _filter_ended(self, epoch: int) -> None:
        """One more filter ended `epoch`; with `max_drift`, once all have: plan the next."""
        released = self.released
        while len(released) <= epoch:
            released.append(0)
        released[epoch] += 1
        if self.alignment is not None and released[epoch] == len(self.groups):
            self.reading.decide_after(epoch, self.alignment.held)
            for source in self.sources:
                self.pending.add(source)

    def _apply_deferred(self, unit: Unit) -> None:
        """Give a merging unit the watermarks and statuses of the epoch, in a fixed order.

        First every `ACTIVE` (an input that brought rows in the epoch, which
        parallelism 1 sees before any watermark of its end), then the rest by
        input, in the order parallelism 1 ends the epoch on them
        (`barrier_ranks`), each input's in arrival order. The merged values
        an epoch ends on do not depend on that order (watermarks only rise;
        inputs going idle are left out together at the barrier,
        `union.WatermarkMerger.settle`); the order makes the watermarks in
        between those of parallelism 1 too, where inputs come straight from
        their filters.
        """
        assert unit.deferred is not None
        deferred, unit.deferred = unit.deferred, []
        ranks = [self.ranks[producer] for producer in unit.node.inputs]
        active = [(port, m) for port, m in deferred if isinstance(m, Idleness) and not m.idle]
        rest = [(port, m) for port, m in deferred if not isinstance(m, Idleness) or m.idle]
        rest.sort(key=lambda item: (ranks[item[0]], item[0]))
        operator = unit.operator
        for port, message in active + rest:
            if isinstance(message, Watermark):
                self._emit(unit, operator.receive_watermark(port, message))
            else:
                self._emit(unit, operator.on_status(port, message))
        self._track_state(unit)

    def _pass_barrier(self, unit: Unit, barrier: Barrier) -> None:
        epoch = barrier.epoch
        if self.plan.is_checkpoint(epoch):
            self._save(unit, epoch)
        for output in unit.outputs:
            output.broadcast(barrier)
        unit.epoch = epoch + 1

    def _pass_end(self, unit: Unit) -> None:
        for output in unit.outputs:
            output.broadcast(END)
        unit.done = True

    def _emit(self, unit: Unit, messages: list[Message]) -> None:
        record = self.records.get(unit.node.id)
        for message in messages:
            if isinstance(message, Chunk):
                if message.size == 0:
                    continue
                if unit.check is not None:
                    unit.check.chunk(message)
                if unit.order_check is not None:
                    unit.order_check.chunk(message)
                if record is not None:
                    record.epoch(unit.epoch).append(message)
                self._counters(unit.node.id, unit.epoch).chunk(message)
                for output in unit.outputs:
                    if output.side is None:
                        output.send(message)
            elif isinstance(message, SideRows):
                for output in unit.outputs:
                    if output.side == message.kind:
                        output.send(message.chunk)
            elif isinstance(message, Idleness):
                for output in unit.outputs:
                    if output.side is None:
                        output.broadcast(message)
            else:
                assert isinstance(message, Watermark), f"{unit.name}: {message!r} with units"
                if unit.check is not None:
                    unit.check.watermark(message)
                if record is not None:
                    record.events.append((unit.epoch, unit.index, message))
                for output in unit.outputs:
                    if output.side is None:
                        output.broadcast(message)

    def _counters(self, node_id: int, epoch: int) -> EdgeCounters:
        counters = self.counters[node_id]
        while len(counters) <= epoch:
            counters.append(EdgeCounters(self.nodes[node_id].info.watermarked))
        return counters[epoch]

    def _track_state(self, unit: Unit) -> None:
        size = unit.operator.state_size()
        if size != unit.state:
            node_id = unit.node.id
            self.totals[node_id] += size - unit.state
            unit.state = size
            if self.totals[node_id] > self.peaks[node_id]:
                self.peaks[node_id] = self.totals[node_id]

    # checkpoints

    def _save(self, unit: Unit, epoch: int) -> None:
        checkpoint = self.taking.get(epoch)
        if checkpoint is None:
            checkpoint = self.taking[epoch] = Checkpoint(
                epoch, self.layout.units, self.reading.offsets(epoch)
            )
        checkpoint.states[(unit.node.id, unit.index)] = save_unit(unit)
        if not checkpoint.complete:
            return
        self.latest = checkpoint
        for done in [e for e in self.taking if e <= epoch]:
            del self.taking[done]
        if self.plan.parallelism_after(epoch) != self.layout.parallelism:
            self.rescale_due = checkpoint

    def _restore(self, checkpoint: Checkpoint | None, cause: str) -> None:
        """Rebuild every unit and restore it from `checkpoint` (None: from scratch)."""
        epoch = -1 if checkpoint is None else checkpoint.epoch
        before = self.layout
        self.layout = Layout.of(self.nodes, self.plan.parallelism_after(epoch))
        self._build(start_epoch=epoch + 1)
        if checkpoint is not None:
            for node in self.nodes:
                restore_node(checkpoint.of_node(node.id), self.units[node.id])
        for units in self.units:
            for unit in units:
                self._track_state(unit)
        del self.released[epoch + 1 :]
        hold = self.alignment.held if self.alignment is not None else hold_none
        self.reading.restore(epoch, None if checkpoint is None else checkpoint.offsets, hold)
        for node_id, record in self.records.items():
            record.truncate(epoch)
            count = self.layout.units[node_id]
            if count != before.units[node_id]:
                record.events.append((epoch, -1, count))
        for counters in self.counters:
            for later in range(epoch + 1, len(counters)):
                counters[later] = EdgeCounters(frozenset(counters[later].maxima))
        self.taking.clear()
        self.recoveries.append(
            Recovery(
                self.steps,
                cause,
                None if checkpoint is None else epoch,
                before.parallelism,
                self.layout.parallelism,
            )
        )

    # results

    def operators(self) -> list[list[Operator]]:
        return [[unit.operator for unit in units] for units in self.units]

    def finished_records(self) -> dict[int, EdgeRecord]:
        return {node_id: record.finish(self.epochs) for node_id, record in self.records.items()}
