"""`DirectRunner`: runs a pipeline in-process and checks the model's invariants on every edge."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from sparkbeam.errors import PipelineError
from sparkbeam.graph import EdgeInfo, Node
from sparkbeam.messages import Watermark
from sparkbeam.runners.direct.combine import CombineOperator
from sparkbeam.runners.direct.elementwise import FilterOperator, MapOperator, SelectOperator
from sparkbeam.runners.direct.executor import EdgeRecord, Executor, OperatorFactory
from sparkbeam.runners.direct.files import ReadFilesOperator, WriteFilesOperator
from sparkbeam.runners.direct.join import JoinOperator
from sparkbeam.runners.direct.operator import Operator
from sparkbeam.runners.direct.session import SessionOperator
from sparkbeam.runners.direct.sort import SortOperator
from sparkbeam.runners.direct.sources import CreateOperator, TestStreamOperator
from sparkbeam.runners.direct.union import UnionOperator
from sparkbeam.runners.direct.watermark import WatermarkFilter
from sparkbeam.runners.direct.windows import HopOperator, TumbleOperator
from sparkbeam.schema import Row, columns_to_rows, to_external
from sparkbeam.transforms.combine import CombinePerKey
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
}


def operator_for(node: Node, inputs: Sequence[EdgeInfo]) -> Operator:
    factory = OPERATORS.get(type(node.transform))
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
    """

    def __init__(self, check_invariants: bool = True) -> None:
        self.check_invariants = check_invariants

    def run(self, pipeline: Pipeline) -> DirectResult:
        nodes = pipeline.nodes
        operators = [operator_for(node, [nodes[i].info for i in node.inputs]) for node in nodes]
        executor = Executor(nodes, operators, pipeline.live_node_ids(), self.check_invariants)
        executor.run()
        return DirectResult(pipeline, operators, executor.records, executor.epochs, executor.peaks)


class DirectResult:
    """The rows, watermarks and counters of a direct run (SPEC section 5)."""

    def __init__(
        self,
        pipeline: Pipeline,
        operators: Sequence[Operator],
        records: dict[int, EdgeRecord],
        epochs: int,
        peaks: Sequence[int],
    ) -> None:
        self.pipeline = pipeline
        self.operators = operators
        self.records = records
        self.epochs = epochs
        self.peaks = peaks

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

    def _filter(self, pcoll: PCollection) -> WatermarkFilter:
        operator = self.operators[pcoll.node.id]
        if not isinstance(operator, WatermarkFilter):
            raise PipelineError(
                f"{pcoll.node.label}: late rows are counted by WithWatermark; pass the "
                "PCollection that .with_watermark(...) returned"
            )
        return operator

    def late_count(self, pcoll: PCollection) -> int:
        """Rows dropped as late by the `WithWatermark` that produced `pcoll`."""
        return self._filter(pcoll).late_count

    def invalid_count(self, pcoll: PCollection) -> int:
        """Rows dropped by that `WithWatermark` because their event time was `None`."""
        return self._filter(pcoll).invalid_count

    def state_size(self, pcoll: PCollection) -> int:
        """Rows or groups the operator that produced `pcoll` still holds (0 after the flush)."""
        return self.operators[pcoll.node.id].state_size()

    def peak_state_size(self, pcoll: PCollection) -> int:
        """The most rows or groups the operator that produced `pcoll` held at once."""
        return self.peaks[pcoll.node.id]
