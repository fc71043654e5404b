#!/usr/bin/env bash
# test_run.sh HBM SHARED_DATA - hbm run over a program that calls the fake CUDA driver
# through dlsym and cuGetProcAddress, as runtimes do.
set -u
hbm="$1"
fails=0
[ -n "${HBM_FAKE_CUDA:-}" ] && [ -f "$HBM_FAKE_CUDA" ] && [ -x "${HBM_FAKE_APP:-}" ] ||
  { echo "SKIP: the fake CUDA driver or fake_app is not built (HBM_FAKE_CUDA, HBM_FAKE_APP)"; exit 77; }
export HBM_CUDA_DRIVER="$HBM_FAKE_CUDA"
pre="$(dirname "$hbm")/libhbm_preload.so"
if ldd "$pre" 2>/dev/null | grep -qE 'lib(asan|tsan|ubsan)'; then
  # A sanitizer runtime must be first in the link order; an LD_PRELOAD library that
  # interposes dlsym comes before it and the sanitizer crashes at start-up.
  echo "SKIP: libhbm_preload.so is built with sanitizers; hbm run is tested in the plain build"; exit 77
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; [ -n "${2:-}" ] && echo "$2"; fails=$((fails+1)); }

# 1. a limit that refuses the big allocation, with a trace
out=$("$hbm" run --trace "$tmp/t.csv" --limit 16MiB -- "$HBM_FAKE_APP" 67108864 2>&1); rc=$?
[ "$rc" = 0 ] && ok "limit: exit 0" || bad "limit: exit $rc" "$out"
grep -q "fake_app: big alloc rc=2" <<<"$out" && ok "limit: refused with CUDA_ERROR_OUT_OF_MEMORY" || bad "limit: rc" "$out"
grep -q "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 67108864 bytes." <<<"$out" && ok "limit: OOM report" || bad "limit: report" "$out"
grep -q "op=cuMemAllocFromPoolAsync" <<<"$out" && ok "limit: report lists live buffers by API" || bad "limit: live" "$out"
grep -q "hbm run: 3 allocations, 3 frees, peak 6.00 MiB in use (6291456 bytes)" <<<"$out" && ok "limit: summary" || bad "limit: summary" "$out"
head -2 "$tmp/t.csv" | tail -1 | grep -qx "time_ns,action,addr,size,stream,api" && ok "trace: header" || bad "trace: header" "$(cat "$tmp/t.csv")"
[ "$(grep -c ',alloc,' "$tmp/t.csv")" = 3 ] && [ "$(grep -c ',free,' "$tmp/t.csv")" = 3 ] &&
  [ "$(grep -c ',oom,0x0,67108864,' "$tmp/t.csv")" = 1 ] && ok "trace: 3 allocs, 3 frees, 1 oom" || bad "trace: events" "$(cat "$tmp/t.csv")"
grep -q ',alloc,0x[0-9a-f]*,3145728,0x51,cuMemAllocFromPoolAsync$' "$tmp/t.csv" && ok "trace: pool alloc on its stream" || bad "trace: stream" "$(cat "$tmp/t.csv")"
grep -q ',free,0x[0-9a-f]*,2097152,0x0,cuMemFree_v2$' "$tmp/t.csv" && ok "trace: free via dlsym" || bad "trace: dlsym free" "$(cat "$tmp/t.csv")"

# 2. no limit: everything goes through; quiet: no summary
out=$("$hbm" run --quiet -- "$HBM_FAKE_APP" 67108864 2>&1); rc=$?
[ "$rc" = 0 ] && grep -q "big alloc rc=0" <<<"$out" && ! grep -q "hbm run:" <<<"$out" && ok "no limit, quiet" || bad "no limit" "$out"

# 3. errors
out=$("$hbm" run 2>&1); [ $? = 2 ] && grep -q "no command" <<<"$out" && ok "usage: no command" || bad "usage" "$out"
out=$("$hbm" run --limit lots -- true 2>&1); [ $? = 2 ] && grep -q "\-\-limit lots is not a size" <<<"$out" && ok "usage: bad limit" || bad "bad limit" "$out"
out=$("$hbm" run -- /nonexistent/prog 2>&1); [ $? = 127 ] && grep -q "cannot run '/nonexistent/prog'" <<<"$out" && ok "exec failure: 127" || bad "exec" "$out"
out=$("$hbm" run -- sh -c 'exit 3' 2>&1); [ $? = 3 ] && ok "exit status passed through" || bad "status" "$out"
out=$("$hbm" run --help); grep -q "Usage: hbm run" <<<"$out" && ok "help" || bad "help" "$out"
[ "$fails" = 0 ] || { echo "$fails failures"; exit 1; }
