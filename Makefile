# The two README commands: `make demo` and `make test`. Both build .venv first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: venv demo lint test test-py314 fuzz bench-latency bench-concurrency bench-recall clean

$(VENV)/.installed: requirements-test.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -r requirements-test.txt
	touch $@

venv: $(VENV)/.installed

demo: venv
	$(PY) scripts/demo.py

# mypy needs the plugin under its package name; the checkout's folder may be named anything. The link
# lives in a folder of this checkout's own under /tmp: not in .venv, which worktrees may share, and not
# inside the checkout, which tests copy whole.
TYPECHECK := /tmp/phr-typecheck$(subst /,-,$(CURDIR))
lint: venv
	$(PY) -m ruff check .
	rm -rf $(TYPECHECK)/pkg && mkdir -p $(TYPECHECK)/pkg && ln -s "$(CURDIR)" $(TYPECHECK)/pkg/project_history_recall
	cd $(TYPECHECK)/pkg && "$(CURDIR)/$(PY)" -m mypy --config-file "$(CURDIR)/pyproject.toml" --no-error-summary \
		--cache-dir $(TYPECHECK)/mypy-cache project_history_recall/*.py

test: venv lint
	$(PY) -m pytest -q

# The whole suite on Python 3.14 and its SQLite, in a Debian root of their own (root and the registries needed; see the script).
test-py314:
	scripts/test-python314.sh

# The property and fuzz tests with twenty times the examples make test gives them (tests/conftest.py).
fuzz: venv
	PHR_HYPOTHESIS=thorough $(PY) -m pytest -q $(shell grep -l '@given' tests/*.py)

bench-latency: venv
	$(PY) bench/keyword_latency.py

bench-concurrency: venv
	$(PY) bench/concurrency.py

# The dev sets are not shipped: pass their folders, e.g. make bench-recall SETS="path/beam-100k path/mem-gallery bench/data/devchats"
SETS ?= bench/data/devchats
bench-recall: venv
	$(PY) bench/recall.py $(SETS)

clean:
	rm -rf $(VENV)
