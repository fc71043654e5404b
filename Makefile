# hbm - the front door. `make run` builds and runs the demo; `make test` runs every test,
# then the whole suite again under ASan+UBSan, then the thread tests under TSan.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
BUILD ?= build
CMAKE_FLAGS ?=
PREFIX ?= /usr/local

.PHONY: all build run test test-fast test-asan test-tsan bench install deps clean fuzz

all: build

deps:
	@./scripts/deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHBM_WERROR=ON $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

run: build
	./$(BUILD)/hbm demo

# The README's test command.
test: test-fast test-asan test-tsan
	@echo "all test passes green"

test-fast: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-asan: deps
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DHBM_WERROR=ON \
	  -DHBM_SANITIZE=address,undefined $(CMAKE_FLAGS) >/dev/null
	@cmake --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  HBM_FUZZ_ITERS=5000 ctest --output-on-failure -j $(JOBS)

test-tsan: deps
	@cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHBM_WERROR=ON \
	  -DHBM_SANITIZE=thread $(CMAKE_FLAGS) >/dev/null
	@cmake --build build-tsan -j $(JOBS)
	cd build-tsan && ctest --output-on-failure -L threads -j $(JOBS)

bench: build
	@for b in $(BUILD)/bench_*; do echo "== $$b"; $$b || exit 1; done

fuzz:
	@cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DHBM_FUZZ=ON -DBUILD_TESTING=OFF \
	  -DHBM_SANITIZE=address,undefined >/dev/null
	@cmake --build build-fuzz -j $(JOBS)
	@echo "fuzzers in build-fuzz/: run e.g. mkdir -p /tmp/corpus && build-fuzz/fuzz_config /tmp/corpus fuzz/corpus/fuzz_config"

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf build build-asan build-tsan build-fuzz
