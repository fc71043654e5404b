#!/usr/bin/env bash
# test_python.sh HBM SHARED_DATA - the Python package (python/hbm) against this build's
# libhbm.so and hbm tool: pytest on tests/python. Skips (77) without python3's pytest
# (Debian: python3-pytest; scripts/deps.sh installs it). HBM_PYTHON: the interpreter(s) to try;
# by default the project's environment build-py/venv (HBM_VENV; `scripts/deps.sh test` makes
# it, with JAX and libtpu) first, then python3. pytest runs without network (`unshare --net`,
# with the variables that keep libtpu from asking any server, docs/tpu.md); where that is
# not possible HBM_NO_TPU=1 tells the tests that compile for TPU to skip.
set -eu
. "$(dirname "$0")/lib.sh" "$@"
hbm=$HBM shared=$DATA src=$SRC
build=$(cd "$BUILD" && pwd)
lib="$build/libhbm.so"
[ -e "$lib" ] || { echo "FAIL: $lib was not built"; exit 1; }
py=""
venv=${HBM_VENV:-$SRC/build-py/venv}
for c in ${HBM_PYTHON:-$venv/bin/python python3 /usr/bin/python3}; do
  if command -v "$c" >/dev/null && "$c" -c 'import pytest' 2>/dev/null; then py="$c"; break; fi
done
[ -n "$py" ] || skip "no python3 with pytest (Debian: apt-get install python3-pytest)"
# A sanitizer build's library needs its runtime loaded first in python3.
if [ -n "${HBM_SANITIZE:-}" ]; then
  case "$HBM_SANITIZE" in
    *address*)
      rt=$(cc -print-file-name=libasan.so)
      [ -e "$rt" ] || { echo "SKIP: ASan build, and no libasan.so to preload into python3"; exit 77; }
      # libstdc++ too, loaded with it: C++ extensions (jaxlib) throw, and ASan's __cxa_throw
      # interceptor finds no real __cxa_throw when libstdc++ comes later ("CHECK failed:
      # asan_interceptors.cpp ... real___cxa_throw")
      cxx=$(cc -print-file-name=libstdc++.so.6)
      [ -e "$cxx" ] && rt="$rt:$cxx"
      export LD_PRELOAD="$rt${LD_PRELOAD:+:$LD_PRELOAD}"
      # python3 itself keeps memory until exit: leaks are checked by the C tests
      export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" ;;
    *) echo "SKIP: python3 cannot load a $HBM_SANITIZE-instrumented libhbm.so"; exit 77 ;;
  esac
fi
tmp=$T
export HBM_LIBRARY="$lib" HBM_CLI="$hbm" HBM_SOURCE_DIR="$src" HBM_SHARED_DATA="$shared"
export PYTHONPATH="$src/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONDONTWRITEBYTECODE=1
cd "$tmp"
echo "python: $py"
# no test may reach the network: libtpu's metadata lookups fail at once in a private
# network namespace, and these variables keep it from trying (docs/tpu.md)
export TPU_SKIP_MDS_QUERY=1 TPU_WORKER_HOSTNAMES=localhost TPU_WORKER_ID=0 \
  TPU_ACCELERATOR_TYPE=v5litepod-4 ALLOW_MULTIPLE_LIBTPU_LOAD=1 JAX_PLATFORMS=cpu
if unshare --net true 2>/dev/null; then
  # loopback up inside it: Dask's LocalCluster (test_fleet) talks to its workers on 127.0.0.1
  unshare --net sh -c 'ip link set lo up 2>/dev/null || ifconfig lo up 2>/dev/null; exec "$@"' sh \
    "$py" -m pytest -q -rs -p no:cacheprovider "$src/tests/python"
else
  echo "note: no private network namespace (unshare --net needs root or user namespaces): HBM_NO_TPU=1"
  export HBM_NO_TPU=1
  "$py" -m pytest -q -rs -p no:cacheprovider "$src/tests/python"
fi
