"""What shipping sparkbeam to Spark's Python workers costs a job's start.

    .venv/bin/python benchmarks/shipping.py             # 5 rounds
    .venv/bin/python benchmarks/shipping.py --rounds 9

Each round runs the same two small jobs in a fresh process, once with
`SparkRunner(ship_package=True)` (the default: the runner zips the package it
runs, with protobuf's pure-Python sources, and adds it to the session) and
once with `ship_package=False` (the workers import the sparkbeam installed in
`.venv`), in turn. The session starts before the clock; the clock covers the
runner's own start (the zip, `addPyFile`) and each job to its collected rows:
a batch `Map` + per-key `Sum` (Python workers import sparkbeam to run the
`Map`) and a streaming `Sort` over three epochs (a `transformWithState`, whose
planning worker imports it too). Each job's rows are checked against the
direct runner's. The table gives the medians and the ratio of the medians;
the zip's size and the time to build it are printed apart.

A second table times what each new Python worker pays to import the
runner's modules from the zip, in a fresh interpreter after pyspark, pandas
and pyarrow: from the zip as shipped (each module with its compiled code)
and from a copy without the compiled code (each module compiled as it is
imported), in turn: `transformWithState`'s processors and the Python
functions' wrappers.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def rows(n: int) -> list[dict[str, Any]]:
    start = datetime(2026, 4, 1, 10, 0)
    return [{"k": f"k{i % 7}", "v": i, "t": start + timedelta(seconds=i)} for i in range(n)]


def batch_job(p: Any) -> Any:
    import sparkbeam as sb

    doubled = (p | sb.Create(rows(1000))).map(lambda row: {**row, "v": row["v"] * 2})
    return doubled.combine_per_key(["k"], total=sb.Sum("v"))


def streaming_job(p: Any) -> Any:
    import sparkbeam as sb

    data = rows(30)
    stream = sb.TestStream().add_epoch(data[10:20]).add_epoch(data[:10]).add_epoch(data[20:])
    return (p | stream).with_watermark("t", "5 seconds").sort("t")


def collected(runner: Any) -> tuple[list[Any], list[Any]]:
    import sparkbeam as sb

    outputs = []
    for job in (batch_job, streaming_job):
        with sb.Pipeline(runner=runner) as p:
            pcoll = job(p)
        outputs.append(p.result.collect(pcoll))
    return outputs[0], outputs[1]


def child(ship: bool) -> None:
    from pyspark.sql import SparkSession

    import sparkbeam as sb
    from sparkbeam.runners.spark.session import shipping

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    started = time.perf_counter()
    zip_start = time.perf_counter()
    size = os.path.getsize(shipping.package_zip()) if ship else 0
    zip_seconds = time.perf_counter() - zip_start
    spark_rows = collected(sb.SparkRunner(spark=spark, ship_package=ship))
    seconds = time.perf_counter() - started
    direct_rows = collected(sb.DirectRunner())
    same = [
        sorted(map(repr, spark_rows[0])) == sorted(map(repr, direct_rows[0])),
        spark_rows[1] == direct_rows[1],
    ]
    print(json.dumps({"seconds": seconds, "zip_seconds": zip_seconds, "zip_bytes": size,
                      "same": same}))  # fmt: skip
    spark.stop()


def measure(ship: bool) -> dict[str, Any]:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run(
        [sys.executable, __file__, "--child", "ship" if ship else "no-ship"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if not all(result["same"]):
        raise SystemExit(f"ship_package={ship}: Spark's rows differ from the direct runner's")
    return result


WORKER_MODULES = (
    "sparkbeam.runners.spark.parts.keyed_state",
    "sparkbeam.runners.spark.parts.python_functions",
)


def import_seconds(archive: str, module: str) -> float:
    """A fresh Python's time to import `module` from the zip `archive`, after PySpark's own."""
    code = (
        "import sys, time\n"
        f"sys.path.insert(0, {archive!r})\n"
        "import pyspark.sql, pyspark.sql.functions, pandas, pyarrow\n"
        "import pyspark.sql.streaming.stateful_processor\n"
        "start = time.perf_counter()\n"
        f"import {module}\n"
        "print(time.perf_counter() - start)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(done.stdout)


def without_compiled_code(archive: str, target: str) -> str:
    with zipfile.ZipFile(archive) as source, zipfile.ZipFile(target, "w") as copy:
        for name in source.namelist():
            if not name.endswith(".pyc"):
                copy.writestr(name, source.read(name))
    return target


def worker_imports(rounds: int) -> None:
    from sparkbeam.runners.spark.session import shipping

    shipped = shipping.package_zip()
    with tempfile.TemporaryDirectory() as scratch:
        sources = without_compiled_code(shipped, os.path.join(scratch, "sources.zip"))
        print(f"\n{'worker import of':<50}{'compiled ms':>12}{'source ms':>11}{'ratio':>7}")
        for module in WORKER_MODULES:
            times: dict[str, list[float]] = {shipped: [], sources: []}
            for _ in range(rounds):
                for archive in (shipped, sources):
                    times[archive].append(import_seconds(archive, module))
            fast, slow = (statistics.median(times[a]) * 1000 for a in (shipped, sources))
            print(f"{module:<50}{fast:>12.0f}{slow:>11.0f}{fast / slow:>6.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--child", choices=["ship", "no-ship"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child == "ship")
        return
    runs: dict[bool, list[dict[str, Any]]] = {True: [], False: []}
    for _ in range(args.rounds):
        for ship in (True, False):
            runs[ship].append(measure(ship))
    shipped = statistics.median(r["seconds"] for r in runs[True])
    installed = statistics.median(r["seconds"] for r in runs[False])
    print(f"{'ship_package':<14}{'median s':>10}{'min s':>8}{'max s':>8}")
    for ship, label in ((True, "True"), (False, "False")):
        seconds = [r["seconds"] for r in runs[ship]]
        print(f"{label:<14}{statistics.median(seconds):>10.2f}{min(seconds):>8.2f}"
              f"{max(seconds):>8.2f}")  # fmt: skip
    print(f"ratio shipped / installed: {shipped / installed:.2f}x "
          f"(+{shipped - installed:.2f} s over {args.rounds} rounds' medians)")  # fmt: skip
    zips = runs[True]
    print(f"zip: {statistics.median(r['zip_bytes'] for r in zips) / 1024:.0f} KiB, built in "
          f"{statistics.median(r['zip_seconds'] for r in zips) * 1000:.0f} ms; "
          "both jobs' rows checked against the direct runner's")  # fmt: skip
    worker_imports(args.rounds)


if __name__ == "__main__":
    main()
