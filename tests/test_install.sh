#!/usr/bin/env bash
# test_install.sh HBM SHARED_DATA - `make install` works: headers, libraries, hbm.pc, and a
# program built against the installed copy with pkg-config runs.
set -eu
. "$(dirname "$0")/lib.sh" "$@"
build=$BUILD src=$SRC tmp=$T
command -v pkg-config >/dev/null || skip "pkg-config is not installed"
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
for f in bin/hbm include/hbm/hbm.h include/hbm/alloc.h lib/libhbm.a lib/pkgconfig/hbm.pc; do
  [ -e "$tmp/prefix/$f" ] || { echo "FAIL: $f not installed"; exit 1; }
done
ls "$tmp/prefix"/lib/libhbm.so* >/dev/null
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
# a sanitizer build installs an instrumented library: the example must be built the same way
san=""
[ -n "${HBM_SANITIZE:-}" ] && san="-fsanitize=$HBM_SANITIZE"
# shellcheck disable=SC2046,SC2086
cc -std=c11 -Wall -Werror $san "$src/examples/oom_report.c" $(pkg-config --cflags --libs --static hbm) -o "$tmp/oom_report"
# the documented line alone must give a binary that runs: no LD_LIBRARY_PATH
out=$(env -u LD_LIBRARY_PATH "$tmp/oom_report") || { echo "FAIL: the example built with pkg-config does not run"; exit 1; }
grep -q "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 4294967296 bytes." <<<"$out" ||
  { echo "FAIL: the installed example did not report the OOM"; echo "$out"; exit 1; }
grep -q '"num_ooms": 1' <<<"$out" || { echo "FAIL: stats"; echo "$out"; exit 1; }
"$tmp/prefix/bin/hbm" --version | grep -q "hbm 0.1.0"
echo "ok   install + pkg-config + example"
