"""sparkbeam's benchmarks: one entry point, one table, every figure measured side by side.

    .venv/bin/python benchmarks/run.py                       # everything (about 30 minutes)
    .venv/bin/python benchmarks/run.py --only direct,scale   # some sections
    .venv/bin/python benchmarks/run.py --quick               # small scales: a smoke run

Sections (the pipeline everywhere: N rows over 100 keys, out of order by up
to 5 s, watermark with a 5 s delay, 60 s tumbling windows, per-key sum):

- `direct`: Apache Beam's Python DirectRunner (installed by
  `bash benchmarks/setup.sh` into `benchmarks/.venv-beam`; the section says
  so if it is missing), a plain Python loop computing the same sums, and the
  direct runner with its invariant checks on and off, all reading the same
  parquet files (one epoch per 100,000 rows), plus the direct runner fed
  Python dicts from memory by a `TestStream`.
- `scale`: the direct runner (checks on) at 100 thousand, 1 million and 10
  million rows through the same pipeline, and through `Sort` of the same
  rows with the 5 s watermark (a bounded out-of-orderness).
- `spark-batch`: `benchmarks/spark_batch.py` (sparkbeam's translation against
  the same job written in PySpark, 10 million rows, median of 3).
- `spark-expressions`: `benchmarks/spark_expressions.py` (issue 17: a
  filter, a derived column and a per-key sum written as expressions against
  the same job in PySpark by hand, and against `Filter`/`Map` with Python
  functions; 2 million rows, median of 3).
- `spark-streaming`: `benchmarks/spark_streaming.py` (the same as a streaming
  query, 1 million rows in 10 epochs fed one at a time; target: within 25
  percent of hand-written) and `benchmarks/spark_streaming_live.py` (the same
  files in a live directory, all of them waiting: production with a backlog,
  read by Spark's file source by hand and by the runner's footer source; at 1
  million and at 10 million rows; targets: within 35 and 25 percent end to
  end, and each batch after the first within 10 percent), each the median of
  3 rounds run in turn with hand-written (the ratio: the median of each
  round's).
- `updates`: the direct runner's `emit="update"` against its `emit="close"`
  on the same files (the same groups and sums from each group's last row),
  and each with 2 minutes of `allowed_lateness`, with the groups each holds at
  most; at the direct section's rows and at the largest scale.
- `spark-defaults`: `benchmarks/spark_defaults.py` (issue 22's pipeline, 13
  rows in 3 epochs: `runner="spark"` with no options, `collect` of the join
  and `metrics()`, against the same pipeline hand-written in Structured
  Streaming on a session with Spark's defaults for `local[*]`; each in a
  fresh process, its session started before the clock).

Results are checked, never inside a timed region. The `direct` section checks
that every job computed the same number of groups and total of their sums
(Beam's, the loop's, the direct runner's); `scale` checks nothing. Each Spark
script checks its jobs' sums, group by group, against the direct runner's run
of the same pipeline over the same input, after its timed runs, and stops on
a difference: every job of `spark-batch`, `spark-expressions` and
`spark-defaults` (the join's rows; the sessions are counted, not read), and
`sparkbeam` in `spark-streaming` (the hand-written streaming queries follow
Spark's own rule for late rows, so their sums differ by design: not
checked). The table's `Checks` list says what each section checked.

Each direct-runner and Beam figure is the best of `--repeat` runs, each in a
fresh process (so peak memory, `ru_maxrss`, is that configuration's alone).
Seconds are wall time from building the pipeline to having its output
(rows/s come from them); `cpu s` is that process's CPU time, which other
load on the machine disturbs less (Spark's work is in the JVM: no figure).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import data

HERE = os.path.dirname(os.path.abspath(__file__))
BEAM_PYTHON = os.path.join(HERE, ".venv-beam", "bin", "python")
SECTIONS = (
    "direct",
    "scale",
    "spark-batch",
    "spark-expressions",
    "spark-streaming",
    "spark-defaults",
    "updates",
)


@dataclass
class Line:
    section: str
    job: str
    rows: int | None = None
    seconds: float | None = None
    cpu: float | None = None
    peak_mib: float | None = None
    compared: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def rate(self) -> float | None:
        return None if not self.rows or not self.seconds else self.rows / self.seconds


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def measure(job: str, directory: str, repeat: int) -> dict[str, Any]:
    """The best of `repeat` runs of `job`, each in a fresh process (peak memory: the largest)."""
    if job == "beam":
        command = [BEAM_PYTHON, os.path.join(HERE, "beam_job.py"), directory]
    else:
        command = [sys.executable, os.path.join(HERE, "jobs.py"), job, directory]
    runs = []
    for attempt in range(repeat):
        progress(f"{job} on {os.path.basename(directory)} ({attempt + 1}/{repeat})")
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    best = min(runs, key=lambda run: run["seconds"])
    return {**best, "peak_mib": max(run["peak_mib"] for run in runs)}


def line(section: str, name: str, run: dict[str, Any], compared: str = "") -> Line:
    return Line(
        section, name, run["rows"], run["seconds"], run["cpu"], run["peak_mib"], compared, run
    )


def same_sums(runs: Sequence[dict[str, Any]]) -> None:
    answers = {(run["groups"], run["total"]) for run in runs}
    if len(answers) != 1:
        raise SystemExit(f"the jobs computed different sums: {runs}")


def direct_section(
    args: argparse.Namespace, lines: list[Line], targets: list[str], checks: list[str]
) -> None:
    directory = data.rows_directory(args.data, args.rows)
    jobs = {
        "plain Python loop": "loop",
        "direct, checks on": "direct-on",
        "direct, checks off": "direct-off",
        "direct, checks on, dicts": "direct-memory",
    }
    runs = {name: measure(job, directory, args.repeat) for name, job in jobs.items()}
    beam = None
    if os.path.exists(BEAM_PYTHON):
        beam = measure("beam", directory, args.repeat)
        same_sums([beam, *runs.values()])
        checks.append(f"direct: Beam and {', '.join(runs)}: the same groups and total")
        beam_rate = beam["rows"] / beam["seconds"]
        lines.append(line("direct", f"Beam {beam['version']} DirectRunner", beam, "baseline"))
    else:
        same_sums(list(runs.values()))
        checks.append(f"direct: {', '.join(runs)}: the same groups and total")
        lines.append(Line("direct", "Beam: not installed", compared="bash benchmarks/setup.sh"))
    loop = runs["plain Python loop"]["seconds"]
    for name, run in runs.items():
        notes = []
        if beam is not None:
            notes.append(f"{run['rows'] / run['seconds'] / beam_rate:.1f}x Beam")
        if name != "plain Python loop":
            notes.append(f"{run['seconds'] / loop:.2f}x loop time")
        lines.append(line("direct", name, run, ", ".join(notes)))
    if beam is not None:
        on = runs["direct, checks on"]
        ratio = on["rows"] / on["seconds"] / beam_rate
        verdict = "holds" if ratio >= 30 else "does NOT hold"
        targets.append(
            f"direct runner (checks on) >= 30x Beam's throughput: {ratio:.1f}x, {verdict}"
        )


def scale_section(args: argparse.Namespace, lines: list[Line], targets: list[str]) -> None:
    for name, job, cost in (
        ("watermark+tumble+sum", "direct-on", lambda n: n),
        ("watermark+sort", "sort", lambda n: n * math.log2(n)),
    ):
        runs = [measure(job, data.rows_directory(args.data, n), args.repeat) for n in args.sizes]
        base = runs[0]["seconds"] / cost(runs[0]["rows"])
        unit = "time/row" if job == "direct-on" else "time/(n log n)"
        for run in runs:
            growth = run["seconds"] / cost(run["rows"]) / base
            held = f"held <= {run['peak_state']:,} {'groups' if job == 'direct-on' else 'rows'}"
            compared = f"{unit} x{growth:.2f} of {args.sizes[0]:,}; {held}"
            lines.append(line("scale, checks on", name, run, compared))
        last = runs[-1]
        growth = last["seconds"] / cost(last["rows"]) / base
        verdict = "linear" if growth <= 1.25 else "NOT linear"
        targets.append(
            f"{name}: {unit} at {last['rows']:,} rows is x{growth:.2f} that at "
            f"{runs[0]['rows']:,} ({verdict}: at most x1.25 counts as linear)"
        )
        by_rows = {run["rows"]: run for run in runs}
        if 1_000_000 in by_rows and 10_000_000 in by_rows:
            low, high = by_rows[1_000_000]["peak_mib"], by_rows[10_000_000]["peak_mib"]
            change = high / low - 1
            verdict = "holds" if change <= 0.20 else "does NOT hold"
            targets.append(
                f"{name}: peak memory 1M -> 10M rows {low:.0f} -> {high:.0f} MiB "
                f"({change:+.0%}; at most +20%: {verdict})"
            )


def updates_section(
    args: argparse.Namespace, lines: list[Line], targets: list[str], checks: list[str]
) -> None:
    """The direct runner's update mode against its close mode, and each with lateness."""
    jobs = {
        'emit="close"': "direct-on",
        'emit="update"': "update",
        'emit="close", 2 min lateness': "close-late",
        'emit="update", 2 min lateness': "update-late",
    }
    sizes = [args.rows, *(n for n in args.sizes[-1:] if n > args.rows)]
    for rows in sizes:
        directory = data.rows_directory(args.data, rows)
        repeat = args.repeat if rows == args.rows else 1
        runs = {name: measure(job, directory, repeat) for name, job in jobs.items()}
        same_sums([runs['emit="close"'], runs['emit="update"']])
        same_sums([runs['emit="close", 2 min lateness'], runs['emit="update", 2 min lateness']])
        checks.append(
            f"updates, {rows:,} rows: each update mode's last rows per group have the sums of "
            "its close mode"
        )
        for name, run in runs.items():
            base = runs[
                'emit="close"' if "lateness" not in name else 'emit="close", 2 min lateness'
            ]
            held = f"held <= {run['peak_state']:,} groups"
            changes = f"{run['changes']:,} change rows; " if "update" in name else ""
            compared = f"{changes}{run['seconds'] / base['seconds']:.2f}x its close mode; {held}"
            lines.append(line(f"updates, {rows:,} rows", name, run, compared))
        update, close = runs['emit="update"'], runs['emit="close"']
        ratio = update["seconds"] / close["seconds"]
        if rows == args.rows:
            verdict = "holds" if ratio <= 1.3 else "does NOT hold"
            targets.append(
                f'direct runner emit="update" within 1.3x of emit="close": {ratio:.2f}x, {verdict}'
            )
        same = update["peak_state"] == close["peak_state"]
        late = runs['emit="update", 2 min lateness']["peak_state"]
        targets.append(
            f'direct runner emit="update" holds the groups emit="close" holds at {rows:,} rows: '
            f"{update['peak_state']:,} vs {close['peak_state']:,} "
            f"({'holds' if same else 'does NOT hold'}); with 2 min lateness {late:,}"
        )


def spark_script(script: str, arguments: list[str]) -> dict[str, Any]:
    command = [sys.executable, os.path.join(HERE, script), *arguments, "--json"]
    progress(" ".join(os.path.basename(part) for part in command))
    env = {**os.environ, "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable)}
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def spark_lines(
    section: str,
    result: dict[str, Any],
    target: float,
    lines: list[Line],
    targets: list[str],
    checks: list[str],
) -> None:
    if not result.get("checked"):
        raise SystemExit(f"{section}: the script says nothing of what it checked: {result}")
    checks.extend(f"{section}: {statement}" for statement in result["checked"])
    rows, seconds = result["rows"], result["seconds"]
    hand = seconds["hand-written"]
    ratios = result.get("ratios") or {name: value / hand for name, value in seconds.items()}
    for name, value in seconds.items():
        compared = (
            "baseline" if name == "hand-written" else f"{ratios[name]:.2f}x hand-written time"
        )
        lines.append(Line(section, name, rows, value, None, None, compared))
    ratio = ratios["sparkbeam"]
    verdict = "holds" if ratio <= 1 + target else "does NOT hold"
    load = f"; load average {result['load']}" if "load" in result else ""
    cpu = result.get("cpu_ratios", {}).get("sparkbeam")
    cpu_note = f"; {cpu:.2f}x its CPU time" if cpu is not None else ""
    ended = ""
    if "hand-written + end of input" in result.get("rounds", {}):
        rounds = result["rounds"]
        pairs = zip(rounds["sparkbeam"], rounds["hand-written + end of input"], strict=True)
        like = statistics.median(mine / theirs for mine, theirs in pairs)
        ended = f"; {like:.2f}x that of hand-written with its input ended"
    targets.append(
        f"{section}: sparkbeam takes {ratio:.2f}x the hand-written time "
        f"(target: within {target:.0%}, {verdict}{cpu_note}{ended}{load})"
    )


LIVE_SCALES = [(1_000_000, 0.35), (10_000_000, 0.25)]
"""The live section's rows and its end-to-end target at each."""


def batch_lines(section: str, result: dict[str, Any], target: float, targets: list[str]) -> None:
    """The target line of sparkbeam's batches after the first against the hand-written
    query's, with its first batch's ratio beside it (`spark_streaming_live.batch_ratios`)."""
    times = result["batches"]["sparkbeam"]
    ratio = times["later_ratio"]
    verdict = "holds" if ratio <= 1 + target else "does NOT hold"
    targets.append(
        f"{section}: each sparkbeam batch after the first takes {ratio:.2f}x the hand-written "
        f"query's (target: within {target:.0%}, {verdict}; the first batch, from the query's "
        f"start, {times['first_ratio']:.2f}x)"
    )


def machine() -> str:
    with open("/proc/meminfo") as info:
        total_kib = int(info.readline().split()[1])
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (
        f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores, "
        f"{total_kib / 2**20:.0f} GiB, Python {platform.python_version()}, load average {load}"
    )


def table(lines: list[Line]) -> str:
    header = ("section", "job", "rows", "seconds", "cpu s", "rows/s", "peak MiB", "compared")
    cells = [header]
    for item in lines:
        cells.append(
            (
                item.section,
                item.job,
                "" if item.rows is None else f"{item.rows:,}",
                "" if item.seconds is None else f"{item.seconds:.2f}",
                "" if item.cpu is None else f"{item.cpu:.2f}",
                "" if item.rate is None else f"{item.rate:,.0f}",
                "" if item.peak_mib is None else f"{item.peak_mib:.0f}",
                item.compared,
            )
        )
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    right = {2, 3, 4, 5, 6}
    out = []
    for row in cells:
        out.append(
            "  ".join(
                cell.rjust(width) if i in right else cell.ljust(width)
                for i, (cell, width) in enumerate(zip(row, widths, strict=True))
            ).rstrip()
        )
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", default=",".join(SECTIONS), help="comma-separated sections")
    parser.add_argument("--quick", action="store_true", help="small scales, one run each")
    parser.add_argument("--rows", type=int, help="rows of the direct section (1,000,000)")
    parser.add_argument("--repeat", type=int, help="runs per direct figure, best kept (3)")
    parser.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "sparkbeam-bench"))
    args = parser.parse_args()
    sections = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = [name for name in sections if name not in SECTIONS]
    if unknown:
        parser.error(f"unknown section(s) {unknown}; use some of {list(SECTIONS)}")
    args.rows = args.rows or (200_000 if args.quick else 1_000_000)
    args.repeat = args.repeat or (1 if args.quick else 3)
    args.sizes = [100_000, 300_000, 1_000_000] if args.quick else [100_000, 1_000_000, 10_000_000]

    started = machine()
    lines: list[Line] = []
    targets: list[str] = []
    checks: list[str] = []
    if "direct" in sections:
        direct_section(args, lines, targets, checks)
    if "scale" in sections:
        scale_section(args, lines, targets)
    if "spark-batch" in sections:
        rows = 1_000_000 if args.quick else 10_000_000
        batch = spark_script(
            "spark_batch.py", ["--rows", str(rows), "--repeat", "1" if args.quick else "3"]
        )
        spark_lines("spark batch", batch, 0.10, lines, targets, checks)
    if "spark-expressions" in sections:
        rows = 200_000 if args.quick else 2_000_000
        expressions = spark_script(
            "spark_expressions.py", ["--rows", str(rows), "--repeat", "1" if args.quick else "3"]
        )
        section = "spark expressions (filter, column, sum)"
        spark_lines(section, expressions, 0.10, lines, targets, checks)
    if "spark-streaming" in sections:
        rows, epochs = (200_000, 4) if args.quick else (1_000_000, 10)
        repeat = "1" if args.quick else "3"
        common = ["--rows", str(rows), "--epochs", str(epochs), "--repeat", repeat]
        streaming = spark_script(
            "spark_streaming.py",
            [*common, "--variants", "hand-written;hand-written + end of input;sparkbeam"],
        )
        section = f"spark streaming, {epochs} epochs"
        spark_lines(section, streaming, 0.25, lines, targets, checks)
        for live_rows, target in [(rows, 0.35)] if args.quick else LIVE_SCALES:
            arguments = ["--rows", str(live_rows), "--epochs", str(epochs), "--repeat", repeat]
            live = spark_script(
                "spark_streaming_live.py", [*arguments, "--variants", "hand-written;sparkbeam"]
            )
            section = f"spark streaming, live, {epochs} files of {live_rows // epochs:,} rows"
            spark_lines(section, live, target, lines, targets, checks)
            batch_lines(section, live, 0.10, targets)
    if "updates" in sections:
        updates_section(args, lines, targets, checks)
    if "spark-defaults" in sections:
        defaults = spark_script("spark_defaults.py", [])
        section = 'spark defaults (runner="spark"; by hand: Spark\'s)'
        spark_lines(section, defaults, 0.25, lines, targets, checks)

    print(f"sparkbeam benchmarks, {time.strftime('%Y-%m-%d')}: {started}")
    print(table(lines))
    if targets:
        print()
        print("Targets:")
        for target in targets:
            print(f"- {target}")
    if checks:
        print()
        print("Checks (after the timed runs; a difference stops the run):")
        for check in checks:
            print(f"- {check}")
    print(f"(load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())})")


if __name__ == "__main__":
    main()
