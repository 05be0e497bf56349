# Shoal top-level commands. `make demo` and `make test` work on a fresh Debian 12 machine.
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
SHARED ?= $(abspath ../shared)
MODEL ?=
PROMPT ?= Once upon a time
SHOAL = $(BUILD)/bin/shoal

.PHONY: all deps configure build test test-asan test-fuzz chaos demo plots clean format

all: build

deps:
	@tools/install_deps.sh

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DSHOAL_SHARED_DIR=$(SHARED) $(CMAKE_FLAGS)

configure: deps $(BUILD)/build.ninja

build: configure
	ninja -C $(BUILD) -j$(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)
	$(MAKE) test-asan
	$(MAKE) test-fuzz

# The GGUF reader (corrupt-file corpus), tokenizer and kernels again under ASan + UBSan.
test-asan: deps
	cmake -S . -B $(BUILD)-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DSHOAL_SANITIZE=ON \
	  -DSHOAL_SHARED_DIR=$(SHARED) $(CMAKE_FLAGS)
	ninja -C $(BUILD)-asan -j$(JOBS) gguf_test
	cd $(BUILD)-asan && ctest --output-on-failure -R '^gguf_test$$'

# The libFuzzer targets (GGUF reader, cluster frames, HTTP request path) in a separate clang
# build, each for FUZZ_SECONDS over a copy of its seed corpus (the tree is not written to);
# a crash, leak or hang fails make (inputs land in $(FUZZ_BUILD)/crashes). ~3.5 min on 2 cores
# with the build. Skipped, saying why, where clang cannot link -fsanitize=fuzzer.
FUZZ_BUILD ?= $(BUILD)-fuzz
FUZZ_SECONDS ?= 30
FUZZ_FLAGS = -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
test-fuzz: deps
	@if ! echo 'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long) { return 0; }' \
	    | clang++ -x c++ -fsanitize=fuzzer,address -o /dev/null - >/dev/null 2>&1; then \
	  echo "test-fuzz: skipped: clang++ cannot link -fsanitize=fuzzer (needs clang libclang-rt-14-dev)"; \
	  exit 0; \
	fi; \
	set -e; \
	cmake -S . -B $(FUZZ_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=clang \
	  -DCMAKE_CXX_COMPILER=clang++ -DSHOAL_SHARED_DIR=$(SHARED) $(CMAKE_FLAGS) >/dev/null; \
	ninja -C $(FUZZ_BUILD) -j$(JOBS) gguf_fuzz frame_fuzz http_fuzz; \
	c=$(FUZZ_BUILD)/corpus; rm -rf $$c $(FUZZ_BUILD)/crashes; \
	mkdir -p $$c/gguf $$c/frame $$c/http $(FUZZ_BUILD)/crashes; \
	cp src/net/testdata/malformed/*.bin src/net/testdata/valid/*.bin $$c/frame/; \
	cp src/server/testdata/http_corpus/* $$c/http/; \
	printf 'GGUF\003\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0' > $$c/gguf/empty_v3.gguf; \
	for m in qwen3-q4_0 llama-q4_0; do \
	  f=$(SHARED)/models/tiny/$$m.gguf; if [ -f $$f ]; then head -c 65536 $$f > $$c/gguf/$$m.gguf; fi; \
	done; \
	run() { n=$$1; shift; \
	  $(FUZZ_BUILD)/bin/$$n $(FUZZ_FLAGS) -artifact_prefix=$(FUZZ_BUILD)/crashes/$$n- "$$@" \
	    > $(FUZZ_BUILD)/$$n.log 2>&1; }; \
	r=0; \
	run gguf_fuzz -max_len=65536 $$c/gguf & g=$$!; \
	run frame_fuzz -max_len=4096 $$c/frame & f=$$!; \
	wait $$g || r=1; wait $$f || r=1; \
	run http_fuzz -max_len=4096 $$c/http || r=1; \
	for n in gguf_fuzz frame_fuzz http_fuzz; do \
	  echo "$$n: $$(grep -E '^stat::(number_of_executed_units|average_exec_per_sec)' \
	    $(FUZZ_BUILD)/$$n.log | tr '\n' ' ')"; \
	done; \
	if [ $$r -ne 0 ]; then \
	  echo "test-fuzz: FAILED; see $(FUZZ_BUILD)/*_fuzz.log and $(FUZZ_BUILD)/crashes/" >&2; \
	  exit 1; \
	fi

# Randomized failover trials against a local cluster (tests/chaos_test.sh, docs/CLUSTER.md); as
# root with nftables its nodes sit in network namespaces and partitions and loss join the mix.
CHAOS_TRIALS ?= 100
chaos: build
	tests/chaos_test.sh $(SHOAL) $(CHAOS_TRIALS)

demo: build
	@tools/demo.sh "$(SHOAL)" "$(MODEL)" "$(SHARED)" "$(PROMPT)"

# docs/plots/*.svg from `shoal plan` and `shoal sim` (docs/SCALE.md; ~2 minutes on 2 cores).
plots: build
	@tools/install_deps.sh gnuplot-nox
	tools/plots/make_plots.sh $(SHOAL)

clean:
	rm -rf $(BUILD) $(BUILD)-asan $(BUILD)-fuzz

format:
	find src tests -name '*.h' -o -name '*.cc' | xargs clang-format -i
