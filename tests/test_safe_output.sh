#!/usr/bin/env bash
# test_safe_output.sh HBM SHARED_DATA - output files are written whole or not at all, and
# every command checks its writes to stdout: under `ulimit -f` an existing file keeps its
# content and no temporary is left; a write to /dev/full is an error (exit 2) with a
# message; with `pack --output -` stdout carries the CSV alone.
set -u
. "$(dirname "$0")/lib.sh" "$@"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok   $*"; }
# a trace of the project's own making: the demo under HBM_TRACE
HBM_TRACE="$T/demo.hbmt" "$HBM" demo >/dev/null 2>&1 || { echo "FAIL: demo"; exit 1; }
[ -s "$T/demo.hbmt" ] || { echo "FAIL: the demo wrote no trace under HBM_TRACE"; exit 1; }
"$HBM" export "$T/demo.hbmt" --format minimalloc -o "$T/demo.csv" || { echo "FAIL: export minimalloc"; exit 1; }

# each writer, run with a 4 KiB file size limit over an existing file: it must fail, keep
# the old content, and leave nothing else in the folder
limited() { # limited NAME OUT CMD...: CMD writes OUT (more than 4 KiB)
  local name=$1 out=$2
  shift 2
  echo "old content" >"$out"
  (ulimit -f 4; "$@") >/dev/null 2>"$T/err"
  local rc=$?
  [ $rc -ne 0 ] || fail "$name: exit 0 under ulimit -f"
  [ "$(cat "$out")" = "old content" ] || fail "$name: the existing file was changed"
  # shellcheck disable=SC2012
  left=$(ls "$(dirname "$out")" | grep -c "^$(basename "$out").tmp" || true)
  [ "$left" -eq 0 ] || fail "$name: $left temporary file(s) left"
  grep -q "$(basename "$out")" "$T/err" || fail "$name: the message does not name the file: $(cat "$T/err")"
  ok "$name under ulimit -f: exit $rc, old file kept"
}
mkdir "$T/o"
limited export-perfetto "$T/o/p.json" "$HBM" export "$T/demo.hbmt" --format perfetto -o "$T/o/p.json"
limited view-html "$T/o/v.html" "$HBM" view "$T/demo.hbmt" --html "$T/o/v.html"
limited pack-output "$T/o/p.csv" "$HBM" pack "$T/demo.csv" --output "$T/o/p.csv"
# and without the limit they write the whole file
"$HBM" export "$T/demo.hbmt" --format perfetto -o "$T/o/p.json" && python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$T/o/p.json" 2>/dev/null &&
  ok "export writes the whole file" || fail "export without a limit"
# a destination that is not a regular file (a FIFO here; /dev/null alike) is written in
# place, never replaced by a renamed regular file
if command -v mkfifo >/dev/null && mkfifo "$T/fifo"; then
  cat "$T/fifo" >"$T/from-fifo" &
  reader=$!
  "$HBM" export "$T/demo.hbmt" --format minimalloc -o "$T/fifo" 2>"$T/err"; rc=$?
  # a FIFO replaced by a file leaves its reader waiting for a writer: end it
  if [ -p "$T/fifo" ]; then wait "$reader"; else kill "$reader" 2>/dev/null; wait "$reader" 2>/dev/null; fi
  if [ $rc -eq 0 ] && [ -p "$T/fifo" ] && cmp -s "$T/from-fifo" "$T/demo.csv"; then ok "export -o FIFO: written in place, still a FIFO"
  else fail "export -o FIFO: exit $rc, fifo $( [ -p "$T/fifo" ] && echo kept || echo replaced), $(cat "$T/err")"; fi
fi

# stdout: /dev/full is an error with a message, for every command
if [ -w /dev/full ]; then
  for cmd in "config" "devices" "--help" "plan ${HBM_SOURCE_DIR:-.}/examples/svd_fixed.hlo" \
    "replay $T/demo.hbmt --allocators bfc" "view $T/demo.hbmt" "pack $T/demo.csv" \
    "export $T/demo.hbmt --format perfetto -o -"; do
    # shellcheck disable=SC2086
    "$HBM" $cmd >/dev/full 2>"$T/err"
    rc=$?
    if [ $rc -eq 2 ] && grep -q "error writing" "$T/err"; then ok "hbm $cmd >/dev/full: exit 2"; else
      fail "hbm $cmd >/dev/full: exit $rc, stderr: $(head -c 300 "$T/err")"; fi
  done
else
  echo "skip /dev/full checks: no writable /dev/full"
fi

# data alone on stdout
"$HBM" pack "$T/demo.csv" --output - >"$T/out.csv" 2>"$T/err" || fail "pack --output - exit $?"
head -1 "$T/out.csv" | grep -q '^id,' || fail "pack --output -: stdout does not start with the CSV header: $(head -1 "$T/out.csv")"
grep -q 'lower bound' "$T/err" || fail "pack --output -: the summary is not on stderr"
! grep -q 'lower bound' "$T/out.csv" || fail "pack --output -: the summary is mixed into the CSV"
ok "pack --output -: CSV alone on stdout"
[ $fails -eq 0 ] || { echo "$fails failures"; exit 1; }
