# The README's two commands: `make demo` and `make test`. Both build .venv from the lock file.
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test install lint clean rehearsal mutate

install: $(STAMP)

# requirements.lock pins every package to one wheel (CPython 3.11, manylinux x86_64) and its
# sha256; pip refuses any file whose hash differs. The trainer image is built from the same lines
# (nix/lock_to_nix.py). The project itself goes in editable without resolving anything else.
# A new .venv is about 5.8 GiB installed (torch's CUDA wheels), and pip unpacks each wheel before
# installing it: VENV_FREE_GB asks for that much free first, so a full disk says so at once.
VENV_FREE_GB ?= 8
$(STAMP): requirements.lock pyproject.toml
	test -x $(PY) || { scripts/free-space.sh $(VENV) $(VENV_FREE_GB) "a new $(VENV)" && \
		python3 -m venv $(VENV); }
	$(PY) -m pip install -q --require-hashes -r requirements.lock
	$(PY) -m pip install -q --no-deps -e .
	touch $@

demo: install
	$(VENV)/bin/hearsay demo --out demo_out

lint: install
	$(VENV)/bin/ruff check src tests scripts nix container
	@scripts=$$(find runner scripts container -name '*.sh' 2>/dev/null); \
	if [ -n "$$scripts" ]; then $(VENV)/bin/shellcheck -x $$scripts; fi
	@# the bats suites, errors only: SC2314, a bare `! cmd` that is not a test's last command, never
	@# fails the test (use `run !` or `[ ... ]`); their warnings are the harness's shared globals
	$(VENV)/bin/shellcheck --shell=bats --severity=error tests/runner/*.bats

# The runner's bats tests mostly wait on polls and deadlines, so they run BATS_JOBS at a time when
# GNU parallel is there (each test has its own temp world: fake API, store, boxes), one at a time
# otherwise. --durations / --timing print the slowest tests: where the time goes.
BATS_JOBS ?= 2
test: install lint
	scripts/system-deps.sh
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) -m pytest -q --durations=15
	@if [ -d tests/runner ] && ls tests/runner/*.bats >/dev/null 2>&1; then \
		jobs=""; if command -v parallel >/dev/null; then jobs="--jobs $(BATS_JOBS)"; fi; \
		echo "bats --timing $$jobs tests/runner"; \
		PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(VENV)/bin/bats --timing $$jobs tests/runner; fi

# The whole campaign on this machine: the real runner, boxes running the real entry.sh and trainer,
# only vast.ai (tests/fakes/fake_vast.py) and ssh stood in for. Work dir: $(REHEARSAL_DIR).
REHEARSAL_DIR ?= rehearsal_out
rehearsal: install
	rm -rf $(REHEARSAL_DIR)
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" scripts/rehearsal.sh $(REHEARSAL_DIR)

# Mutation testing of the modules that hold the campaign's rules (pyproject.toml [tool.mutmut]:
# which modules, which tests). A development habit, never part of `make test`: mutmut and its
# few extra packages come from requirements-dev.lock (hashed) into $(MUTATE_VENV) on first use.
# MUTANTS narrows the run (mutmut's name globs), e.g. `make mutate MUTANTS='hearsay.evaluate.gate.*'`;
# the score per module is printed at the end (scripts/mutation_score.py), survivors with
# `$(MUTATE_VENV)/bin/mutmut results` and `... show NAME`. Work and results: mutants/.
MUTANTS ?= hearsay.contracts.* hearsay.evaluate.gate.* hearsay.bundle.select.* hearsay.metrics.* \
	hearsay.evaluate.compare.* hearsay.evaluate.readouts.* hearsay.evaluate.pilot.* hearsay.deploy.inputs.* \
	hearsay.bundle.codec_pass.* hearsay.train.selection.* hearsay.train.config.* hearsay.train.steplog.* \
	hearsay.evaluate.corpus_decision.* hearsay.evaluate.report_stats.* hearsay.metrics.calibration.* \
	hearsay.deploy.api.*
MUTATE_JOBS ?= 2
# OMP_NUM_THREADS=1: mutmut forks each mutant's test run from a process that has already run
# torch; a forked child that starts OpenMP threads again hangs until mutmut's CPU limit ends it,
# and a hung survivor is counted "timeout", i.e. killed (seen on the readouts' scoring tests).
# mutmut lives in a venv of its own that sees $(VENV)'s packages through a .pth file: $(VENV)
# stays exactly the lock (the box's version gate, which the rehearsal runs, refuses any package
# the lock does not pin).
MUTATE_VENV ?= .venv-mutate
MUTATE_PY := $(MUTATE_VENV)/bin/python
mutate: install
	test -x $(MUTATE_PY) || python3 -m venv $(MUTATE_VENV)
	$(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' > \
		"$$($(MUTATE_PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/hearsay-venv.pth"
	$(MUTATE_VENV)/bin/mutmut --version >/dev/null 2>&1 || \
		$(MUTATE_PY) -m pip install -q --require-hashes --no-deps -r requirements-dev.lock
	OMP_NUM_THREADS=1 PATH="$(CURDIR)/$(MUTATE_VENV)/bin:$(CURDIR)/$(VENV)/bin:$$PATH" $(MUTATE_VENV)/bin/mutmut run \
		--max-children $(MUTATE_JOBS) $(foreach m,$(MUTANTS),'$(m)')
	$(MUTATE_PY) scripts/mutation_score.py

clean:
	rm -rf demo_out rehearsal_out .pytest_cache .ruff_cache mutants .venv-mutate
