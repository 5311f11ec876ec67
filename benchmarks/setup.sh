#!/usr/bin/env bash
# The benchmark's own setup: comparison tools go into benchmarks/.venv-beam,
# a separate environment, never into sparkbeam's dependencies.
#
#   bash benchmarks/setup.sh            # Apache Beam (the direct runner's comparison)
#   BEAM_VERSION=2.77.0 bash benchmarks/setup.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="$here/.venv-beam"
python="${PYTHON:-python3}"
version="${BEAM_VERSION:-2.77.0}"
if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet "apache-beam==$version" pyarrow
"$venv/bin/python" -c "import apache_beam; print('apache-beam', apache_beam.__version__, 'in', '$venv')"
