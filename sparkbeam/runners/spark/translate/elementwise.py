"""`Map`, `FlatMap`, `Filter` and `Select`: row by row, the same on bounded and unbounded
input (the Python functions run on the workers: `parts.python_functions`).
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame

from sparkbeam.graph import Node
from sparkbeam.runners.spark.parts.arrow import spark_schema
from sparkbeam.runners.spark.parts.expressions import Compiler
from sparkbeam.runners.spark.parts.python_functions import (
    filter_batches,
    flat_map_batches,
    map_batches,
)
from sparkbeam.runners.spark.translate.context import (
    Made,
    Translation,
    input_schema,
    streaming,
    translates,
)
from sparkbeam.transforms.elementwise import Filter, Map, Select
from sparkbeam.transforms.expressions import Expr
from sparkbeam.transforms.flat import FlatMap


@streaming(Map)
@translates(Map)
def map_rows(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> Made:
    transform = node.transform
    assert isinstance(transform, Map)
    in_schema, out_schema = input_schema(translation, node), node.info.schema
    function = map_batches(transform.fn, in_schema, out_schema, node.label, transform.keeps)
    return Made(inputs[0].mapInArrow(function, spark_schema(out_schema, node.label)))


@streaming(FlatMap)
@translates(FlatMap)
def flat_map_rows(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> Made:
    transform = node.transform
    assert isinstance(transform, FlatMap)
    in_schema, out_schema = input_schema(translation, node), node.info.schema
    function = flat_map_batches(transform.fn, in_schema, out_schema, node.label, transform.keeps)
    return Made(inputs[0].mapInArrow(function, spark_schema(out_schema, node.label)))


@streaming(Filter)
@translates(Filter)
def filter_rows(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> Made:
    """An expression is a native `filter` (a `None` result drops the row, as the direct
    runner); a Python function runs in Spark's Python workers through Arrow."""
    transform = node.transform
    assert isinstance(transform, Filter)
    schema = node.info.schema
    bound = transform.bind(schema, node.label)
    if bound is not None:
        return Made(inputs[0].filter(Compiler(schema, node.label).column(bound)))
    assert not isinstance(transform.predicate, Expr)
    function = filter_batches(transform.predicate, schema, node.label)
    return Made(inputs[0].mapInArrow(function, spark_schema(schema, node.label)))


@streaming(Select)
@translates(Select)
def select(translation: Translation, node: Node, inputs: Sequence[DataFrame]) -> Made:
    """Every expression is a native Column (`runners.spark.expressions`)."""
    transform = node.transform
    assert isinstance(transform, Select)
    schema = input_schema(translation, node)
    compiler = Compiler(schema, node.label)
    columns = [
        compiler.column(bound).alias(name) for name, bound in transform.bind(schema, node.label)
    ]
    return Made(inputs[0].select(*columns))
