"""A wheel built from the repository installs and runs the example in a clean environment.

sparkbeam is not on the package index: the docs tell users to build a wheel
(`pip wheel --no-deps -w dist .`) and install that file. This test does exactly that and
runs `examples/orders_per_minute.py` with the installed copy, from a directory outside the
repository, so a module missing from the wheel, a file the package reads from the source
tree, or an extra's requirement that is not declared fails here rather than on a user's
machine.

The clean environment is a new virtualenv without pip and without the test venv's
site-packages; so as not to download pyspark on every run, a `.pth` file lets it see
`.venv-workers` (made by `scripts/bootstrap.sh all`: exactly pyspark, pandas, pyarrow and
what they need, nothing of sparkbeam's). The wheel is installed with its `spark` extra as the
docs show it (pip then fetches only what `.venv-workers` lacks: protobuf), and the test
checks that what the wheel declares for that extra is satisfied there. The
example runs on the direct runner (no JVM). Cost: about 10 s, most of it building the wheel (pip
builds it in an isolated environment with setuptools from the package index, or pip's
cache, as it does for a user: the test needs the index or that cache).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from packaging.requirements import Requirement

from examples import orders_per_minute

ROOT = Path(__file__).resolve().parents[1]
WORKERS = ROOT / ".venv-workers"
NOT_SOURCE = (".git", ".venv*", "build", "dist", "site", "*.egg-info", "__pycache__", ".*_cache")

PROBE = """
import json, sys
from importlib.metadata import distribution, distributions
import pyspark, sparkbeam
wheel = distribution("sparkbeam")
print(json.dumps({
    "sparkbeam": sparkbeam.__file__,
    "pyspark": pyspark.__file__,
    "requires": wheel.requires or [],
    "installed": {d.metadata["Name"].lower(): d.version for d in distributions()},
    "path": sys.path,
}))
"""


def run(command: list[str], cwd: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{command[:3]}... failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def workers_site_packages() -> Path:
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    site = WORKERS / "lib" / version / "site-packages"
    assert (site / "pyspark").is_dir(), f"{WORKERS} has no pyspark: bash scripts/bootstrap.sh all"
    return site.resolve()


def test_wheel_installs_and_runs_the_example_in_a_clean_environment(tmp_path: Path) -> None:
    dist, venv, outside = tmp_path / "dist", tmp_path / "venv", tmp_path / "elsewhere"
    outside.mkdir()
    pip = [sys.executable, "-m", "pip"]
    source = tmp_path / "source"  # setuptools builds in the tree: a copy, not the repository
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*NOT_SOURCE))
    run([*pip, "wheel", "--no-deps", "-q", "-w", str(dist), "."], cwd=source)
    (wheel,) = dist.glob("sparkbeam-*.whl")

    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=outside)
    python = venv / "bin" / "python"
    site = Path(
        run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            cwd=outside,
        ).strip()
    )
    assert site != Path(sysconfig.get_paths()["purelib"])
    (site / "workers.pth").write_text(f"{workers_site_packages()}\n")
    # As the docs show it: the wheel with its spark extra. pip finds pyspark, pandas and
    # pyarrow already there (through the .pth) and fetches only what they lack (protobuf).
    spark_wheel = f"sparkbeam[spark] @ {wheel.as_uri()}"
    run([*pip, "--python", str(python), "install", "-q", spark_wheel], cwd=outside)

    probe = json.loads(run([str(python), "-c", PROBE], cwd=outside))
    assert Path(probe["sparkbeam"]).is_relative_to(site), probe["sparkbeam"]
    assert Path(probe["pyspark"]).resolve().is_relative_to(workers_site_packages())
    assert not any(Path(entry).resolve() == ROOT for entry in probe["path"] if entry)
    spark_extra = [
        requirement
        for text in probe["requires"]
        if (requirement := Requirement(text)).marker is None
        or requirement.marker.evaluate({"extra": "spark"})
    ]
    assert {r.name for r in spark_extra} >= {"pyspark", "pandas", "pyarrow"}
    unmet = [
        str(r)
        for r in spark_extra
        if r.name.lower() not in probe["installed"]
        or not r.specifier.contains(probe["installed"][r.name.lower()], prereleases=True)
    ]
    assert not unmet, f"the spark extra's requirements not met by {WORKERS}: {unmet}"

    printed = run([str(python), str(ROOT / "examples" / "orders_per_minute.py")], cwd=outside)
    expected = io.StringIO()
    with contextlib.redirect_stdout(expected):
        orders_per_minute.main([])
    assert printed.splitlines()[:-1] == expected.getvalue().splitlines()[:-1]
    assert "48 orders in, " in printed and "dropped as late" in printed
    assert printed.splitlines()[-1].startswith("The pipeline's picture: ")
    assert not list(outside.iterdir()), "the example wrote into the current directory"
