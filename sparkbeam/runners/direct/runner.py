"""`DirectRunner`: runs a pipeline in-process and checks the model's invariants on every edge."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from sparkbeam.errors import PipelineError
from sparkbeam.graph import EdgeInfo, Node
from sparkbeam.messages import Watermark
from sparkbeam.runners.direct.checkpoint import CheckpointPlan, Recovery
from sparkbeam.runners.direct.combine import CombineOperator
from sparkbeam.runners.direct.connectors import ForEachBatchOperator
from sparkbeam.runners.direct.elementwise import FilterOperator, MapOperator, SelectOperator
from sparkbeam.runners.direct.executor import EdgeRecord, Executor, OperatorFactory
from sparkbeam.runners.direct.files import ReadFilesOperator, WriteFilesOperator
from sparkbeam.runners.direct.join import JoinOperator
from sparkbeam.runners.direct.operator import Operator
from sparkbeam.runners.direct.parallel import SCHEDULES, ParallelExecutor
from sparkbeam.runners.direct.session import SessionOperator
from sparkbeam.runners.direct.sort import SortOperator
from sparkbeam.runners.direct.sources import CreateOperator, TestStreamOperator
from sparkbeam.runners.direct.union import UnionOperator
from sparkbeam.runners.direct.watermark import WatermarkFilter
from sparkbeam.runners.direct.windows import HopOperator, TumbleOperator
from sparkbeam.schema import Row, columns_to_rows, to_external
from sparkbeam.transforms.combine import CombinePerKey
from sparkbeam.transforms.connectors import ForEachBatch, ReadFromSpark
from sparkbeam.transforms.elementwise import Filter, Map, Select
from sparkbeam.transforms.files import ReadFiles, WriteFiles
from sparkbeam.transforms.join import Join
from sparkbeam.transforms.sort import Sort
from sparkbeam.transforms.sources import Create, TestStreamSource
from sparkbeam.transforms.union import Union
from sparkbeam.transforms.watermark import WithWatermark
from sparkbeam.transforms.windows import Hop, Session, Tumble

if TYPE_CHECKING:
    from sparkbeam.pipeline import PCollection, Pipeline

OPERATORS: dict[type, OperatorFactory] = {
    Create: CreateOperator,
    TestStreamSource: TestStreamOperator,
    WithWatermark: WatermarkFilter,
    Map: MapOperator,
    Filter: FilterOperator,
    Select: SelectOperator,
    Tumble: TumbleOperator,
    Hop: HopOperator,
    CombinePerKey: CombineOperator,
    Sort: SortOperator,
    Session: SessionOperator,
    Union: UnionOperator,
    Join: JoinOperator,
    ReadFiles: ReadFilesOperator,
    WriteFiles: WriteFilesOperator,
    ForEachBatch: ForEachBatchOperator,
}


def operator_for(node: Node, inputs: Sequence[EdgeInfo]) -> Operator:
    factory = OPERATORS.get(type(node.transform))
    if isinstance(node.transform, ReadFromSpark):
        raise PipelineError(
            f"{node.label}: ReadFromSpark reads through Spark's connectors and runs on the Spark "
            "runner only; to test the pipeline on the direct runner, read sample rows with a "
            "TestStream or ReadFiles instead"
        )
    if factory is None:
        raise PipelineError(
            f"{node.label}: {type(node.transform).__name__} is not supported on the direct runner"
        )
    return factory(node, inputs)


class DirectRunner:
    """Runs a pipeline in this process, epoch by epoch.

    With `check_invariants=True` (the default) every edge is checked for
    invariant W; a violation raises `sb.InvariantViolation`. Rows and
    watermarks are recorded for the PCollections the caller still holds a
    reference to when the pipeline runs (so a long chain's intermediate
    results cost no memory).

    The other arguments run the pipeline as production would, for checking
    (`runners.direct.parallel` and `runners.direct.checkpoint`):

    - `parallelism=N`: every transform runs as N units, with exchanges
      before the keyed ones.
    - `schedule="fixed"` (a fixed order of units, shuffled once with `seed`)
      or `"random"` (units, inputs and sources interleaved at random, from
      `seed`).
    - `checkpoint_every=K`: every K-th barrier is a checkpoint.
    - `fail_at=step` or a list of steps: the run is aborted after that many
      messages have been delivered (mid-epoch included) and restored from the
      last complete checkpoint (from scratch if there is none); the sources
      replay from their saved offsets. Steps the run never reaches do
      nothing; `result.recoveries` lists the restores that happened.
    - `rescale={epoch: N}`: barrier `epoch` is a checkpoint, and once it is
      complete the run continues from it with N units (an epoch past the
      last one never comes, so it changes nothing).

    With all of them at their defaults the single-unit executor runs (the
    fast path); otherwise the parallel one, even for `parallelism=1`.
    """

    def __init__(
        self,
        check_invariants: bool = True,
        *,
        parallelism: int = 1,
        schedule: str = "fixed",
        seed: int = 0,
        checkpoint_every: int | None = None,
        fail_at: int | Iterable[int] | None = None,
        rescale: Mapping[int, int] | None = None,
    ) -> None:
        self.check_invariants = check_invariants
        if schedule not in SCHEDULES:
            raise PipelineError(
                f"DirectRunner: schedule={schedule!r}; use 'fixed' (a fixed order of units) "
                "or 'random' (units and inputs interleaved at random, from seed=)"
            )
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise PipelineError(f"DirectRunner: seed must be an integer, got {seed!r}")
        self.plan = CheckpointPlan.of(parallelism, checkpoint_every, fail_at, rescale)
        self.schedule = schedule
        self.seed = seed

    @property
    def parallel(self) -> bool:
        """Whether the run uses parallel units (anything but the defaults)."""
        plan = self.plan
        return (
            plan.parallelism != 1
            or self.schedule != "fixed"
            or plan.every is not None
            or bool(plan.fail_at)
            or bool(plan.rescale)
        )

    def run(self, pipeline: Pipeline) -> DirectResult:
        nodes = pipeline.nodes
        if self.parallel:
            return self._run_parallel(pipeline)
        operators = [operator_for(node, [nodes[i].info for i in node.inputs]) for node in nodes]
        executor = Executor(nodes, operators, pipeline.live_node_ids(), self.check_invariants)
        executor.run()
        return DirectResult(
            pipeline, [[op] for op in operators], executor.records, executor.epochs, executor.peaks
        )

    def _run_parallel(self, pipeline: Pipeline) -> DirectResult:
        executor = ParallelExecutor(
            pipeline.nodes,
            operator_for,
            pipeline.live_node_ids(),
            self.check_invariants,
            self.plan,
            schedule=self.schedule,
            seed=self.seed,
        )
        executor.run()
        return DirectResult(
            pipeline,
            executor.operators(),
            executor.finished_records(),
            executor.epochs,
            executor.peaks,
            steps=executor.steps,
            recoveries=executor.recoveries,
        )


class DirectResult:
    """The rows, watermarks and counters of a direct run (SPEC section 5)."""

    def __init__(
        self,
        pipeline: Pipeline,
        units: Sequence[Sequence[Operator]],
        records: dict[int, EdgeRecord],
        epochs: int,
        peaks: Sequence[int],
        steps: int = 0,
        recoveries: Sequence[Recovery] = (),
    ) -> None:
        self.pipeline = pipeline
        self.units = units
        """Each node's operators, one per unit (the last units, after any rescale)."""
        self.records = records
        self.epochs = epochs
        self.peaks = peaks
        self.steps = steps
        """Messages delivered by a parallel run (failed attempts included); 0 otherwise."""
        self.recoveries = list(recoveries)
        """The restores of a parallel run (failures and rescales), in order."""

    @property
    def operators(self) -> list[Operator]:
        """Each node's operator (its first unit's, on a parallel run)."""
        return [units[0] for units in self.units]

    def _record(self, pcoll: PCollection) -> EdgeRecord:
        if pcoll.pipeline is not self.pipeline:
            raise PipelineError(f"{pcoll.node.label}: that PCollection is of another pipeline")
        record = self.records.get(pcoll.node.id)
        if record is None:
            raise PipelineError(
                f"{pcoll.node.label}: its rows were not kept, because nothing held the "
                "PCollection when the pipeline ran; keep it in a variable before running"
            )
        return record

    def collect(self, pcoll: PCollection) -> list[Row]:
        """Every row `pcoll` emitted, in emission order."""
        return [row for epoch in self.collect_by_epoch(pcoll) for row in epoch]

    def collect_by_epoch(self, pcoll: PCollection) -> list[list[Row]]:
        """The rows emitted during each input epoch, then those of the end-of-input flush."""
        schema = pcoll.schema
        return [
            [row for chunk in chunks for row in columns_to_rows(chunk.columns, schema)]
            for chunks in self._record(pcoll).chunks
        ]

    def watermarks(self, pcoll: PCollection) -> list[Watermark]:
        """The watermark messages on `pcoll`'s edge, in order."""
        schema = pcoll.schema
        out = []
        for mark in self._record(pcoll).watermarks:
            convert = to_external(schema.type_of(mark.column))
            out.append(Watermark(mark.column, convert([mark.value])[0] if convert else mark.value))
        return out

    def _filters(self, pcoll: PCollection) -> list[WatermarkFilter]:
        filters = [op for op in self.units[pcoll.node.id] if isinstance(op, WatermarkFilter)]
        if not filters:
            raise PipelineError(
                f"{pcoll.node.label}: late rows are counted by WithWatermark; pass the "
                "PCollection that .with_watermark(...) returned"
            )
        return filters

    def late_count(self, pcoll: PCollection) -> int:
        """Rows dropped as late by the `WithWatermark` that produced `pcoll` (all units)."""
        return sum(f.late_count for f in self._filters(pcoll))

    def invalid_count(self, pcoll: PCollection) -> int:
        """Rows dropped by that `WithWatermark` because their event time was `None`."""
        return sum(f.invalid_count for f in self._filters(pcoll))

    def state_size(self, pcoll: PCollection) -> int:
        """Rows or groups the operator that produced `pcoll` still holds (0 after the flush)."""
        return sum(op.state_size() for op in self.units[pcoll.node.id])

    def peak_state_size(self, pcoll: PCollection) -> int:
        """The most rows or groups the operator that produced `pcoll` held at once (all units)."""
        return self.peaks[pcoll.node.id]
