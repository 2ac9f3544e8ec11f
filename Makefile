# Two entry points on a fresh machine: `make demo` (the main job) and `make test` (the tests).
# Both create or reuse .venv and install what they need; constraints.txt pins the CPU torch wheel.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
PIP    := $(BIN)/python -m pip install --disable-pip-version-check -q -c constraints.txt

.PHONY: install test demo docs bench clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) torch==2.13.0
	$(PIP) -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

# OMP_WAIT_POLICY=PASSIVE: on 2 shared cores, OpenMP's busy-waiting threads stall small torch ops.
# --dist loadgroup: tests marked xdist_group(NAME) share a worker (the ranx tests pay numba's start-up once);
# --durations=10 prints the ten slowest tests, to see which one grew.
test: $(STAMP)
	OMP_WAIT_POLICY=PASSIVE $(BIN)/python -m pytest -q -n 2 --dist loadgroup --durations=10 tests metrics losses ltr

demo: $(STAMP)
	$(BIN)/ltr ablate --quick --out runs/demo

# The documentation site into site/ (mkdocs.yml); --strict: a broken link or API name fails the build.
# `make test` builds it too (tests/test_docs_site.py), into a temporary folder.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict --site-dir site

# allRank pins torch<=1.8, so it is installed without its dependencies (its loss file is all we use).
bench: $(STAMP)
	$(PIP) -e '.[bench]'
	$(BIN)/python -m pip install --disable-pip-version-check -q --no-deps allRank==1.4.3
	$(BIN)/python benchmarks/bench_metrics.py
	$(BIN)/python benchmarks/bench_losses.py

clean:
	rm -rf $(VENV) runs site .pytest_cache
