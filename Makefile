# Shoal top-level commands. `make demo` and `make test` work on a fresh Debian 12 machine.
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
SHARED ?= $(abspath ../shared)
MODEL ?=
PROMPT ?= Once upon a time
SHOAL = $(BUILD)/bin/shoal

.PHONY: all deps configure build test test-asan chaos demo plots clean format

all: build

deps:
	@scripts/install_deps.sh

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DSHOAL_SHARED_DIR=$(SHARED) $(CMAKE_FLAGS)

configure: deps $(BUILD)/build.ninja

build: configure
	ninja -C $(BUILD) -j$(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)
	$(MAKE) test-asan

# The GGUF reader (corrupt-file corpus), tokenizer and kernels again under ASan + UBSan.
test-asan: deps
	cmake -S . -B $(BUILD)-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DSHOAL_SANITIZE=ON \
	  -DSHOAL_SHARED_DIR=$(SHARED) $(CMAKE_FLAGS)
	ninja -C $(BUILD)-asan -j$(JOBS) gguf_test
	cd $(BUILD)-asan && ctest --output-on-failure -R '^gguf_test$$'

# Randomized failover trials against a local cluster (tests/chaos_test.sh, docs/CLUSTER.md); as
# root with nftables its nodes sit in network namespaces and partitions and loss join the mix.
CHAOS_TRIALS ?= 100
chaos: build
	tests/chaos_test.sh $(SHOAL) $(CHAOS_TRIALS)

demo: build
	@scripts/demo.sh "$(SHOAL)" "$(MODEL)" "$(SHARED)" "$(PROMPT)"

# docs/plots/*.svg from `shoal plan` and `shoal sim` (docs/SCALE.md; ~2 minutes on 2 cores).
plots: build
	@scripts/install_deps.sh gnuplot-nox
	docs/plots/make_plots.sh $(SHOAL)

clean:
	rm -rf $(BUILD) $(BUILD)-asan

format:
	find src tests -name '*.h' -o -name '*.cc' | xargs clang-format -i
