# hbm - the front door. `make run` builds and runs the demo; `make test` runs every test,
# then the whole suite again under ASan+UBSan, then the thread tests under TSan.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
BUILD ?= build
CMAKE_FLAGS ?=
PREFIX ?= /usr/local

# quiet builds: no "make[2]: Entering directory" lines, no per-file progress or "Built
# target" lines; the build's output goes to DIR/build.log and is shown when it fails
# (V=1 shows everything, commands included)
MAKEFLAGS += --no-print-directory
QUIET := -DCMAKE_RULE_MESSAGES=OFF -DCMAKE_VERBOSE_MAKEFILE=OFF
ifeq ($(V),1)
QUIET := -DCMAKE_RULE_MESSAGES=ON -DCMAKE_VERBOSE_MAKEFILE=ON
compile = cmake --build $(1) -j $(JOBS)
else
compile = echo "building $(1)/ ..." && cmake --build $(1) -j $(JOBS) >$(1)/build.log 2>&1 || \
  { grep -v 'Built target' $(1)/build.log; echo "build failed (whole log: $(1)/build.log)"; exit 1; }
endif

.PHONY: all build run test test-fast test-asan test-tsan bench zoo install deps deps-test clean fuzz fuzz-long

all: build

# building needs a C compiler, make and CMake; the tests may use more (see scripts/deps.sh)
deps:
	@./scripts/deps.sh build

deps-test:
	@./scripts/deps.sh test

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHBM_WERROR=ON $(QUIET) $(CMAKE_FLAGS) >/dev/null
	@$(call compile,$(BUILD))

run: build
	./$(BUILD)/hbm demo

# The README's test command.
test: test-fast test-asan test-tsan
	@echo "all test passes green"

test-fast: deps-test build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-asan: deps deps-test
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DHBM_WERROR=ON $(QUIET) \
	  -DHBM_SANITIZE=address,undefined $(CMAKE_FLAGS) >/dev/null
	@$(call compile,build-asan)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  HBM_FUZZ_ITERS=5000 ctest --output-on-failure -j $(JOBS)

test-tsan: deps deps-test
	@cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHBM_WERROR=ON $(QUIET) \
	  -DHBM_SANITIZE=thread $(CMAKE_FLAGS) >/dev/null
	@$(call compile,build-tsan)
	cd build-tsan && ctest --output-on-failure -L threads -j $(JOBS)

bench: build
	@for b in $(BUILD)/bench_*; do echo "== $$b"; $$b || exit 1; done

# the whole zoo: real JAX programs compiled by XLA:TPU (v4, v5e, v5p, v6e, deviceless) and
# XLA:CPU (scripts/xla_zoo.py, into $(BUILD)/zoo, reused while the script and the pinned
# versions stay), then hbm plan against XLA's figures on each (scripts/zoo_check.py):
# the counts, the misses, the speed. Needs the test tier's venv (scripts/deps.sh test).
ZOO_OUT ?= $(BUILD)/zoo
zoo: build deps-test
	@[ -x build-py/venv/bin/python ] || { echo "make zoo: no build-py/venv (scripts/deps.sh test could not make it)"; exit 1; }
	nice build-py/venv/bin/python scripts/xla_zoo.py --reuse --out $(ZOO_OUT) --jobs $(JOBS)
	build-py/venv/bin/python scripts/zoo_check.py $(ZOO_OUT) --hbm $(BUILD)/hbm \
	  --known tests/zoo_known_misses.txt --jobs $(JOBS) --json $(ZOO_OUT)/check.json --quiet-known

fuzz:
	@cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DHBM_FUZZ=ON -DBUILD_TESTING=OFF \
	  -DHBM_SANITIZE=address,undefined $(QUIET) >/dev/null
	@$(call compile,build-fuzz)
	@echo "fuzzers in build-fuzz/: run e.g. mkdir -p /tmp/corpus && build-fuzz/fuzz_config /tmp/corpus fuzz/corpus/fuzz_config"

# the long tier: every fuzzer FUZZ_SECONDS (30 min) from fuzz/corpus and ../shared/data seeds
FUZZ_SECONDS ?= 1800
fuzz-long: fuzz
	@./scripts/fuzz_long.sh $(FUZZ_SECONDS)

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf build build-asan build-tsan build-fuzz
