# The two commands a new user needs (see README.md):
#   make example   install what the example needs (Java, the spark and graph extras, dot)
#                  and run examples/orders_per_minute.py
#   make test      install everything else too; lint, type-check, build the docs site and
#                  run the whole test suite
#   make test-more the random agreement tests with MORE (40) fresh examples: before a change
#                  to the Spark runner is done (docs/layout.md)
VENV := .venv
PY := $(VENV)/bin/python

MORE ?= 40

.PHONY: install example test test-more bench

install:
	bash scripts/bootstrap.sh all

example:
	bash scripts/bootstrap.sh example
	$(PY) examples/orders_per_minute.py

test: install
	$(PY) -m ruff check sparkbeam tests examples benchmarks scripts
	$(PY) -m mypy
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --quiet
	PYSPARK_PYTHON=$(abspath $(PY)) $(PY) -m pytest

test-more: install
	SPARKBEAM_MORE_EXAMPLES=$(MORE) PYSPARK_PYTHON=$(abspath $(PY)) $(PY) -m pytest \
		--hypothesis-show-statistics tests/agreement/test_random_streaming.py \
		tests/agreement/test_random_pipelines.py

bench: install
	$(PY) benchmarks/run.py
