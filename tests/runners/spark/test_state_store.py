"""The RocksDB state store only for the queries that hold a `transformWithState` (issue 22)."""

from __future__ import annotations

import pathlib
import tempfile
from typing import Any

import pytest

import sparkbeam as sb
from sparkbeam.runners.spark.execute.streaming import StreamingTranslation
from sparkbeam.runners.spark.plan.ancestry import ancestors
from sparkbeam.runners.spark.plan.settings import CHANGELOG, STATE_STORE
from tests.agreement.pipelines import RowCount

pytestmark = pytest.mark.spark

SPARK_RUNNER = pathlib.Path(sb.__file__).parent / "runners" / "spark"


def test_every_transform_with_state_is_built_in_keyed_state() -> None:
    built = [
        path.name
        for path in SPARK_RUNNER.glob("*.py")
        if ".transformWithState(" in path.read_text() and path.name != "keyed_state.py"
    ]
    assert built == [], "build it with keyed_state.transform_with_state"


def test_only_queries_with_transform_with_state_start_with_rocksdb(spark: Any) -> None:
    p = sb.Pipeline()
    stream = sb.TestStream().add_epoch([{"k": "a", "t": 1}])
    w = (p | stream).with_watermark("t", 2)
    windows = w.tumble("t", 5)
    outputs = {
        "counted": windows.combine_per_key(["window_start"], n=sb.Count()),
        "sorted": w.sort("t"),
        "sessions": w.session("t", 3, keys="k"),
        "user combine": windows.combine_per_key(["window_start"], n=RowCount()),
        "late rows": w.late_rows(),  # fed straight from the source: a stateless filter
        "late rows of computed rows": (p | stream)
        .filter(sb.col("t") > 0)
        .with_watermark("t", 2)
        .late_rows(),
        "joined": windows.join(windows.select("k", "window_start"), on=["k", "window_start"]),
    }
    with_state = {"sorted", "sessions", "user combine", "late rows of computed rows"}
    for name, pcoll in outputs.items():
        selected = ancestors(p.nodes, pcoll.node)
        with tempfile.TemporaryDirectory() as scratch:  # the feed and its `.incoming` inside
            translation = StreamingTranslation(
                spark, p.nodes, str(pathlib.Path(scratch, "feed")), selected
            )
            translation.run()
        want = STATE_STORE[1] if name in with_state else None
        assert translation.settings.get(STATE_STORE[0]) == want, name
        changelog = CHANGELOG[1] if name in with_state else None
        assert translation.settings.get(CHANGELOG[0]) == changelog, name
        assert (pcoll.node.id in translation.keyed_state) == (name in with_state), name
    assert spark.conf.get(STATE_STORE[0], None) is None
