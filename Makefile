# The two commands a new user needs (see README.md):
#   make example   install everything and run examples/orders_per_minute.py
#   make test      lint, type-check, build the docs site and run the whole test suite
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: install example test bench

install:
	bash scripts/bootstrap.sh

example: install
	$(PY) examples/orders_per_minute.py

test: install
	$(PY) -m ruff check sparkbeam tests examples benchmarks scripts
	$(PY) -m mypy
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --quiet
	PYSPARK_PYTHON=$(abspath $(PY)) $(PY) -m pytest

bench: install
	$(PY) benchmarks/run.py
