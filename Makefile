# Two entry points on a fresh machine: `make demo` (the main job) and `make test` (the tests).
# Both create or reuse .venv and install what they need; constraints.txt pins the CPU torch wheel.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
PIP    := $(BIN)/python -m pip install --disable-pip-version-check -q -c constraints.txt

.PHONY: install test test-floors demo docs bench clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) torch==2.13.0
	$(PIP) -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

# OMP_WAIT_POLICY=PASSIVE: on 2 shared cores, OpenMP's busy-waiting threads stall small torch ops.
# --dist loadgroup: tests marked xdist_group(NAME) share a worker (the ranx tests pay numba's start-up once);
# --durations=10 prints the ten slowest tests, to see which one grew.
# PYTHONDONTWRITEBYTECODE= (empty: off): where the shell sets it, every `ltr` child the tests start would
# compile the project's modules from source again (about 0.5 s a command); __pycache__/ is in .gitignore.
test: $(STAMP)
	PYTHONDONTWRITEBYTECODE= OMP_WAIT_POLICY=PASSIVE $(BIN)/python -m pytest -q -n 2 --dist loadgroup --durations=10 tests metrics losses ltr

# The declared floors hold: a second environment, .venv-floors, with the lowest version of every runtime
# dependency (constraints-floors.txt; torch FLOOR_TORCH from TORCH_INDEX) runs the whole suite.
# Where PyTorch's index cannot be reached: make test-floors FLOOR_TORCH=2.13.0 TORCH_INDEX= (a local wheel).
FLOORS       := .venv-floors
FLOOR_TORCH  ?= 2.6.0
TORCH_INDEX  ?= https://download.pytorch.org/whl/cpu
FLOORS_PIP   := $(FLOORS)/bin/python -m pip install --disable-pip-version-check -q
test-floors:
	test -x $(FLOORS)/bin/python || $(PYTHON) -m venv $(FLOORS)
	$(FLOORS_PIP) $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)) torch==$(FLOOR_TORCH)
	$(FLOORS_PIP) -c constraints-floors.txt -e '.[test]' torch==$(FLOOR_TORCH)
	$(FLOORS)/bin/python -m pip list --disable-pip-version-check 2>/dev/null | grep -iE '^(numpy|scipy|torch|scikit-learn|pandas|lightgbm|pyarrow|matplotlib) '
	PYTHONDONTWRITEBYTECODE= OMP_WAIT_POLICY=PASSIVE $(FLOORS)/bin/python -m pytest -q -n 2 --dist loadgroup --durations=10 tests metrics losses ltr

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
	rm -rf $(VENV) $(FLOORS) runs site .pytest_cache
