"""The pipeline as a picture: `p.graph()` and `result.graph()`.

A `PipelineGraph` has one node per applied transform (labelled as
`metrics()` labels it) and one edge per (producer, consumer) pair, annotated
with the columns that carry a watermark on that edge. The edges into a
`late_rows()` / `invalid_rows()` PCollection are side edges: they carry the
rows the producer dropped, never a watermark, and the picture draws them
apart (dashed, in another colour, into a note-shaped box).

After a run (`result.graph()`) each edge also has the rows its source sent on
it (`rows_out`, or the late / invalid rows on a side edge), each node its
`TransformMetrics`, and the picture adds the late and invalid rows and the
last watermark of each column of every `WithWatermark`, `Union` and `Join`,
and the rows each last transform emitted (a transform nothing reads has no
edge to show them on).

Outputs: `to_dot()` (Graphviz) and `to_mermaid()` (Mermaid's flowchart) are
text and need nothing; `render("pipeline.svg")` (or `.png`) runs Graphviz,
which needs the `graph` extra (the `graphviz` package) and Graphviz's `dot`
program (`scripts/bootstrap.sh` installs it). In Jupyter the graph shows
itself as SVG, or, where Graphviz is missing, as a Mermaid diagram in
Markdown (JupyterLab 4.1 and later draw those).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sparkbeam.graph import Node
from sparkbeam.metrics import TransformMetrics
from sparkbeam.transforms.join import Join
from sparkbeam.transforms.late import DroppedRows
from sparkbeam.transforms.union import Union
from sparkbeam.transforms.watermark import WithWatermark

RENDER_FORMATS = {".svg": "svg", ".png": "png"}
SIDE_COLOUR = "#c2410c"
SIDE_STYLE = f'color="{SIDE_COLOUR}"'
SIDE_KINDS = ("LateRows", "InvalidRows")
_DROPPING = (WithWatermark, Union, Join)


@dataclass(frozen=True)
class GraphNode:
    """One applied transform: its `label` (as `metrics()` has it), its `kind` (the public
    name of what was applied: `"TestStream"`, `"Tumble"`, `"LateRows"`, ...), what the
    picture shows of its parameters, and after a run its `metrics`."""

    label: str
    kind: str
    parameters: tuple[tuple[str, str], ...] = ()
    metrics: TransformMetrics | None = None
    dropping: bool = False
    """Whether it drops rows as late or invalid (`WithWatermark`, `Union`, `Join`)."""


@dataclass(frozen=True)
class GraphEdge:
    """Rows flowing from the transform labelled `source` into the one labelled `target`.

    `watermarks`: the sorted columns that carry a watermark on the edge (`()` on a
    side edge); `side`: `None`, or `"late"` / `"invalid"` for the edge into a
    `late_rows()` / `invalid_rows()` PCollection; `rows`: `None` before a run, then
    the rows the source sent on the edge; `updates`: on an update stream
    (`CombinePerKey(emit="update")`), the key columns its rows upsert by, else `None`.
    """

    source: str
    target: str
    watermarks: tuple[str, ...] = ()
    side: str | None = None
    rows: int | None = None
    updates: tuple[str, ...] | None = None


@dataclass(frozen=True)
class PipelineGraph:
    """A pipeline's transforms and edges, as text (`to_dot`, `to_mermaid`) or a picture."""

    nodes: tuple[GraphNode, ...]
    edges: tuple[GraphEdge, ...]

    @classmethod
    def of(
        cls, nodes: Sequence[Node], metrics: Mapping[str, TransformMetrics] | None = None
    ) -> PipelineGraph:
        """The graph of a pipeline's nodes, with a run's `metrics()` when given."""
        found = metrics or {}
        graph_nodes = []
        edges = []
        for node in nodes:
            transform = node.transform
            graph_nodes.append(
                GraphNode(
                    node.label,
                    transform.public_name(),
                    transform.parameters(),
                    found.get(node.label),
                    isinstance(transform, _DROPPING),
                )
            )
            side = transform.kind if isinstance(transform, DroppedRows) else None
            for source_id in dict.fromkeys(node.inputs):
                source = nodes[source_id]
                counted = found.get(source.label)
                rows = None
                if metrics is not None and counted is not None:
                    rows = _rows_sent(counted, side)
                watermarks = () if side else tuple(sorted(source.info.watermarked))
                stream = None if side else source.info.updates
                keys = None if stream is None else stream.keys
                edges.append(GraphEdge(source.label, node.label, watermarks, side, rows, keys))
        return cls(tuple(graph_nodes), tuple(edges))

    def node(self, label: str) -> GraphNode:
        """The node labelled `label`; `KeyError` if there is none."""
        for node in self.nodes:
            if node.label == label:
                return node
        raise KeyError(label)

    def edge(self, source: str, target: str) -> GraphEdge:
        """The edge from the node labelled `source` to the one labelled `target`."""
        for edge in self.edges:
            if (edge.source, edge.target) == (source, target):
                return edge
        raise KeyError((source, target))

    def node_lines(self, node: GraphNode) -> list[str]:
        """What the box of `node` says, line by line."""
        lines = [node.label]
        if not node.label.startswith(node.kind):
            lines.append(node.kind)
        lines.extend(f"{name}: {value}" for name, value in node.parameters)
        counted = node.metrics
        if counted is None:
            return lines
        if node.dropping:
            dropped = f"late: {counted.late_rows}"
            if node.kind == "WithWatermark":
                dropped += f", invalid: {counted.invalid_rows}"
            lines.append(dropped)
            lines.extend(
                _watermark_text(column, value, counted.watermark_estimates.get(column))
                for column, value in counted.watermarks.items()
            )
        if not any(edge.source == node.label and edge.side is None for edge in self.edges):
            lines.append(f"emitted: {_rows_text(counted.rows_out)}")
        return lines

    def edge_lines(self, edge: GraphEdge) -> list[str]:
        """What the arrow of `edge` says, line by line (none when there is nothing to say)."""
        lines = []
        if edge.side is not None:
            lines.append(f"{edge.side} rows")
        if edge.updates is not None:
            lines.append(_updates_text(edge.updates))
        if edge.watermarks:
            lines.append(f"wm: {', '.join(edge.watermarks)}")
        if edge.rows is not None:
            lines.append(_rows_text(edge.rows))
        return lines

    def to_dot(self) -> str:
        """The picture as Graphviz's DOT source."""
        ids = {node.label: f"n{i}" for i, node in enumerate(self.nodes)}
        out = [
            "digraph pipeline {",
            "  rankdir=TB;",
            '  node [shape=box, style="rounded,filled", fillcolor="#f4f4f5", '
            'fontname="Helvetica", fontsize=11];',
            '  edge [fontname="Helvetica", fontsize=10];',
        ]
        for node in self.nodes:
            label = _dot_text(self.node_lines(node))
            style = ""
            if node.kind in SIDE_KINDS:
                style = f', shape=note, style="filled,dashed", fillcolor="#fff7ed", {SIDE_STYLE}'
            out.append(f"  {ids[node.label]} [label={label}{style}];")
        for edge in self.edges:
            attributes = []
            lines = self.edge_lines(edge)
            if lines:
                attributes.append(f"label={_dot_text(lines)}")
            if edge.side is not None:
                attributes += ["style=dashed", SIDE_STYLE, f'fontcolor="{SIDE_COLOUR}"']
            suffix = f" [{', '.join(attributes)}]" if attributes else ""
            out.append(f"  {ids[edge.source]} -> {ids[edge.target]}{suffix};")
        out.append("}")
        return "\n".join(out) + "\n"

    def to_mermaid(self) -> str:
        """The picture as Mermaid's flowchart source (GitHub, GitLab and JupyterLab draw it)."""
        ids = {node.label: f"n{i}" for i, node in enumerate(self.nodes)}
        out = ["flowchart TD"]
        sides = []
        for node in self.nodes:
            text = _mermaid_text(self.node_lines(node))
            if node.kind in SIDE_KINDS:
                sides.append(ids[node.label])
                out.append(f"  {ids[node.label]}[/{text}/]")
            else:
                out.append(f"  {ids[node.label]}[{text}]")
        for edge in self.edges:
            arrow = "-.->" if edge.side is not None else "-->"
            lines = self.edge_lines(edge)
            label = f"|{_mermaid_text(lines)}|" if lines else ""
            out.append(f"  {ids[edge.source]} {arrow}{label} {ids[edge.target]}")
        if sides:
            out.append(f"  classDef side fill:#fff7ed,stroke:{SIDE_COLOUR},stroke-dasharray:5 5;")
            out.append(f"  class {','.join(sides)} side;")
        side_edges = [str(i) for i, edge in enumerate(self.edges) if edge.side is not None]
        if side_edges:
            out.append(f"  linkStyle {','.join(side_edges)} stroke:{SIDE_COLOUR};")
        return "\n".join(out) + "\n"

    def pipe(self, format: str) -> bytes:
        """The picture drawn by Graphviz, as `format` (`"svg"`, `"png"`, any `dot -T` format)."""
        try:
            graphviz = importlib.import_module("graphviz")
        except ImportError as exc:
            raise ImportError(
                "drawing a pipeline needs the graphviz package: pip install 'sparkbeam[graph]' "
                "(or use to_dot() / to_mermaid(), which need nothing)"
            ) from exc
        try:
            drawn: bytes = graphviz.Source(self.to_dot()).pipe(format=format)
        except graphviz.ExecutableNotFound as exc:
            raise RuntimeError(
                "drawing a pipeline needs Graphviz's dot program: install Graphviz "
                "(apt-get install graphviz, brew install graphviz; scripts/bootstrap.sh does it), "
                "or use to_dot() / to_mermaid(), which need nothing"
            ) from exc
        return drawn

    def render(self, path: str | os.PathLike[str]) -> str:
        """Write the picture to `path`, SVG or PNG by its suffix; return the path written."""
        target = os.fspath(path)
        suffix = os.path.splitext(target)[1].lower()
        if suffix not in RENDER_FORMATS:
            raise ValueError(
                f"cannot render a pipeline to {target!r}: end the path with .svg or .png "
                "(or write to_dot() / to_mermaid() to a file)"
            )
        drawn = self.pipe(RENDER_FORMATS[suffix])
        with open(target, "wb") as out:
            out.write(drawn)
        return target

    def _repr_svg_(self) -> str | None:
        """Jupyter: the picture as SVG, or nothing where Graphviz is missing."""
        if shutil.which("dot") is None or importlib.util.find_spec("graphviz") is None:
            return None
        return self.pipe("svg").decode("utf-8")

    def _repr_mimebundle_(
        self, include: Any = None, exclude: Any = None, **kwargs: Any
    ) -> dict[str, str]:
        """Jupyter: SVG through Graphviz when it is installed, else a Mermaid diagram."""
        bundle = {"text/plain": repr(self)}
        svg = self._repr_svg_()
        if svg is not None:
            bundle["image/svg+xml"] = svg
        else:
            bundle["text/markdown"] = f"```mermaid\n{self.to_mermaid()}```\n"
        return bundle

    def __repr__(self) -> str:
        lines = [f"PipelineGraph({len(self.nodes)} transforms, {len(self.edges)} edges)"]
        for edge in self.edges:
            arrow = f"-{edge.side}->" if edge.side else "->"
            notes = [] if edge.updates is None else [_updates_text(edge.updates)]
            if edge.watermarks:
                notes.append(f"wm: {', '.join(edge.watermarks)}")
            if edge.rows is not None:
                notes.append(_rows_text(edge.rows))
            note = f"  ({'; '.join(notes)})" if notes else ""
            lines.append(f"  {edge.source} {arrow} {edge.target}{note}")
        return "\n".join(lines)


def _rows_sent(counted: TransformMetrics, side: str | None) -> int:
    if side == "late":
        return counted.late_rows
    if side == "invalid":
        return counted.invalid_rows
    return counted.rows_out


def _watermark_text(column: str, value: Any, estimate: Any) -> str:
    """A watermark in a `WithWatermark` box, with its estimate where `allowed_lateness` sets
    one apart from it."""
    shown = f"watermark {column}: {value}"
    return shown if estimate is None else f"{shown} (estimate {estimate})"


def _updates_text(keys: tuple[str, ...]) -> str:
    """How an update stream's edge is marked: upserts, and the keys they are by."""
    return f"updates by {', '.join(keys)}" if keys else "updates"


def _rows_text(rows: int) -> str:
    return f"{rows:,} row{'' if rows == 1 else 's'}"


def _dot_text(lines: list[str]) -> str:
    """A DOT string: quoted, escaped, lines centred."""
    escaped = [line.replace("\\", "\\\\").replace('"', '\\"') for line in lines]
    return '"' + "\\n".join(escaped) + '"'


def _mermaid_text(lines: list[str]) -> str:
    """A Mermaid label: quoted, with Mermaid's entity codes for what it would read as markup."""
    escaped = [
        line.replace("#", "#35;").replace('"', "#quot;").replace("<", "#lt;").replace(">", "#gt;")
        for line in lines
    ]
    return '"' + "<br/>".join(escaped) + '"'
