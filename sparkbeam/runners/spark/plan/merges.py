"""Where watermarks of several `WithWatermark`s meet (`Union`, `Join`): what Spark's one
watermark per query can run there, decided from the graph alone.

A merge judges late rows itself (`judges_late_rows`) under `policy="max"` or with an idle
input; the phases here refuse what it then cannot judge, and merges of different policies.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sparkbeam.graph import Node
from sparkbeam.runners.spark import limits
from sparkbeam.runners.spark.plan.judging import JudgeRule, pipeline_judges
from sparkbeam.transforms.join import Join
from sparkbeam.transforms.union import Union
from sparkbeam.transforms.watermark import WithWatermark

Origins = Mapping[int, frozenset[int]]


def may_idle(nodes: Sequence[Node], origins: Origins, node: Node) -> bool:
    """Whether an input of `node` comes from a `WithWatermark` with `idle_after` (epochs)."""
    for origin in origins[node.id]:
        transform = nodes[origin].transform
        if isinstance(transform, WithWatermark) and transform.idle_after is not None:
            return True
    return False


def merge_policy(origins: Origins, node: Node) -> str | None:
    """The policy of a `Union` or `Join` where watermarks of several `WithWatermark`s meet
    (Spark keeps one watermark per query, the earliest or the latest of them); None
    elsewhere."""
    transform = node.transform
    if isinstance(transform, (Union, Join)) and len(origins[node.id]) > 1:
        return transform.policy
    return None


def judges_late_rows(nodes: Sequence[Node], origins: Origins, node: Node) -> bool:
    """Whether a merge drops rows as late itself: under `policy="max"`, or with an idle
    input, where watermarks of several `WithWatermark`s meet."""
    policy = merge_policy(origins, node)
    return policy is not None and (policy == "max" or may_idle(nodes, origins, node))


def join_keys_apart(
    judges: Mapping[int, Mapping[str, JudgeRule]], node: Node, keys: Sequence[str]
) -> str | None:
    """The first of a `Join`'s `keys` whose judges differ on its two sides (None: none)."""
    left, right = (judges[i] for i in node.inputs)
    return next((key for key in keys if left[key] != right[key]), None)


def refuse_interval_join_max(nodes: Sequence[Node], origins: Origins) -> None:
    """A `Join` with no window key that judges late rows (`policy="max"`, idle inputs)."""
    for node in nodes:
        transform = node.transform
        if isinstance(transform, Join) and judges_late_rows(nodes, origins, node):
            left, right = (nodes[i].info for i in node.inputs)
            if not transform.window_keys(left, right):
                raise limits.INTERVAL_JOIN_MAX.error(node.label)


def refuse_join_key_derived_apart(nodes: Sequence[Node], origins: Origins) -> None:
    """A window `Join` whose key is derived differently on its two sides: the first window key
    (which cleans its state), every one where it judges late rows."""
    judges = pipeline_judges(nodes, origins)
    for node in nodes:
        transform = node.transform
        if not isinstance(transform, Join):
            continue
        keys = transform.window_keys(*(nodes[i].info for i in node.inputs))
        if not judges_late_rows(nodes, origins, node):
            keys = keys[:1]
        key = join_keys_apart(judges, node, keys)
        if key is not None:
            raise limits.JOIN_KEY_DERIVED_APART.error(node.label, key=key)


def union_columns_apart(judges: Mapping[int, Mapping[str, JudgeRule]], node: Node) -> str | None:
    """The first watermarked column of a `Union` whose judges differ on its inputs (None:
    none)."""
    for column in sorted(node.info.watermarked):
        if len({judges[i][column] for i in node.inputs}) > 1:
            return column
    return None


def refuse_union_derived_apart(nodes: Sequence[Node], origins: Origins) -> None:
    """A `Union` that judges late rows (`policy="max"`, idle inputs) of a column derived
    differently on its inputs."""
    judges = pipeline_judges(nodes, origins)
    for node in nodes:
        if isinstance(node.transform, Union) and judges_late_rows(nodes, origins, node):
            column = union_columns_apart(judges, node)
            if column is not None:
                raise limits.UNION_DERIVED_APART.error(node.label, column=column)


def refuse_policies_meet(nodes: Sequence[Node], origins: Origins) -> None:
    """Merges of different policies in one query (all the pipeline's, as one query: a merge's
    policy decides the watermark of every query it runs in)."""
    first: str | None = None
    for node in nodes:
        policy = merge_policy(origins, node)
        if policy is None:
            continue
        if first is not None and policy != first:
            raise limits.POLICIES_MEET.error(node.label, policy=policy, other=first)
        first = first or policy
