"""`DirectRunner`: runs a pipeline in-process and checks the model's invariants on every edge."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from sparkbeam.errors import SPARKBEAM_ERRORS, PipelineError, unexpected
from sparkbeam.graph import EdgeInfo, Node
from sparkbeam.messages import Watermark
from sparkbeam.metrics import PipelineMetrics, TransformMetrics
from sparkbeam.paths import DRIVER
from sparkbeam.results import ResultViews
from sparkbeam.runners.direct import limits
from sparkbeam.runners.direct.checkpoint import CheckpointPlan, Recovery
from sparkbeam.runners.direct.combine import FinalsOperator, combine_operator
from sparkbeam.runners.direct.connectors import ForEachBatchOperator
from sparkbeam.runners.direct.elementwise import FilterOperator, MapOperator, SelectOperator
from sparkbeam.runners.direct.executor import (
    EdgeCounters,
    EdgeRecord,
    Executor,
    OperatorFactory,
)
from sparkbeam.runners.direct.files import ReadFilesOperator, WriteFilesOperator
from sparkbeam.runners.direct.flat import FlatMapOperator
from sparkbeam.runners.direct.join import JoinOperator
from sparkbeam.runners.direct.late import DroppedRowsOperator
from sparkbeam.runners.direct.operator import Operator, lowest_of
from sparkbeam.runners.direct.parallel import SCHEDULES, ParallelExecutor
from sparkbeam.runners.direct.session import SessionOperator
from sparkbeam.runners.direct.sort import SortOperator
from sparkbeam.runners.direct.sources import CreateOperator, TestStreamOperator
from sparkbeam.runners.direct.union import UnionOperator
from sparkbeam.runners.direct.watermark import WatermarkFilter
from sparkbeam.runners.direct.windows import HopOperator, TumbleOperator
from sparkbeam.runners.shared.writes import refuse_existing_outputs, refuse_overlapping_writes
from sparkbeam.schema import Row, columns_to_rows, to_external
from sparkbeam.time import ONE_MICROSECOND
from sparkbeam.transforms.combine import CombinePerKey, Finals
from sparkbeam.transforms.connectors import ForEachBatch, ReadFromSpark
from sparkbeam.transforms.elementwise import Filter, Map, Select
from sparkbeam.transforms.files import ReadFiles, WriteFiles
from sparkbeam.transforms.flat import FlatMap
from sparkbeam.transforms.join import Join
from sparkbeam.transforms.late import DroppedRows
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
    FlatMap: FlatMapOperator,
    Filter: FilterOperator,
    Select: SelectOperator,
    Tumble: TumbleOperator,
    Hop: HopOperator,
    CombinePerKey: combine_operator,
    Finals: FinalsOperator,
    Sort: SortOperator,
    Session: SessionOperator,
    Union: UnionOperator,
    Join: JoinOperator,
    ReadFiles: ReadFilesOperator,
    WriteFiles: WriteFilesOperator,
    ForEachBatch: ForEachBatchOperator,
    DroppedRows: DroppedRowsOperator,
}


def operator_for(node: Node, inputs: Sequence[EdgeInfo]) -> Operator:
    factory = OPERATORS.get(type(node.transform))
    if isinstance(node.transform, ReadFromSpark):
        raise limits.READ_FROM_SPARK.error(node.label)
    if factory is None:
        raise limits.NO_OPERATOR.error(node.label, kind=type(node.transform).__name__)
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
    fast path); otherwise the parallel one, even for `parallelism=1`. With
    `emit="periodic"` (the default) every result is the same either way,
    epoch by epoch: the units of a `WithWatermark` share one watermark per
    epoch, as a Spark micro-batch does; `idle_after` and `max_drift` are
    decided per `WithWatermark` from all its units. With `emit="event"` each
    unit keeps its own watermark (docs/testing.md, "How parallel units run").

    `idle_after` counts epochs: given as a duration of processing time it is
    refused on unbounded input (the direct runner has no processing time);
    on bounded input (one epoch) it changes nothing.
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
        if not isinstance(check_invariants, bool):
            raise PipelineError(
                f"DirectRunner: check_invariants={check_invariants!r}; use True or False"
            )
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
        """Run `pipeline`; every exception is sparkbeam's: one of another kind
        escaping a transform's processing (a file system's, sparkbeam's own bug) becomes a
        `PipelineError` naming that transform (`failed_operator`), the original its cause."""
        try:
            return self._run(pipeline)
        except SPARKBEAM_ERRORS:
            raise
        except Exception as exc:
            label = failed_operator(exc) or f"DirectRunner (running {pipeline.nodes[-1].label})"
            raise unexpected(label, exc) from exc

    def _run(self, pipeline: Pipeline) -> DirectResult:
        nodes = pipeline.nodes
        self._check(nodes)
        if self.parallel:
            return self._run_parallel(pipeline)
        operators = [operator_for(node, [nodes[i].info for i in node.inputs]) for node in nodes]
        executor = Executor(nodes, operators, pipeline.live_node_ids(), self.check_invariants)
        executor.run()
        return DirectResult(
            pipeline,
            [[op] for op in operators],
            executor.records,
            executor.epochs,
            executor.peaks,
            counters=executor.counters,
        )

    def _check(self, nodes: Sequence[Node]) -> None:
        """Refuse what this runner does not model, and writes that would lose rows, before
        anything runs."""
        refuse_overlapping_writes(nodes)
        refuse_existing_outputs(nodes, DRIVER)
        bounded = all(node.info.bounded for node in nodes)
        for node in nodes:
            transform = node.transform
            if not isinstance(transform, WithWatermark):
                continue
            if not bounded and transform.idle_time(node.label) is not None:
                raise limits.IDLE_PROCESSING_TIME.error(node.label, idle_after=transform.idle_after)

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
            counters=[_summed(per_epoch) for per_epoch in executor.counters],
        )


def failed_operator(exc: BaseException) -> str | None:
    """The label of the innermost operator whose method `exc` passed through: the transform
    that was processing when it was raised."""
    label = None
    tb = exc.__traceback__
    while tb is not None:
        owner = tb.tb_frame.f_locals.get("self")
        if isinstance(owner, Operator):
            label = owner.label
        tb = tb.tb_next
    return label


def _summed(counters: Sequence[EdgeCounters]) -> EdgeCounters:
    """The counters of one edge over several epochs."""
    total = EdgeCounters(frozenset(counters[0].maxima) if counters else frozenset())
    for counter in counters:
        total.rows += counter.rows
        for column, value in counter.maxima.items():
            top = total.maxima[column]
            if value is not None and (top is None or value > top):  # type: ignore[operator]
                total.maxima[column] = value
    return total


class DirectResult(ResultViews):
    """The rows, watermarks and counters of a direct run."""

    def __init__(
        self,
        pipeline: Pipeline,
        units: Sequence[Sequence[Operator]],
        records: dict[int, EdgeRecord],
        epochs: int,
        peaks: Sequence[int],
        steps: int = 0,
        recoveries: Sequence[Recovery] = (),
        counters: Sequence[EdgeCounters] = (),
    ) -> None:
        self.pipeline = pipeline
        self.node_count = len(pipeline.nodes)
        self.counters = counters
        """Per node: the rows it emitted and the largest value of each watermarked column."""
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
        record = self.records.get(self.of_run(pcoll).node.id)
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
        schema = self.of_run(pcoll).schema
        return [
            [row for chunk in chunks for row in columns_to_rows(chunk.columns, schema)]
            for chunks in self._record(pcoll).chunks
        ]

    def watermarks(self, pcoll: PCollection) -> list[Watermark]:
        """The watermark messages on `pcoll`'s edge, in order."""
        schema = self.of_run(pcoll).schema
        out = []
        for mark in self._record(pcoll).watermarks:
            convert = to_external(schema.type_of(mark.column))
            value, estimate = mark.value, mark.estimate
            if convert:
                value, estimate = convert([value, estimate])
            out.append(Watermark(mark.column, value, estimate))
        return out

    def _filters(self, pcoll: PCollection) -> list[WatermarkFilter]:
        units = self.units[self.of_run(pcoll).node.id]
        filters = [op for op in units if isinstance(op, WatermarkFilter)]
        if not filters:
            raise PipelineError(
                f"{pcoll.node.label}: rows with no event time are counted by WithWatermark; "
                "pass the PCollection that .with_watermark(...) returned"
            )
        return filters

    def late_count(self, pcoll: PCollection) -> int:
        """Rows dropped as late by the `WithWatermark`, `Union` or `Join` that produced `pcoll`."""
        operators = self.units[self.of_run(pcoll).node.id]
        if not isinstance(operators[0], (WatermarkFilter, UnionOperator, JoinOperator)):
            raise PipelineError(
                f"{pcoll.node.label}: late rows are counted by WithWatermark (and by Union and "
                "Join); pass the PCollection that .with_watermark(...) returned"
            )
        return sum(_late(op) for op in operators)

    def invalid_count(self, pcoll: PCollection) -> int:
        """Rows dropped by that `WithWatermark` because their event time was `None`."""
        return sum(f.invalid_count for f in self._filters(pcoll))

    def metrics(self) -> PipelineMetrics:
        """Per transform (by label, in graph order): rows, drops, watermarks, lag and state."""
        out = PipelineMetrics()
        counters = self.counters
        for node in self.pipeline.nodes:
            operators = self.units[node.id]
            rows_out = counters[node.id].rows
            if isinstance(node.transform, DroppedRows):
                rows_in = rows_out
            else:
                rows_in = sum(counters[i].rows for i in node.inputs)
            schema = node.info.schema
            marks: dict[str, Any] = {}
            lags: dict[str, Any] = {}
            emitted = [op.emitted_watermarks() for op in operators]
            estimated = [op.estimates()[0] for op in operators]
            estimates: dict[str, Any] = {}
            for column in sorted(set().union(*emitted)):
                mark = lowest_of(e.get(column) for e in emitted)
                if mark is None:
                    continue
                convert = to_external(schema.type_of(column))
                marks[column] = convert([mark])[0] if convert else mark
                estimate = lowest_of(e.get(column) for e in estimated)
                if estimate is not None and estimate != mark:
                    estimates[column] = convert([estimate])[0] if convert else estimate
                top = counters[node.id].maxima.get(column)
                if top is not None:
                    lag = top - mark
                    lags[column] = lag * ONE_MICROSECOND if convert else lag
            out[node.label] = TransformMetrics(
                rows_in=rows_in,
                rows_out=rows_out,
                late_rows=sum(_late(op) for op in operators),
                invalid_rows=sum(
                    op.invalid_count for op in operators if isinstance(op, WatermarkFilter)
                ),
                watermarks=marks,
                watermark_lag=lags,
                state_size=sum(op.state_size() for op in operators),
                peak_state_size=self.peaks[node.id],
                watermark_estimates=estimates,
            )
        return out

    def state_size(self, pcoll: PCollection) -> int:
        """Rows or groups the operator that produced `pcoll` still holds (0 after the flush)."""
        return sum(op.state_size() for op in self.units[self.of_run(pcoll).node.id])

    def peak_state_size(self, pcoll: PCollection) -> int:
        """The most rows or groups the operator that produced `pcoll` held at once (all units)."""
        return self.peaks[self.of_run(pcoll).node.id]


def _late(operator: Operator) -> int:
    if isinstance(operator, (WatermarkFilter, UnionOperator, JoinOperator)):
        return operator.late_count
    return 0
