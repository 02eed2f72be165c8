# tfxd: `make demo` and `make test` set up everything they need on a fresh machine.
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV    := .venv
PY      := $(VENV)/bin/python
TFXD    := $(VENV)/bin/tfxd
STAMP   := $(VENV)/.tfxd-synced
# uv from PATH, else a private copy installed from PyPI into .tools/
UV      := $(or $(shell command -v uv 2>/dev/null),.tools/bin/uv)
# Python 3.10: on PATH, else under pyenv (TFX 1.16 needs 3.10)
PY310   := $(or $(shell python3.10 -c 'import sys; print(sys.executable)' 2>/dev/null),$(lastword $(sort $(wildcard $(HOME)/.pyenv/versions/3.10*/bin/python3.10))))
DEMO_DIR := build/demo
# pytest-xdist workers for `make test` (tests/conftest.py groups the tests): the suite is mostly one busy
# process at a time, so two workers keep a 2-core machine's cores busy
TEST_WORKERS ?= 2
EXAMPLE_DATA := $(addprefix examples/data/,taxi penguin digits)
# Beam's Flink and Spark job servers (and Spark itself): jars from Maven Central, pinned by engines/*/pom.xml
# and engines/jars.sha256, where tfxd finds them at run time (tfxd/beam_engines.py)
ENGINES := $(VENV)/share/tfxd/engines
# (its name changes when what `make engines` makes does, so that an older install is made again)
ENGINES_STAMP := $(ENGINES)/.installed-jars
# tfxd's own Java for an engine (engines/<name>/src), compiled against its jars into <name>/tfxd-<name>.jar
# (a jar: HotSpot archives the job server's classes only from jars, pipeline/run/class_archive.py)
ENGINES_JAVA := $(shell find engines -name '*.java')
# Kubeflow's own code as judges (conformance/*/: Go modules pinned by go.sum, built here, never in the wheel)
CONFORMANCE := build/conformance
CONFORMANCE_STAMP := $(CONFORMANCE)/.built
# Services the suite starts (services/*/: Go modules pinned by go.sum, built here, never in the wheel): a
# Cloud Storage API server, fake-gcs-server, for the tests of buckets (tests/buckets/)
SERVICES := build/services
SERVICES_STAMP := $(SERVICES)/.built
# The package as the wheel lays it out, in links to this checkout, for static tools (mypy, an editor): they
# cannot follow pyproject's mapping of folders to tfxd.* (tools/typing_tree.py, CONTRIBUTING.md)
TYPING_TREE := build/typing/tfxd

.PHONY: help setup engines conformance services browser demo test lint docs bench examples wheel clean

help:
	@echo "make demo   set up, scaffold the taxi example, validate it and run it end to end"
	@echo "make test   set up, lint and run the test suite"
	@echo "make docs   generate the reference pages and build the documentation into build/site/"
	@echo "make bench  run the benchmarks (bench/)"
	@echo "make wheel  build dist/tfxd-<version>-py3-none-any.whl (for the pipeline image: kubeflow/Dockerfile)"

.tools/bin/uv:
	python3 -m venv .tools
	.tools/bin/pip install --quiet uv

$(STAMP): pyproject.toml uv.lock | $(UV)
	@test -n "$(PY310)" || { echo "Python 3.10 not found: install it (e.g. pyenv install 3.10) and retry" >&2; exit 2; }
	@test -x $(PY) || $(UV) venv --seed --python "$(PY310)" $(VENV)
	UV_COMPILE_BYTECODE=1 $(UV) sync --frozen --python $(PY)
	@touch $@

# byte-compile tfxd itself too, so the CLI starts fast even where PYTHONDONTWRITEBYTECODE is set
setup: $(STAMP) $(TYPING_TREE)
	@$(PY) -m compileall -q tfxd cli pipeline components trainer_module kubeflow

# a new ground-floor module (tfxd/*.py) is one more link; a folder's new modules are there already
$(TYPING_TREE): pyproject.toml tools/typing_tree.py $(wildcard tfxd/*.py) | $(STAMP)
	$(PY) tools/typing_tree.py $(dir $@)

# Maven checks each download against the repository's checksum (-C); the lock pins every jar's sha256 and the
# set itself (a jar more or less fails too). Built aside and moved in whole: never half an engine.
$(ENGINES_STAMP): $(wildcard engines/*/pom.xml) engines/jars.sha256 $(ENGINES_JAVA) | $(STAMP)
	@command -v mvn >/dev/null || { echo "Maven not found: install it (apt-get install maven) and retry" >&2; exit 2; }
	@command -v javac >/dev/null || { echo "javac not found: make engines compiles tfxd's Flink and Spark job servers (engines/*/src); install a JDK 11 or newer (apt-get install openjdk-17-jdk-headless) and retry" >&2; exit 2; }
	rm -rf $(ENGINES).partial
	for engine in $(patsubst engines/%/pom.xml,%,$(wildcard engines/*/pom.xml)); do \
	  mvn -q -B -C -f engines/$$engine/pom.xml dependency:copy-dependencies \
	    -DoutputDirectory=$(abspath $(ENGINES).partial)/$$engine/jars || exit 1; done
	cd $(ENGINES).partial && sha256sum --quiet -c $(CURDIR)/engines/jars.sha256
	cd $(ENGINES).partial && diff <(find . -name '*.jar' | sed 's|^\./||' | sort) <(awk '{print $$2}' $(CURDIR)/engines/jars.sha256 | sort)
	for source in engines/*/src; do engine=$$(basename $$(dirname $$source)); \
	  javac --release 11 -Xlint:all,-path -Werror -cp "$(ENGINES).partial/$$engine/jars/*" \
	    -d $(ENGINES).partial/$$engine/classes $$(find $$source -name '*.java') || exit 1; \
	  jar --create --file $(ENGINES).partial/$$engine/tfxd-$$engine.jar -C $(ENGINES).partial/$$engine/classes . \
	    && rm -r $(ENGINES).partial/$$engine/classes || exit 1; done
	echo "Spark 3.5.6 (Scala 2.12) from Maven Central, for tfxd" > $(ENGINES).partial/spark/RELEASE
	rm -rf $(ENGINES) && mv $(ENGINES).partial $(ENGINES) && touch $@

engines: $(ENGINES_STAMP)

# One Go module (conformance/go.mod), three judges: the Training Operator's (TFJob), Kubeflow Trainer v2's
# with JobSet's and Kubernetes' Job API and Job controller (TrainJob), and the cron parsers of KFP (robfig/cron v1) and, standing in for Vertex's,
# robfig/cron v3; built together, they compile the Kubernetes libraries they share once. The CRDs each reads
# come from the same module versions, and sit beside the programs.
$(CONFORMANCE_STAMP): conformance/go.mod conformance/go.sum $(wildcard conformance/*/*.go conformance/*/*/*.go)
	@command -v go >/dev/null || { echo "Go not found: make test builds Kubeflow's own code to judge tfxd's TFJobs, TrainJobs and schedules; install Go 1.26 or newer (https://go.dev/doc/install, or apt-get install golang-go where it is 1.26) and retry" >&2; exit 2; }
	@rm -rf $(CONFORMANCE).partial && mkdir -p $(CONFORMANCE).partial/crds
	cd conformance && go build -mod=readonly -trimpath -buildvcs=false -o $(abspath $(CONFORMANCE)).partial/ ./training-operator ./trainer ./cron
	cd conformance && install -m 644 "$$(go list -mod=readonly -m -f '{{.Dir}}' github.com/kubeflow/training-operator)/manifests/base/crds/kubeflow.org_tfjobs.yaml" $(abspath $(CONFORMANCE)).partial/
	cd conformance && install -m 644 "$$(go list -mod=readonly -m -f '{{.Dir}}' github.com/kubeflow/trainer/v2)"/manifests/base/crds/trainer.kubeflow.org_*.yaml "$$(go list -mod=readonly -m -f '{{.Dir}}' sigs.k8s.io/jobset)/config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml" $(abspath $(CONFORMANCE)).partial/crds/
	rm -rf $(CONFORMANCE) && mv $(CONFORMANCE).partial $(CONFORMANCE) && touch $@

conformance: $(CONFORMANCE_STAMP)

$(SERVICES_STAMP): services/gcs/go.mod services/gcs/go.sum
	@command -v go >/dev/null || { echo "Go not found: make test builds fake-gcs-server, the Cloud Storage API server the tests of buckets run against; install Go 1.26 or newer and retry" >&2; exit 2; }
	@command -v ip >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && apt-get install -y -q -o DPkg::Lock::Timeout=600 iproute2 >/dev/null; } || { echo "ip (Debian's iproute2) not found: the tests of buckets run their processes in network namespaces of their own; install it (apt-get install iproute2) and retry" >&2; exit 2; }
	@command -v iptables >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && apt-get install -y -q -o DPkg::Lock::Timeout=600 iptables >/dev/null; } || { echo "iptables not found: the tests and bench/faults.py delay and drop a replica's packets with it (a slow, lossy link: bench/link_delay.py); install it (apt-get install iptables) and retry" >&2; exit 2; }
	@rm -rf $(SERVICES).partial && mkdir -p $(SERVICES).partial
	cd services/gcs && go build -mod=readonly -trimpath -buildvcs=false -ldflags=-s -o $(abspath $(SERVICES)).partial/ github.com/fsouza/fake-gcs-server
	rm -rf $(SERVICES) && mv $(SERVICES).partial $(SERVICES) && touch $@

services: $(SERVICES_STAMP)

# a real browser for the pages tfxd writes (tests/pipeline/run/test_retraining.py renders history.html in it)
browser:
	@command -v chromium >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && { apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=600 chromium >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=600 chromium >/dev/null; }; }; } || { echo "chromium not found: the tests look at the pages tfxd writes in a real browser; install it (apt-get install chromium) and retry" >&2; exit 2; }

# one folder per example, moved in whole by `tfxd init --data-only`
$(EXAMPLE_DATA): examples/data/%: | $(STAMP)
	$(TFXD) init examples --example $* --data-only

examples: $(EXAMPLE_DATA)

demo: setup
	rm -rf $(DEMO_DIR)
	$(TFXD) init $(DEMO_DIR) --example taxi
	$(TFXD) validate $(DEMO_DIR)/taxi.yaml
	$(TFXD) run $(DEMO_DIR)/taxi.yaml

# the reference pages are generated from the code (tools/docs_reference.py) and committed; lint fails on
# one the code no longer matches, and on any warning of the site's build (a broken link or anchor)
docs: setup
	$(PY) tools/docs_reference.py
	$(VENV)/bin/mkdocs build

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(PY) tools/docs_reference.py --check
	$(VENV)/bin/mkdocs build --strict

# what the suite needs is made side by side: the Go build (cores), the jars (network), the example data and
# the lint (one core each) overlap, which saves a fresh machine about two minutes
test: setup
	$(MAKE) --no-print-directory -j3 examples engines conformance services browser lint
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder

bench: setup examples engines services
	$(PY) bench/run.py

wheel: | $(UV)
	$(UV) build --wheel --out-dir dist

clean:
	rm -rf build dist $(VENV) .tools examples/data .pytest_cache .ruff_cache
