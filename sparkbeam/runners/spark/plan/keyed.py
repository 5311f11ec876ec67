"""The columns a node keys state or late rows on in Spark streaming, and the refusal of those
whose judge Spark's one watermark cannot follow (`JudgeRule.keyed_refusal`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sparkbeam.graph import Node
from sparkbeam.runners.spark.plan.judging import JudgeRule, pipeline_judges
from sparkbeam.runners.spark.plan.merges import judges_late_rows
from sparkbeam.transforms.combine import CombinePerKey
from sparkbeam.transforms.join import Join
from sparkbeam.transforms.sort import Sort
from sparkbeam.transforms.union import Union
from sparkbeam.transforms.windows import WINDOW_START, Session

Origins = Mapping[int, frozenset[int]]
Judges = Mapping[int, Mapping[str, JudgeRule]]


def combine_keys(judges: Judges, nodes: Sequence[Node], node: Node) -> list[str]:
    """The keys a `CombinePerKey` judges its groups by: its watermarked keys whose judge is
    not held, else its first watermarked key; none where it runs with the `Session` right
    before it (on that Session's `window_start`: one operator over all keys)."""
    transform = node.transform
    assert isinstance(transform, CombinePerKey)
    judged = judges[node.inputs[0]]
    watermarked = [k for k in transform.keys if k in judged]
    exact = [k for k in watermarked if not judged[k].held]
    source = nodes[node.inputs[0]]
    if not exact and isinstance(source.transform, Session) and WINDOW_START in watermarked:
        return []
    return exact or watermarked[:1]


def keyed_columns(
    nodes: Sequence[Node], origins: Origins, judges: Judges, node: Node
) -> list[tuple[int, str]]:
    """The `(input port, column)`s `node` keys state or late rows on, in the order its
    translator takes their judges."""
    transform = node.transform
    if isinstance(transform, CombinePerKey):
        return [(0, key) for key in combine_keys(judges, nodes, node)]
    if isinstance(transform, (Sort, Session)):
        return [(0, transform.column)]
    if isinstance(transform, Join):
        left, right = (nodes[i].info for i in node.inputs)
        window_keys = transform.window_keys(left, right)
        if window_keys:
            return [(0, window_keys[0]), (1, window_keys[0])]
        if transform.times is not None and transform.within is not None:
            return [(0, transform.times[0]), (1, transform.times[1])]
        return []
    if isinstance(transform, Union) and judges_late_rows(nodes, origins, node):
        ports = range(len(node.inputs))
        return [(port, c) for c in sorted(node.info.watermarked) for port in ports]
    return []


def refuse_inexact_keys(nodes: Sequence[Node], origins: Origins) -> None:
    """State or late rows keyed on a column whose judge may close late: a `Session`'s held
    `window_start`, or a column derived differently where watermarks meet."""
    judges = pipeline_judges(nodes, origins)
    for node in nodes:
        for port, column in keyed_columns(nodes, origins, judges, node):
            judge = judges[node.inputs[port]].get(column)
            refusal = judge.keyed_refusal(node.label, column) if judge is not None else None
            if refusal is not None:
                raise refusal
