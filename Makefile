# The README's two commands. Each does its own set-up first (idempotent, cached outside the
# checkout in $STACKBOOK_CACHE, default ~/.cache/stackbook), so a fresh machine needs nothing else.
SHELL := /bin/bash
PY := .venv/bin/python
CAMPAIGN ?= campaigns/quickstart.yaml
# The notebook JupyterLab opens first: the quickstart reference analysis (its source when no
# reference run is present).
LAB_NOTEBOOK ?= $(firstword $(wildcard outputs/quickstart/reference/40_analysis.ipynb) notebooks/40_analysis.py)
# JupyterLab on port 8888 (LAB_ARGS="--port=N --no-browser" to change), --allow-root when root; it
# prints the URL with its token once the server answers (stackbook/lab.py).
LAB_ARGS ?=
LAB_CMD = $(PY) -m stackbook.lab $(LAB_NOTEBOOK) $(LAB_ARGS)

.PHONY: setup setup-gpu quickstart test test-fast lab clean-runs notebooks readme-screenshot

setup:
	@bash tools/bootstrap.sh all

# Every kind that serves only on a GPU (`stackbook engines` lists them), each in its own cache
# environment: GPU hosts only (elsewhere it says so and exits non-zero).
setup-gpu:
	@bash tools/bootstrap.sh gpu

quickstart: setup
	@$(PY) -m stackbook.cli run $(CAMPAIGN)

# The set-up for the suite adds the kinds only its tests run (Transformers' server) and headless
# Chromium (the report test), through apt-get when root.
# The ten slowest tests are printed at the end: the suite has a time budget (docs/setup.md).
# Two workers: one runs the tests that start real engines, one at a time (tests/support/worker_groups.py groups
# them); the other runs the rest beside it, on the core the engine tests leave idle.
test:
	@bash tools/bootstrap.sh test
	@$(PY) -m pytest -q --durations=10 -n 2 --dist loadgroup $(PYTEST_ARGS)

# The quick tier: pure and harness tests under tests/unit (no engine, no notebook), seconds.
test-fast:
	@bash tools/bootstrap.sh workbook
	@$(PY) -m pytest -q tests/unit $(PYTEST_ARGS)

# JupyterLab on the repository with the stackbook kernel; the notebook sources (.py) open as
# notebooks through jupytext.
lab:
	@bash tools/bootstrap.sh workbook
	@$(LAB_CMD)

# The .ipynb twin of every notebook source (papermill and Jupyter run them as they are); a test
# fails when a twin drifts from its source.
notebooks:
	@$(PY) -m stackbook.notebook_sources

# The README's picture (docs/report-quickstart.png): the first 900 px of the quickstart reference's
# report at 1,400 px wide, rendered anew from a copy of its records by the first-screen test.
readme-screenshot:
	@STACKBOOK_README_PNG=$(CURDIR)/docs/report-quickstart.png $(PY) -m pytest -q -p no:cacheprovider \
		"tests/notebooks/test_first_screens.py::test_a_rendered_copy_opens_on_its_five_answers_inside_the_first_900_px[quickstart/reference]"

# Remove run directories other than the committed reference runs.
clean-runs:
	@find outputs -mindepth 2 -maxdepth 2 -type d ! -name reference -exec rm -rf {} +
