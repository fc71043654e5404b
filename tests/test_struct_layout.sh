#!/bin/bash
# test_struct_layout.sh - the structs the Python package mirrors by hand (python/hbm,
# ctypes) have C's size and field offsets (tests/struct_layout.py compiles a program that
# prints C's sizeof and offsetof; issue 40 item 4).
. "$(dirname "$0")/lib.sh" "$@"
need python3 "to read the Python package's ctypes structs"
need "${CC:-cc}" "to compile the program that prints C's layout"
out=$(env -u HBM_LIBRARY python3 "$SRC/tests/struct_layout.py" "$SRC" "${CC:-cc}" 2>&1) || fail "layouts differ:
$out"
echo "$out"
n=$(grep -c ' bytes, ' <<<"$out")
[ "$n" -ge 4 ] || fail "expected the 4 mirrored structs (hbm_plan_options, hbm_plan_target, hbm_fit_options, hbm_fleet_options), found $n"
echo "ok: $n structs, C and Python agree"
# A public struct shows no private state: hbm's own fields sit behind one opaque pointer
# (priv_); a trailing underscore is left only to padding (pad_, reserved_).
priv=$(grep -nE '^[[:space:]]+[^/*#(]*[A-Za-z0-9]_[[:space:]]*(;|,|\[)' "$SRC"/include/hbm/*.h |
       grep -vE '[^A-Za-z0-9_](priv_|pad_|reserved_)[[:space:]]*(;|\[)' || true)
[ -z "$priv" ] || fail "public struct fields named as private (move them behind priv_):
$priv"
echo "ok: no private-named fields in include/hbm beyond priv_, pad_, reserved_"
