"""The runner builds its DataFrames without pyspark recording a call site per Column function
(`session/call_sites.py`); the user's own code still records them."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.errors import utils
from pyspark.sql import functions as F

import sparkbeam as sb
from sparkbeam.runners.spark.session.call_sites import without_call_sites
from tests.files import publish_parquet

CACHE = "_enable_debugging_cache"


def test_the_setting_comes_back_after_nested_and_concurrent_uses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for kept in (None, True, False):
        monkeypatch.setattr(utils, CACHE, kept)
        with without_call_sites():
            assert getattr(utils, CACHE) is False
            with without_call_sites():
                assert getattr(utils, CACHE) is False
            assert getattr(utils, CACHE) is False
        assert getattr(utils, CACHE) is kept
        # two threads whose uses overlap, the one that started second ending first
        with without_call_sites():
            seen: list[object] = []
            thread = threading.Thread(target=_use_once, args=(seen,))
            thread.start()
            thread.join()
            assert seen == [False]
            assert getattr(utils, CACHE) is False  # this use still runs
        assert getattr(utils, CACHE) is kept


def _use_once(seen: list[object]) -> None:
    with without_call_sites():
        seen.append(getattr(utils, CACHE))


@pytest.fixture
def call_sites(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every call site pyspark records from now on (the session's setting: on, its default)."""
    recorded: list[str] = []
    capture = utils._capture_call_site

    def recording(depth: int) -> str:
        site = capture(depth)
        recorded.append(site)
        return site

    monkeypatch.setattr(utils, "_capture_call_site", recording)
    monkeypatch.setattr(utils, CACHE, None)  # read again from the session
    return recorded


def test_a_batch_run_records_no_call_site_and_the_users_code_still_does(
    spark: Any, call_sites: list[str]
) -> None:
    F.col("x") + 1
    assert len(call_sites) == 2  # the user's: `col` and `+`, as their session says
    del call_sites[:]
    p = sb.Pipeline(runner=sb.SparkRunner(spark=spark))
    rows = p | sb.Create([{"k": "a", "v": 1}, {"k": "b", "v": 2}, {"k": "a", "v": 4}])
    totals = rows.map(lambda r: {**r, "v": r["v"] * 10}).combine_per_key(["k"], t=sb.Sum("v"))
    got = sorted((r["k"], r["t"]) for r in p.run().collect(totals))
    assert got == [("a", 50), ("b", 20)]
    assert call_sites == []
    F.col("x") + 1
    assert len(call_sites) == 2


def test_a_live_query_is_built_recording_no_call_site(
    spark: Any, call_sites: list[str], tmp_path: Path
) -> None:
    source = tmp_path / "live"
    source.mkdir()
    publish_parquet(pa.table({"k": ["a", "b"], "t": [1_000, 9_000]}), source / "0.parquet")
    p = sb.Pipeline(runner=sb.SparkRunner(spark=spark))
    rows = p | sb.ReadFiles(str(source), schema={"k": str, "t": int}, streaming=True)
    given: list[dict[str, Any]] = []
    rows.with_watermark("t", 5_000).for_each_batch(lambda batch, _: given.extend(batch))
    result = p.run()
    try:
        result.process_all_available()
    finally:
        result.stop()
    assert sorted(r["k"] for r in given) == ["a", "b"]
    assert call_sites == []
