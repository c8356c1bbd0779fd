# The two commands: `make demo` and `make test`. Both set up a fresh machine first.
PY ?= python3
PIP := $(PY) -m pip
# Pinned: any unpinned torch request would pull a CUDA build (see README).
# oneDNN: the CPU-only GNU-OpenMP build, so it shares torch's libgomp (one thread pool); -devel has headers + CMake config.
# transformers (no torch requirement of its own): the decoding test builds GPT-2 and LLaMA from configs.
# ONNX Runtime (with onnx + onnxscript, torch.onnx's dynamo exporter) and OpenVINO: the harness's
# serving peers (benchmarks/peers.py), tested on the tiny model.
DEPS := torch==2.13.0 pytest==9.0.3 expecttest==0.3.0 numpy tqdm==4.70.1 matplotlib==3.11.2 \
        onednn-cpu-gomp==2023.2.0 onednn-devel-cpu-gomp==2023.2.0 transformers==5.23.0 \
        onnxruntime==1.32.0 onnx==1.23.2 onnxscript==0.7.2 openvino==2026.4.1
# The benchmark suite builds models from transformers configs (no weights); transformers does not require torch.
BENCH_DEPS := transformers==5.23.0
DEPS_STAMP := build/.deps-$(shell echo $(DEPS) | md5sum | cut -c1-8)
BENCH_STAMP := build/.bench-deps-$(shell echo $(BENCH_DEPS) | md5sum | cut -c1-8)
BENCH_ARGS ?=
PYTEST_ARGS ?=

.PHONY: setup deps build demo test test-asan test-opinfo-full fuzz bench bench-quick micro clean

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

# The C++ core built with AddressSanitizer + UBSan into build-asan/ (the installed fxcpp is left
# alone), staged beside backend/'s Python, and run on the C++ pass tests, the runtime tests and a
# fuzz slice. Python and torch are not instrumented, so ASan's runtime is preloaded; leak
# checking is off (the interpreter frees little at exit). README, "Reliability".
ASAN_TESTS ?= cpp python/test_runtime.py python/test_hostile_inputs.py python/test_cpu_fused.py \
              python/test_onednn_weights.py python/test_fuzz_slice.py
test-asan: deps
	FXCPP_SANITIZE=1 FXCPP_BUILD_DIR=build-asan/cmake $(PY) setup.py -q build_ext --build-lib build-asan/lib
	cp backend/*.py build-asan/lib/fxcpp/
	cd tests && PYTHONPATH=$(CURDIR)/build-asan/lib \
	  LD_PRELOAD="$$($(CXX) -print-file-name=libasan.so) $$($(CXX) -print-file-name=libubsan.so)" \
	  ASAN_OPTIONS=detect_leaks=0:alloc_dealloc_mismatch=0:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  FXCPP_EXPECT_SANITIZED=1 $(PY) -m pytest -q -p no:cacheprovider $(ASAN_TESTS) $(PYTEST_ARGS)

# The OpInfo sweep over every fp32, bf16 and fp16 CPU sample (make test runs the first sample of each op in each dtype).
test-opinfo-full: build
	cd tests && FXCPP_OPINFO_FULL=1 $(PY) -m pytest -q python/test_opinfo_sweep.py

# The random-program fuzzer (tests/fuzz/README.md): N programs from seed SEED; failures are
# shrunk into tests/fuzz/repros/. make test runs seeds 0..299.
N ?= 1000
SEED ?= 0
fuzz: build
	$(PY) tests/fuzz/fuzz.py --n $(N) --seed $(SEED)

$(BENCH_STAMP): $(DEPS_STAMP)
	$(PIP) install --disable-pip-version-check $(BENCH_DEPS)
	@touch $@

# The whole suite: every model at both batches, fp32 and bf16, eager / inductor / inductor+freezing / fxcpp.
bench: build $(BENCH_STAMP)
	$(PY) -m benchmarks.harness --out benchmarks/results/latest $(BENCH_ARGS)

# A small subset (MLP, ResNet-20, the LayerNorm+GELU probe; fp32) in under 5 minutes.
bench-quick: build $(BENCH_STAMP)
	$(PY) -m benchmarks.harness --quick --dtypes fp32 --out benchmarks/results/quick $(BENCH_ARGS)

# Physical limits: FMA peak, GEMM % of peak, STREAM triad, memory-bound kernels, host overhead.
micro: build
	$(PY) -m benchmarks.micro.run --out benchmarks/results/latest

clean:
	rm -rf build dist *.egg-info backend/_C*.so
