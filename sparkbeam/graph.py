"""The graph's building blocks: transforms, nodes and what is known of each edge.

Transforms subclass `PTransform` (composites, with `expand`) or
`PrimitiveTransform` (what runners implement, with `infer`, which validates
the inputs when the transform is applied). `Pipeline` and `PCollection` live in
`sparkbeam.pipeline`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import MISSING, dataclass, fields
from typing import TYPE_CHECKING

from sparkbeam.derivation import NO_WATERMARKS, WatermarkRule
from sparkbeam.errors import PipelineError, call_form
from sparkbeam.schema import Schema
from sparkbeam.updates import UpdateStream, refused_over_updates

if TYPE_CHECKING:
    from sparkbeam.pipeline import PCollection


@dataclass(frozen=True)
class EdgeInfo:
    """What is known of a PCollection when the pipeline is built."""

    schema: Schema
    bounded: bool
    watermarked: frozenset[str] = frozenset()
    """Columns that may carry a watermark on this edge."""
    updates: UpdateStream | None = None
    """On an update stream (`CombinePerKey(emit="update")` and what reads it): its keys and
    where it came from; None on an append stream."""
    row_watermarks: bool = False
    """Whether a `WithWatermark(emit="event")` upstream raises its watermark after every row."""
    dropped: tuple[tuple[str, str], ...] = ()
    """Columns of the schema whose watermark a transform upstream dropped, each with the
    words saying which transform did and how to keep it (`watermark_dropped`)."""


def watermark_dropped(label: str, transform: PrimitiveTransform, column: str) -> str:
    """The words for `column`'s watermark, dropped by `transform` (applied as `label`), for a
    message of a transform downstream that needs it."""
    return (
        f"{label} drops the watermark on {column!r} that its input carries "
        f"(.with_watermark(...) upstream); {transform.keeping_watermark(column)}"
    )


def dropped_watermarks(
    output: EdgeInfo,
    inputs: Sequence[EdgeInfo],
    label: str,
    transform: PrimitiveTransform,
) -> tuple[tuple[str, str], ...]:
    """`EdgeInfo.dropped` of a transform's `output` (its `watermarked` set): each column with
    no watermark keeps an input's words for it (the transform upstream that dropped it), else,
    where an input carried one, says this transform dropped it."""
    out = []
    for column in output.schema.names:
        if column in output.watermarked:
            continue
        inherited = [said for info in inputs for name, said in info.dropped if name == column]
        if inherited:
            out.append((column, inherited[0]))
        elif any(column in info.watermarked for info in inputs):
            out.append((column, watermark_dropped(label, transform, column)))
    return tuple(out)


def needs_watermark(info: EdgeInfo, column: str, where: str) -> str:
    """What to do for a watermark on `column` that the edge `info` lacks: keep the one a
    transform upstream dropped (`EdgeInfo.dropped`), else apply `.with_watermark` `where`."""
    for name, said in info.dropped:
        if name == column:
            return said
    return f"apply .with_watermark({column!r}, delay=...) {where}"


@dataclass(frozen=True, eq=False)
class Node:
    """One applied primitive transform: the graph's unit.

    It holds no `PCollection` (its transform refers to other nodes, never to a
    handle), so the graph keeps alive no handle the user dropped.
    """

    id: int
    label: str
    transform: PrimitiveTransform
    inputs: tuple[int, ...]
    info: EdgeInfo
    rule: WatermarkRule = NO_WATERMARKS
    """How the output watermarks follow from the inputs' (`transform.watermark_rule`)."""

    def __repr__(self) -> str:
        # By label: a transform that holds its other inputs (a `Union`'s, a `Join`'s)
        # shows them so, not the whole graph upstream.
        return f"<node {self.label!r}>"


class PTransform:
    """A step of a pipeline. Apply with `pcoll | transform` or `pcoll | "label" >> transform`.

    Composite transforms override `expand(*inputs)` and return the PCollection
    built from other transforms.
    """

    def expand(self, *inputs: PCollection) -> PCollection:
        raise NotImplementedError(f"{type(self).__name__} must implement expand()")

    def default_label(self) -> str:
        return type(self).__name__

    def __rrshift__(self, label: str) -> Labelled:
        if not isinstance(label, str):
            return NotImplemented
        return Labelled(label, self)

    def __ror__(self, left: object) -> PCollection:
        raise PipelineError(f"{self.default_label()}: {applied_to(left)}")


class PrimitiveTransform(PTransform):
    """A transform that runners implement directly; it validates its inputs in `infer`."""

    def extra_inputs(self) -> tuple[Node, ...]:
        """Inputs given as arguments (the other sides of a `Union` or `Join`), by node."""
        return ()

    def snapshot(self) -> PrimitiveTransform:
        """The frozen value stored in the graph (itself, unless it is a builder)."""
        return self

    def public_name(self) -> str:
        """The name of what the user applied (`PipelineGraph`'s `node.kind`): the class name,
        unless the class is an internal form of a public transform."""
        return type(self).__name__

    def parameters(self) -> tuple[tuple[str, str], ...]:
        """What the pipeline's picture shows of this transform besides its label, as
        `(name, value)` pairs: sizes, delays, gaps, keys (not what `default_label` shows)."""
        return ()

    def output_order(self) -> tuple[str, tuple[str, ...]] | None:
        """`(column, keys)` when the output is promised in `column` order within `keys`."""
        return None

    def holds_state(self) -> bool:
        """Whether the transform holds rows or groups from one epoch to the next (keyed state,
        or a `WithWatermark`'s late-row filter): a stateful operator on unbounded input."""
        return False

    def partition_keys(self) -> tuple[str, ...] | None:
        """The columns its input is partitioned by before it runs in parallel: () gathers all
        rows in one place, None needs no repartitioning (it runs where its input runs)."""
        return None

    def infer(self, inputs: Sequence[EdgeInfo], label: str) -> EdgeInfo:
        """Validate the inputs and describe the output; raise `PipelineError` naming `label`.

        The output's `watermarked` columns are not set here: they follow from
        `watermark_rule`.
        """
        raise NotImplementedError

    def update_stream(self, inputs: Sequence[EdgeInfo], label: str) -> UpdateStream | None:
        """The update stream the output is (None: an append stream), checked before `infer`.

        The default refuses every update-stream input (`sparkbeam.updates`);
        the transforms that keep upserts meaningful override it.
        """
        for info in inputs:
            if info.updates is not None:
                raise refused_over_updates(label, self.public_name(), info.updates)
        return None

    def raises_watermark_per_row(self) -> bool:
        """Whether the output's watermark rises after every row (`WithWatermark(emit="event")`)."""
        return False

    def keeping_watermark(self, column: str) -> str:
        """How to keep `column`'s watermark through this transform, which dropped it (for the
        message of a transform downstream that needs it)."""
        return f"apply .with_watermark({column!r}, delay=...) after it"

    def watermark_rule(self, inputs: Sequence[EdgeInfo], label: str) -> WatermarkRule:
        """The transform's watermark-derivation rule over these inputs (`sparkbeam.derivation`).

        The default, no output watermark, fits sources and side outputs.
        """
        return NO_WATERMARKS

    def expand(self, *inputs: PCollection) -> PCollection:
        given = ", ".join(repr(value) for value in inputs)
        raise PipelineError(
            f"{self.default_label()}: expand({given}) does not apply a transform; apply it to a "
            f"PCollection with pcoll | {type(self).__name__}(...), and the pipeline adds it"
        )


def applied_to(left: object) -> str:
    """Why `left | transform` cannot work (`left` is no Pipeline or PCollection), and what to
    write instead."""
    if left is None:
        return (
            "applied to None, not to a PCollection (did a function that should return a "
            "PCollection end without return?); apply it to a PCollection: pcoll | transform"
        )
    return (
        f"applied to {type(left).__name__} {left!r}, which is not a PCollection; apply it to "
        "a PCollection (pcoll | transform), or a source to the pipeline (p | sb.Create(rows))"
    )


def not_a_pcollection(value: object) -> str:
    """What `value`, given where a PCollection belongs, is instead, and what to give."""
    if value is None:
        return (
            "got None (did a function that should return a PCollection end without return?); "
            "give the PCollection"
        )
    if isinstance(value, type) and issubclass(value, PTransform):
        return (
            f"got the class {value.__name__}; call it, apply it and give the PCollection it "
            f"returns: p | {call_form(value)}"
        )
    if isinstance(value, PTransform):
        return (
            f"got the transform {value.default_label()}, not its output; apply it and give "
            f"the PCollection it returns (... | {call_form(type(value))})"
        )
    if type(value).__name__ == "Pipeline":  # `Pipeline` is defined on top of the transforms
        return (
            "got the Pipeline; give a PCollection of it, the output of a source such as "
            "p | sb.Create(rows)"
        )
    if isinstance(value, (list, tuple)):
        kind = type(value).__name__
        return f"got the {kind} {value!r}; give its PCollections one by one (*others)"
    return f"got {value!r}; give a PCollection"


def input_node(pcoll: PCollection, transform: str) -> Node:
    """The node that produced `pcoll`, an input given to `transform` as an argument.

    Transforms keep such inputs by node, never by PCollection: the graph then
    holds no handle, and a PCollection the user dropped is not recorded.
    """
    node = getattr(pcoll, "node", None)  # `PCollection` is defined on top of the transforms
    if not isinstance(node, Node):
        raise PipelineError(f"{transform}: its inputs are PCollections; {not_a_pcollection(pcoll)}")
    return node


def init_fields(transform: object, *values: object) -> None:
    """Set a frozen transform's fields, in their order, from its own `__init__`.

    A transform's constructor takes what the user writes (`Sort(column, keys)`,
    `CombinePerKey(keys, **aggregates)`) and stores it normalized; the fields
    it leaves out take their defaults. Frozen dataclasses from the standard
    library, not a third-party package: Spark's Python workers unpickle these
    values and may have nothing installed but PySpark's own requirements.
    """
    specs = fields(transform)  # type: ignore[arg-type]
    if len(values) > len(specs):
        raise TypeError(f"{type(transform).__name__}: {len(values)} values for {len(specs)} fields")
    for index, spec in enumerate(specs):
        if index < len(values):
            value = values[index]
        elif spec.default is not MISSING:
            value = spec.default
        elif spec.default_factory is not MISSING:
            value = spec.default_factory()
        else:
            raise TypeError(f"{type(transform).__name__}: no value for the field {spec.name!r}")
        object.__setattr__(transform, spec.name, value)


@dataclass(frozen=True)
class Labelled:
    """`"label" >> transform`."""

    label: str
    transform: PTransform

    def __ror__(self, left: object) -> PCollection:
        raise PipelineError(f"{self.label}: {applied_to(left)}")
