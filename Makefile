# Two commands on a fresh machine: `make demo` and `make test`. Both set up .venv first.
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=
# `make test` and `make test-all` (CI) spread their tests over this many pytest-xdist
# processes; TEST_WORKERS=1 runs them in one. Measured on 2 cores: the fast tier 10m17s,
# the slow tier about an hour (CI ran both in one process in 69 minutes before the slow
# tier grew by about 10).
TEST_WORKERS ?= 2

.PHONY: install install-gpu test test-all demo clean-workers

install:
	@bash scripts/install_venv.sh $(VENV)

# The same .venv plus TensorFlow 2.14.1's CUDA 11.8 / cuDNN 8.7 libraries (docs/guide.md: GPU).
install-gpu: install
	$(PY) -m pip install --quiet --no-deps -r requirements-gpu.lock
	$(VENV)/bin/tff-noisy doctor

test: install
	$(PY) -m pytest -m "not slow" $(if $(filter-out 1,$(TEST_WORKERS)),-n $(TEST_WORKERS)) \
	  $(PYTEST_ARGS) tests

# CI: every test; the 25 slowest are listed at the end, to keep the tier's time in view.
test-all: install
	$(PY) -m pytest $(if $(filter-out 1,$(TEST_WORKERS)),-n $(TEST_WORKERS)) --durations=25 \
	  $(PYTEST_ARGS) tests

# FedAvg against three noise-robust methods on identical noisy digits: the table, what each
# method estimated, runs/demo/comparison.png and the report runs/demo/report.md.
DEMO_METHODS ?= fedavg,fedefc,fedln_nafedavg,fedds

demo: install
	$(VENV)/bin/tff-noisy compare experiments/configs/demo.yaml --methods $(DEMO_METHODS) \
	  --out runs/demo --overwrite
	$(VENV)/bin/tff-noisy report runs/demo
