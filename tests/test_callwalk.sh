#!/bin/bash
# test_callwalk.sh - the replay walk keeps to its floors (issue 40): scripts/callwalk.py
# compiles this build's units again with GCC's -fcallgraph-info and follows every direct
# call from hbm_replay_run_write and from the CLI's cmd_replay. It fails on a call from a
# lower room to a higher one, or a chain of calls crossing more than 6 rooms, and on an
# upward call anywhere in the library (--library). Skips without
# python3, the build's compile_commands.json, or a compiler that writes no call graph.
. "$(dirname "$0")/lib.sh" "$@"
need python3 "to run scripts/callwalk.py"
[ -f "$BUILD/compile_commands.json" ] || skip "no $BUILD/compile_commands.json (CMake writes it at configure)"
python3 "$SRC/scripts/callwalk.py" "$BUILD" --check --max-rooms 6 --library >"$T/out" 2>&1
rc=$?
cat "$T/out"
[ $rc -eq 3 ] && skip "the compiler writes no call graph"
[ $rc -eq 0 ] || fail "callwalk.py --check exited $rc"
for e in hbm_replay_run_write cmd_replay; do
  sed -n "/^entry $e /,/^entry /p" "$T/out" >"$T/$e"
  grep -qE '^  reaches [1-9][0-9]+ functions' "$T/$e" || fail "$e: no calls followed"
  grep -qE '^  walk: [1-6] rooms' "$T/$e" || fail "$e: the walk crosses more than 6 rooms"
  grep -qx '  upward calls: 0' "$T/$e" || fail "$e: an upward call"
done
grep -qx 'the whole library: 0 upward calls (reached from the entries or not)' "$T/out" ||
  fail "an upward call in the library (a lower room calling a higher one)"
echo "ok: the replay walk crosses at most 6 rooms, with no upward call; none in the whole library"
