# The two commands: `make demo` and `make test`. Both set up a fresh machine first.
PY ?= python3
PIP := $(PY) -m pip
# Pinned: any unpinned torch request would pull a CUDA build (see README).
DEPS := torch==2.13.0 pytest==9.0.3 expecttest==0.3.0 numpy
DEPS_STAMP := build/.deps-$(shell echo $(DEPS) | md5sum | cut -c1-8)
PYTEST_ARGS ?=

.PHONY: setup deps build demo test test-opinfo-full clean

setup: build

deps: $(DEPS_STAMP)
$(DEPS_STAMP):
	$(PIP) install --disable-pip-version-check $(DEPS)
	@mkdir -p build && touch $@

# --no-build-isolation: build against the torch installed above, never a fresh one.
build: deps
	$(PIP) install --disable-pip-version-check --no-build-isolation --no-deps .

demo: build
	cd /tmp && $(PY) -m fxcpp.demo

test: build
	cd tests && $(PY) -m pytest -q $(PYTEST_ARGS)

# The OpInfo sweep over every float32 CPU sample (make test runs the first sample of each op).
test-opinfo-full: build
	cd tests && FXCPP_OPINFO_FULL=1 $(PY) -m pytest -q python/test_opinfo_sweep.py

clean:
	rm -rf build dist *.egg-info backend/_C*.so
