"""The pipeline as a picture (SPEC section 8): `p.graph()`, `result.graph()`, DOT, Mermaid, SVG.

One streaming pipeline with a `Union`, a window `Join`, a `Session` and a
`late_rows()` side output is checked structurally (nodes, edges, the watermark
columns of each edge, the rows on each edge against `metrics()`), through the
graph's fields and through its DOT and Mermaid text, on both runners.
"""

from __future__ import annotations

import re
import runpy
import shutil
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import sparkbeam as sb
from sparkbeam.pipeline_graph import GraphEdge

T0 = datetime(2026, 4, 1, 10, 0)


def at(minute: float) -> datetime:
    return T0 + timedelta(minutes=minute)


def click(k: str, minute: float | None) -> dict[str, Any]:
    return {"k": k, "t": None if minute is None else at(minute)}


CLICKS = [
    [click("a", 0), click("b", 1), click("a", 6)],
    [click("a", 12), click("b", 2), click("b", None)],  # t=2 is late (wm 10:04); None invalid
    [click("a", 13)],
]
VIEWS = [
    [click("a", 0), click("a", 3)],
    [click("b", 7), click("a", 11)],
    [click("b", 14)],
]
SCHEMA = {"k": str, "t": datetime}

CLICKS_WM = "WithWatermark(t)"
VIEWS_WM = "WithWatermark(t)_2"
SESSIONS = "Session(t)"
EVENTS = "CombinePerKey(window_start)"
CLICKS_PER_WINDOW = "CombinePerKey(window_start)_2"
LATE = f"LateRows({CLICKS_WM})"
WINDOW = ("t", "window_end", "window_start")

NODES = {
    ("clicks", "TestStream"),
    ("views", "TestStream"),
    (CLICKS_WM, "WithWatermark"),
    (LATE, "LateRows"),
    (VIEWS_WM, "WithWatermark"),
    ("Union", "Union"),
    ("Tumble(t)", "Tumble"),
    (EVENTS, "CombinePerKey"),
    ("Tumble(t)_2", "Tumble"),
    (CLICKS_PER_WINDOW, "CombinePerKey"),
    ("Join(window_start)", "Join"),
    (SESSIONS, "Session"),
    ("CombinePerKey(k, window_start, window_end)", "CombinePerKey"),
}
EDGES = {  # (source, target, watermarks, side)
    ("clicks", CLICKS_WM, (), None),
    (CLICKS_WM, LATE, (), "late"),
    ("views", VIEWS_WM, (), None),
    (CLICKS_WM, "Union", ("t",), None),
    (VIEWS_WM, "Union", ("t",), None),
    ("Union", "Tumble(t)", ("t",), None),
    ("Tumble(t)", EVENTS, WINDOW, None),
    (CLICKS_WM, "Tumble(t)_2", ("t",), None),
    ("Tumble(t)_2", CLICKS_PER_WINDOW, WINDOW, None),
    (EVENTS, "Join(window_start)", ("window_start",), None),
    (CLICKS_PER_WINDOW, "Join(window_start)", ("window_start",), None),
    (VIEWS_WM, SESSIONS, ("t",), None),
    (SESSIONS, "CombinePerKey(k, window_start, window_end)", ("window_end", "window_start"), None),
}


def build(p: sb.Pipeline) -> dict[str, sb.PCollection]:
    """Clicks and views; events (both) per 5-minute window joined with clicks per window;
    sessions of views per key; the clicks dropped as late."""
    clicks_stream = sb.TestStream(SCHEMA)
    for rows in CLICKS:
        clicks_stream.add_epoch(rows)
    views_stream = sb.TestStream(SCHEMA)
    for rows in VIEWS:
        views_stream.add_epoch(rows)
    clicks = (p | "clicks" >> clicks_stream).with_watermark("t", "2 minutes")
    views = (p | "views" >> views_stream).with_watermark("t", timedelta(minutes=2))
    late = clicks.late_rows()
    events = (
        clicks.union(views).tumble("t", "5 minutes").combine_per_key("window_start", n=sb.Count())
    )
    clicks_per_window = clicks.tumble("t", "5 minutes").combine_per_key(
        "window_start", clicks=sb.Count()
    )
    joined = events.join(clicks_per_window, on="window_start")
    sessions = views.session("t", gap="3 minutes", keys="k").combine_per_key(
        ["k", "window_start", "window_end"], views=sb.Count()
    )
    return {"late": late, "joined": joined, "sessions": sessions}


def edge_keys(graph: sb.PipelineGraph) -> set[tuple[str, str, tuple[str, ...], str | None]]:
    return {(e.source, e.target, e.watermarks, e.side) for e in graph.edges}


def test_graph_before_a_run_has_the_transforms_edges_and_watermarks() -> None:
    p = sb.Pipeline()
    build(p)
    graph = p.graph()
    assert {(n.label, n.kind) for n in graph.nodes} == NODES
    assert [n.label for n in graph.nodes] == [n.label for n in p.nodes]
    assert edge_keys(graph) == EDGES
    assert len(graph.edges) == len(EDGES)
    assert all(edge.rows is None for edge in graph.edges)
    assert all(node.metrics is None for node in graph.nodes)
    assert graph.node(CLICKS_WM).parameters == (("delay", "2 minutes"),)
    assert graph.node(VIEWS_WM).parameters == (("delay", "2 minutes"),)
    assert graph.node("Tumble(t)").parameters == (("size", "5 minutes"),)
    assert graph.node(SESSIONS).parameters == (("gap", "3 minutes"), ("keys", "k"))
    assert graph.node("clicks").parameters == (("epochs", "3"),)
    assert check_dot(graph) == EDGES
    assert check_mermaid(graph) == EDGES
    assert "rows" not in graph.to_dot().replace("late rows", "")


def check_after_run(result: Any) -> sb.PipelineGraph:
    """`result.graph()` against `result.metrics()`: rows per edge, drops and watermarks."""
    graph = result.graph()
    metrics = result.metrics()
    assert {(n.label, n.kind) for n in graph.nodes} == NODES
    assert edge_keys(graph) == EDGES
    for edge in graph.edges:
        counted = metrics[edge.source]
        expected = {None: counted.rows_out, "late": counted.late_rows}[edge.side]
        assert edge.rows == expected, edge
    for node in graph.nodes:
        assert node.metrics == metrics[node.label]
    assert graph.edge(CLICKS_WM, LATE).rows == 1
    assert graph.edge("clicks", CLICKS_WM).rows == 7
    assert graph.edge(CLICKS_WM, "Union").rows == 5
    assert metrics[CLICKS_WM].invalid_rows == 1
    assert check_dot(graph) == EDGES
    assert check_mermaid(graph) == EDGES
    clicks_box = graph.node_lines(graph.node(CLICKS_WM))
    assert "late: 1, invalid: 1" in clicks_box
    mark = metrics[CLICKS_WM].watermarks["t"]
    assert f"watermark t: {mark}" in clicks_box
    assert "emitted: " in "".join(graph.node_lines(graph.node("Join(window_start)")))
    return graph


def test_graph_after_a_direct_run_counts_rows_on_every_edge() -> None:
    p = sb.Pipeline()
    build(p)
    result = p.run()
    graph = check_after_run(result)
    assert graph.node(CLICKS_WM).metrics is not None
    assert graph.node(CLICKS_WM).metrics.watermarks == {"t": at(11)}


@pytest.mark.spark
def test_graph_after_a_spark_streaming_run_agrees_with_the_direct_one(spark_runner: Any) -> None:
    direct = sb.Pipeline()
    direct_outputs = build(direct)
    direct_result = direct.run()
    direct_graph = direct_result.graph()
    p = sb.Pipeline(runner=spark_runner)
    outputs = build(p)
    result = p.run()
    result.prepare(*outputs.values())  # the three outputs' queries side by side
    for name, pcoll in outputs.items():
        rows = sorted(result.collect(pcoll), key=repr)
        assert rows == sorted(direct_result.collect(direct_outputs[name]), key=repr), name
    graph = check_after_run(result)
    assert graph.edges == direct_graph.edges
    for node in graph.nodes:
        theirs, ours = direct_graph.node(node.label).metrics, node.metrics
        assert ours is not None and theirs is not None
        assert (ours.late_rows, ours.invalid_rows) == (theirs.late_rows, theirs.invalid_rows)
        if node.dropping:
            assert ours.watermarks == theirs.watermarks, node.label


# The text forms, read back: each node's first line is its label; each edge's label
# holds its side, its watermark columns and its rows.


def parse_edge_label(text: str) -> tuple[tuple[str, ...], str | None, int | None]:
    """`(watermarks, side, rows)` of an edge's label, line by line."""
    watermarks: tuple[str, ...] = ()
    side = rows = None
    for line in filter(None, text.split("\n")):
        if re.fullmatch(r"(late|invalid) rows", line):
            side = line.split()[0]
        elif line.startswith("wm: "):
            watermarks = tuple(line[len("wm: ") :].split(", "))
        else:
            assert re.fullmatch(r"[\d,]+ rows?", line), line
            rows = int(line.split()[0].replace(",", ""))
    return watermarks, side, rows


def check_dot(graph: sb.PipelineGraph) -> set[tuple[str, str, tuple[str, ...], str | None]]:
    """The edges as the DOT text has them (and each edge's rows checked on the way)."""
    dot = graph.to_dot()
    assert dot.startswith("digraph pipeline {")
    names = {
        ident: label.split("\\n")[0]
        for ident, label in re.findall(r'^  (n\d+) \[label="((?:[^"\\]|\\.)*)"', dot, re.M)
    }
    assert sorted(names.values()) == sorted(n.label for n in graph.nodes)
    found = set()
    for source, target, attributes in re.findall(r"^  (n\d+) -> (n\d+)(?: \[(.*)\])?;$", dot, re.M):
        label = re.search(r'label="((?:[^"\\]|\\.)*)"', attributes)
        watermarks, side, rows = parse_edge_label(
            label.group(1).replace("\\n", "\n") if label else ""
        )
        dashed = "style=dashed" in attributes
        assert dashed == (side is not None)
        edge = graph.edge(names[source], names[target])
        assert rows == edge.rows
        found.add((names[source], names[target], watermarks, side))
    assert len(found) == len(graph.edges)
    return found


def check_mermaid(graph: sb.PipelineGraph) -> set[tuple[str, str, tuple[str, ...], str | None]]:
    """The edges as the Mermaid text has them (and each edge's rows checked on the way)."""
    text = graph.to_mermaid()
    assert text.startswith("flowchart TD\n")
    names = {
        ident: label.split("<br/>")[0]
        for ident, label in re.findall(r'^  (n\d+)\[/?"([^"]*)"/?\]$', text, re.M)
    }
    assert sorted(names.values()) == sorted(n.label for n in graph.nodes)
    found = set()
    for source, arrow, label, target in re.findall(
        r'^  (n\d+) (-->|-\.->)(?:\|"([^"]*)"\|)? (n\d+)$', text, re.M
    ):
        watermarks, side, rows = parse_edge_label(label.replace("<br/>", "\n"))
        assert (arrow == "-.->") == (side is not None)
        edge = graph.edge(names[source], names[target])
        assert rows == edge.rows
        found.add((names[source], names[target], watermarks, side))
    assert len(found) == len(graph.edges)
    side_nodes = [i for i, n in names.items() if n == LATE]
    assert f"  class {','.join(side_nodes)} side;" in text
    return found


def test_invalid_rows_are_a_side_edge_too() -> None:
    with sb.Pipeline() as p:
        w = (p | sb.Create([{"t": 1}, {"t": None}], schema={"t": int})).with_watermark("t", 0)
        invalid = w.invalid_rows()
    graph = p.result.graph()
    assert graph.edge(w.node.label, invalid.node.label) == GraphEdge(
        "WithWatermark(t)", "InvalidRows(WithWatermark(t))", (), "invalid", 1
    )
    assert graph.node(invalid.node.label).kind == "InvalidRows"
    assert graph.node("Create").kind == "Create"


def test_an_update_stream_is_marked_on_its_edges() -> None:
    stream = sb.TestStream({"k": str, "t": int}).add_epoch([{"k": "a", "t": 1}])
    with sb.Pipeline() as p:
        updates = (p | stream).combine_per_key("k", emit="update", n=sb.Count())
        finals = updates.finals()
    graph = p.result.graph()
    edge = graph.edge(updates.node.label, finals.node.label)
    assert edge == GraphEdge("CombinePerKey(k)", "finals", (), None, 2, ("k",))
    assert graph.edge("TestStream", updates.node.label).updates is None
    assert graph.node("finals").kind == "Finals"
    assert "updates by k" in graph.to_dot() and "updates by k" in graph.to_mermaid()
    assert "CombinePerKey(k) -> finals  (updates by k; 2 rows)" in repr(graph)


def test_the_watermark_box_shows_the_estimate_where_lateness_sets_it_apart() -> None:
    stream = sb.TestStream({"t": int}).add_epoch([{"t": 20}])
    with sb.Pipeline() as p:
        late = (p | stream).with_watermark("t", 2, allowed_lateness=5)
        plain = late.with_columns(u=sb.col("t")).with_watermark("u", 2)
    graph = p.result.graph()
    assert "watermark t: 13 (estimate 18)" in graph.node_lines(graph.node(late.node.label))
    assert "watermark u: 18" in graph.node_lines(graph.node(plain.node.label))
    assert "(estimate 18)" in graph.to_dot()


def test_labels_are_escaped_in_dot_and_mermaid() -> None:
    p = sb.Pipeline()
    src = p | 'say "hi" <b> #1 \\ ok' >> sb.Create([{"t": 1}])
    src | "next" >> sb.Filter(lambda row: True)
    dot = p.graph().to_dot()
    assert 'label="say \\"hi\\" <b> #1 \\\\ ok\\nCreate\\nrows: 1"' in dot
    mermaid = p.graph().to_mermaid()
    assert 'n0["say #quot;hi#quot; #lt;b#gt; #35;1 \\ ok<br/>Create<br/>rows: 1"]' in mermaid


def test_graphviz_is_installed() -> None:
    """bootstrap.sh installs dot and the graphviz extra: drawing is never skipped in CI."""
    assert shutil.which("dot") is not None, "run scripts/bootstrap.sh: it installs Graphviz"
    import graphviz  # noqa: F401


def test_render_writes_svg_and_png(tmp_path: Path) -> None:
    p = sb.Pipeline()
    build(p)
    result = p.run()
    svg = result.graph().render(tmp_path / "pipeline.svg")
    text = Path(svg).read_text()
    assert "<svg" in text
    assert CLICKS_WM in text and LATE in text and "late rows" in text
    png = Path(p.graph().render(str(tmp_path / "pipeline.png"))).read_bytes()
    assert png.startswith(b"\x89PNG")
    with pytest.raises(ValueError, match=r"\.svg or \.png"):
        p.graph().render(tmp_path / "pipeline.pdf")


def test_jupyter_shows_svg() -> None:
    p = sb.Pipeline()
    build(p)
    bundle = p.graph()._repr_mimebundle_()
    assert bundle["image/svg+xml"].lstrip().startswith("<?xml")
    assert bundle["text/plain"].startswith("PipelineGraph(13 transforms, 13 edges)")
    assert p.graph()._repr_svg_() == bundle["image/svg+xml"]


def test_jupyter_falls_back_to_mermaid_without_dot(monkeypatch: pytest.MonkeyPatch) -> None:
    p = sb.Pipeline()
    build(p)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    bundle = p.graph()._repr_mimebundle_()
    assert "image/svg+xml" not in bundle
    assert bundle["text/markdown"] == f"```mermaid\n{p.graph().to_mermaid()}```\n"


def test_the_example_prints_where_it_drew_its_pipeline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    example = runpy.run_path(
        str(Path(__file__).parent.parent / "examples" / "orders_per_minute.py")
    )
    picture = tmp_path / "orders.svg"
    example["main"](["--picture", str(picture)])
    out = capsys.readouterr().out
    assert out.rstrip().endswith(f"The pipeline's picture: {picture}")
    assert "<svg" in picture.read_text()
    assert "WithWatermark(event_time)  " in out  # the metrics table
