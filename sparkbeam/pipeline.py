"""Building the graph: `Pipeline`, `PCollection` and `PTransform`.

A pipeline is a list of frozen `Node`s, each one primitive transform applied to
the outputs of earlier nodes. Applying a transform validates it against what
is known of its inputs (`EdgeInfo`: schema, boundedness, which columns may
carry watermarks) and raises `PipelineError` at once when it cannot work.
Composite transforms implement `expand` in terms of other transforms and cost
a runner nothing. Runners take the finished list of nodes.
"""

from __future__ import annotations

import importlib
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from types import TracebackType
from typing import Any, Protocol, overload

from sparkbeam import paths
from sparkbeam.errors import PipelineError, call_form
from sparkbeam.graph import (
    EdgeInfo,
    Labelled,
    Node,
    PrimitiveTransform,
    PTransform,
    dropped_watermarks,
)
from sparkbeam.messages import Watermark
from sparkbeam.metrics import TransformMetrics
from sparkbeam.pipeline_graph import PipelineGraph
from sparkbeam.schema import Row, Schema
from sparkbeam.time import Duration
from sparkbeam.transforms.combine import AggregateFn, CombineFn, CombinePerKey, Finals
from sparkbeam.transforms.connectors import ForEachBatch
from sparkbeam.transforms.elementwise import Filter, Map, Select
from sparkbeam.transforms.expressions import Col, Expr
from sparkbeam.transforms.files import WriteFiles
from sparkbeam.transforms.flat import FlatMap, Partition
from sparkbeam.transforms.join import Join
from sparkbeam.transforms.late import invalid_rows, late_rows
from sparkbeam.transforms.sort import Sort
from sparkbeam.transforms.union import Union
from sparkbeam.transforms.watermark import IdleAfter, WithWatermark
from sparkbeam.transforms.windows import Hop, Session, Tumble


class PipelineResult(Protocol):
    """What a finished run gives back."""

    def collect(self, pcoll: PCollection) -> list[Row]: ...

    def late_count(self, pcoll: PCollection) -> int: ...

    def metrics(self) -> dict[str, TransformMetrics]: ...

    def to_pandas(self, pcoll: PCollection) -> Any: ...

    def to_arrow(self, pcoll: PCollection) -> Any: ...

    def graph(self) -> PipelineGraph: ...


class Runner(Protocol):
    def run(self, pipeline: Pipeline) -> PipelineResult: ...


_RUNNERS = {
    "direct": ("sparkbeam.runners.direct", "DirectRunner"),
    "spark": ("sparkbeam.runners.spark", "SparkRunner"),
}


def _resolve_runner(runner: str | Runner | None) -> Runner:
    if runner is None:
        runner = "direct"
    if isinstance(runner, type):
        raise PipelineError(
            f"Pipeline: runner={runner.__name__} is a class; pass a runner made from it, "
            f"runner={runner.__name__}(), or its name: runner='direct' or 'spark'"
        )
    if not isinstance(runner, str):
        if not callable(getattr(runner, "run", None)):
            raise PipelineError(
                f"Pipeline: runner={runner!r} is not a runner; use 'direct', 'spark', "
                "sb.DirectRunner(...) or sb.SparkRunner(...)"
            )
        return runner
    if runner not in _RUNNERS:
        raise PipelineError(f"unknown runner {runner!r}: use one of {sorted(_RUNNERS)}")
    module_name, class_name = _RUNNERS[runner]
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise PipelineError(
            f"runner {runner!r} is not available: {exc}. "
            "The Spark runner needs the spark extra: pip install 'sparkbeam[spark]'"
        ) from exc
    factory: Callable[[], Runner] = getattr(module, class_name)
    return factory()


def _not_a_transform(value: object) -> PipelineError:
    """The error for applying `value`, which is no transform: what it is and what to write."""
    if isinstance(value, type) and issubclass(value, PTransform):
        return PipelineError(
            f"cannot apply the class {value.__name__} itself, only a transform made from it; "
            f"call it: {call_form(value)}"
        )
    if isinstance(value, (AggregateFn, CombineFn)) or (
        isinstance(value, type) and issubclass(value, (AggregateFn, CombineFn))
    ):
        made = call_form(value) if isinstance(value, type) else repr(value)
        return PipelineError(
            f"cannot apply {made}: it is an aggregate, not a transform; name it in a "
            f"CombinePerKey: sb.CombinePerKey(keys, name={made})"
        )
    if isinstance(value, Expr):
        return PipelineError(
            f"cannot apply the expression {value}: it is not a transform; use it in "
            f"sb.Filter({value}) or sb.Select(name={value})"
        )
    if value is late_rows or value is invalid_rows:
        return PipelineError(
            f"cannot apply {call_form(value)}: it is a function of a PCollection, not a "
            f"transform; call it: pcoll.{value.__name__}()"
        )
    if callable(value):
        return PipelineError(
            f"cannot apply the function {getattr(value, '__name__', value)!r}: it is not a "
            "transform; to call it on each row, wrap it: sb.Map(fn) (one row out), "
            "sb.Filter(fn) (keep the rows it is true for) or sb.FlatMap(fn) (rows out)"
        )
    return PipelineError(
        f"cannot apply {value!r}: it is not a transform; apply one such as sb.Create(rows), "
        "sb.Map(fn) or sb.Tumble(column, size)"
    )


class Pipeline:
    """A graph of transforms, run by a runner (`"direct"` by default, or `"spark"`).

    As a context manager it runs on a clean exit and keeps the result in
    `p.result`; `p.run()` runs it and returns the same result.

    Args:
        runner: `"direct"` (the default), `"spark"`, or a runner object
            (`sb.DirectRunner(...)`, `sb.SparkRunner(...)`) with options.
    """

    def __init__(self, runner: str | Runner | None = None) -> None:
        self.runner = _resolve_runner(runner)
        self.nodes: list[Node] = []
        self.result: PipelineResult | None = None
        self._labels: set[str] = set()
        self._scopes: list[str] = []
        self._handles: weakref.WeakValueDictionary[int, PCollection] = weakref.WeakValueDictionary()
        self._assertions: list[tuple[PCollection, Callable[[list[Row]], None], str]] = []

    def __or__(self, transform: PTransform | Labelled) -> PCollection:
        return self.apply(transform, ())

    def apply(
        self,
        transform: PTransform | Labelled,
        inputs: tuple[PCollection, ...],
        label: str | None = None,
    ) -> PCollection:
        """Apply `transform` to `inputs` (empty for a source)."""
        if isinstance(transform, Labelled):
            return self.apply(transform.transform, inputs, transform.label)
        if not isinstance(transform, PTransform):
            raise _not_a_transform(transform)
        for pcoll in inputs:
            if pcoll.pipeline is not self:
                raise PipelineError(
                    f"{label or transform.default_label()}: its input belongs to another pipeline"
                )
        full_label = self._unique_label(label or transform.default_label())
        if not isinstance(transform, PrimitiveTransform):
            self._scopes.append(full_label)
            try:
                return transform.expand(*inputs)
            finally:
                self._scopes.pop()
        transform = transform.snapshot()
        all_inputs = tuple(pcoll.node for pcoll in inputs) + transform.extra_inputs()
        for given in all_inputs:
            if given.id >= len(self.nodes) or self.nodes[given.id] is not given:
                raise PipelineError(f"{full_label}: its input {given.label} is of another pipeline")
        infos = [given.info for given in all_inputs]
        updates = transform.update_stream(infos, full_label)
        # Files are asked of the runner's file system (`sparkbeam.paths`).
        with paths.using(getattr(self.runner, "paths", None)):
            info = transform.infer(infos, full_label)
        rule = transform.watermark_rule(infos, full_label)
        info = replace(
            info,
            watermarked=rule.outputs([i.watermarked for i in infos]),
            updates=updates,
            row_watermarks=transform.raises_watermark_per_row()
            or any(i.row_watermarks for i in infos),
        )
        info = replace(info, dropped=dropped_watermarks(info, infos, full_label, transform))
        node = Node(
            len(self.nodes), full_label, transform, tuple(n.id for n in all_inputs), info, rule
        )
        self.nodes.append(node)
        pcoll = PCollection(self, node)
        self._handles[node.id] = pcoll
        return pcoll

    def _unique_label(self, label: str) -> str:
        full = "/".join([*self._scopes, label])
        candidate, n = full, 1
        while candidate in self._labels:
            n += 1
            candidate = f"{full}_{n}"
        self._labels.add(candidate)
        return candidate

    def graph(self) -> PipelineGraph:
        """The pipeline as a picture: its transforms and edges, with the columns that carry a
        watermark on each edge (`result.graph()` adds a run's counts)."""
        return PipelineGraph.of(self.nodes)

    def live_node_ids(self) -> frozenset[int]:
        """Nodes whose PCollection the user still holds: the edges a runner records."""
        return frozenset(self._handles.keys())

    def run(self) -> PipelineResult:
        """Run the pipeline on its runner, check `assert_that`s, and return the result."""
        result = self.runner.run(self)
        self.result = result
        for pcoll, matcher, label in self._assertions:
            try:
                matcher(result.collect(pcoll))
            except AssertionError as exc:
                raise AssertionError(f"{label} failed on {pcoll.node.label}: {exc}") from exc
        return result

    def add_assertion(
        self, pcoll: PCollection, matcher: Callable[[list[Row]], None], label: str
    ) -> None:
        self._assertions.append((pcoll, matcher, label))

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.run()


class PCollection:
    """The output of a transform: a stream of rows with a schema, and its watermarks."""

    __slots__ = ("__weakref__", "node", "pipeline")

    def __init__(self, pipeline: Pipeline, node: Node) -> None:
        self.pipeline = pipeline
        self.node = node

    @property
    def info(self) -> EdgeInfo:
        return self.node.info

    @property
    def schema(self) -> Schema:
        return self.node.info.schema

    @property
    def bounded(self) -> bool:
        return self.node.info.bounded

    @property
    def watermarked_columns(self) -> frozenset[str]:
        return self.node.info.watermarked

    def __repr__(self) -> str:
        return f"PCollection[{self.node.label}]({self.schema.describe()})"

    @overload
    def __or__(self, transform: Partition) -> tuple[PCollection, ...]:  # type: ignore[overload-overlap]
        ...

    @overload
    def __or__(self, transform: PTransform | Labelled) -> PCollection: ...

    def __or__(self, transform: PTransform | Labelled) -> Any:
        return self.pipeline.apply(transform, (self,))

    # The fluent API: one method per transform, same arguments.

    def with_watermark(
        self,
        column: str,
        delay: Duration,
        emit: str = "periodic",
        *,
        idle_after: IdleAfter | None = None,
        max_drift: Duration | None = None,
        allowed_lateness: Duration = 0,
    ) -> PCollection:
        return self | WithWatermark(
            column,
            delay,
            emit=emit,
            idle_after=idle_after,
            max_drift=max_drift,
            allowed_lateness=allowed_lateness,
        )

    def late_rows(self) -> PCollection:
        """The rows the `WithWatermark`, `Union` or `Join` that produced this dropped as late."""
        return late_rows(self)

    def invalid_rows(self) -> PCollection:
        """The rows the `WithWatermark` that produced this dropped for a `None` event time."""
        return invalid_rows(self)

    def tumble(self, column: str, size: Duration, offset: Duration = 0) -> PCollection:

        return self | Tumble(column, size, offset=offset)

    def hop(
        self, column: str, size: Duration, slide: Duration, offset: Duration = 0
    ) -> PCollection:

        return self | Hop(column, size, slide, offset=offset)

    def session(self, column: str, gap: Duration, keys: str | Sequence[str] = ()) -> PCollection:
        return self | Session(column, gap, keys=keys)

    def sort(self, column: str, keys: str | Sequence[str] = ()) -> PCollection:
        return self | Sort(column, keys=keys)

    def union(self, *others: PCollection, policy: str = "min") -> PCollection:
        return self | Union(*others, policy=policy)

    def join(
        self,
        other: PCollection,
        on: str | Sequence[str],
        how: str = "inner",
        *,
        times: tuple[str, str] | None = None,
        within: tuple[Duration, Duration] | None = None,
        suffix: str = "_right",
        policy: str = "min",
    ) -> PCollection:
        return self | Join(other, on, how, times=times, within=within, suffix=suffix, policy=policy)

    def combine_per_key(
        self,
        keys: str | Sequence[str],
        /,
        emit: str = "close",
        **aggregates: AggregateFn | CombineFn,
    ) -> PCollection:

        return self | CombinePerKey(keys, emit=emit, **aggregates)

    def finals(self) -> PCollection:
        """Each group's last row of this update stream, without the pane columns: an append
        stream equal, epoch by epoch, to the same pipeline with `emit="close"`."""
        return self | Finals()

    def map(
        self,
        fn: Callable[[Row], Row],
        schema: Schema | Mapping[str, Any] | None = None,
        keeps: Sequence[str] = (),
    ) -> PCollection:

        return self | Map(fn, schema=schema, keeps=keeps)

    def flat_map(
        self,
        fn: Callable[[Row], Iterable[Row]],
        schema: Schema | Mapping[str, Any] | None = None,
        keeps: Sequence[str] = (),
    ) -> PCollection:
        return self | FlatMap(fn, schema=schema, keeps=keeps)

    def partition(self, fn: Callable[[Row, int], int], n: int) -> tuple[PCollection, ...]:
        """`n` PCollections: row `r` goes to output `fn(r, n)` (`sb.Partition`)."""
        outputs: Any = self | Partition(fn, n)
        return tuple(outputs)

    def write_files(
        self, path: str, format: str = "parquet", mode: str = "overwrite"
    ) -> PCollection:
        return self | WriteFiles(path, format=format, mode=mode)

    def for_each_batch(self, fn: Callable[[list[Row], int], Any]) -> PCollection:
        return self | ForEachBatch(fn)

    def filter(self, predicate: Callable[[Row], bool] | Expr) -> PCollection:

        return self | Filter(predicate)

    def select(self, *columns: str, **expressions: object) -> PCollection:

        return self | Select(*columns, **expressions)

    def with_columns(self, **expressions: object) -> PCollection:
        """Every column in order, the named ones replaced in place and new ones appended: a
        `Select` (its watermark rule: a column not replaced keeps its watermark)."""
        kept: dict[str, object] = {name: Col(name) for name in self.schema.names}
        return self | Select(**{**kept, **expressions})


__all__ = [
    "EdgeInfo",
    "Labelled",
    "Node",
    "PCollection",
    "PTransform",
    "Pipeline",
    "PipelineResult",
    "PrimitiveTransform",
    "Runner",
    "Watermark",
]
