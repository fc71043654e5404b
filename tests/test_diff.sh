#!/usr/bin/env bash
# test_diff.sh - hbm diff on two plans (examples/svd_oom.hlo and svd_fixed.hlo) and on a file
# against itself: peaks, the change, contributors whose bytes add up to each side's bytes live
# at its peak, JSON equal to the text, usage errors.
set -u
. "$(dirname "$0")/lib.sh" "$@"
need python3 "to read JSON"
fail=0
check() { local name=$1; shift; if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; fi; }
A=$SRC/examples/svd_oom.hlo B=$SRC/examples/svd_fixed.hlo
out=$("$HBM" diff "$A" "$B"); rc=$?
check "exit 0" test $rc -eq 0
# a module's position is the schedule's step with its instruction, as hbm plan names its peak
pa=$("$HBM" plan --json "$A" | python3 -c 'import json,sys; j=json.load(sys.stdin); print("step %d (%s)" % (j["peak_step"], j["peak_instruction"]))')
pb=$("$HBM" plan --json "$B" | python3 -c 'import json,sys; j=json.load(sys.stdin); print("step %d (%s)" % (j["peak_step"], j["peak_instruction"]))')
check "A's peak" grep -qF "peak in use 335.70GiB at $pa," <<<"$out"
check "B's peak" grep -qF "peak in use 492.26MiB at $pb," <<<"$out"
check "no event numbers for modules" bash -c '! grep -q "event [0-9]" <<<"$1"' _ "$out"
check "fits 100 columns" bash -c '! awk "length > 100" <<<"$1" | grep -q .' _ "$out"
check "the change" grep -q "in use   -335.22GiB (-99.9 %)" <<<"$out"
check "the largest contributor first" grep -Eq "^  -335.22GiB  335.59GiB  377.81MiB  custom-call" <<<"$out"
check "100 columns" test "$(awk 'length($0) > 100' <<<"$out" | wc -l)" -eq 0
"$HBM" diff "$A" "$B" --json >"$T/d.json"
"$HBM" view "$A" --json >"$T/a.json"
"$HBM" view "$B" --json >"$T/b.json"
check "JSON adds up" python3 - "$T/d.json" "$T/a.json" "$T/b.json" <<'PY'
import json, sys
d, a, b = (json.load(open(p)) for p in sys.argv[1:4])
# hbm view of a module is the plan's Memory Viewer: its device peak heap is the diff's peak
pa, pb = (v["memory_spaces"][0]["peak_heap_bytes"] for v in (a, b))
assert d["a"]["peak_bytes_in_use"] == pa and d["b"]["peak_bytes_in_use"] == pb, (d["a"], pa, d["b"], pb)
assert d["delta_bytes_in_use"] == pb - pa
assert d["delta_bytes_reserved"] == d["b"]["peak_bytes_reserved"] - d["a"]["peak_bytes_reserved"]
c = d["contributors"]
assert len(c) == d["contributors_total"] > 0
assert sum(x["a_bytes"] for x in c) == d["a"]["live_at_peak_bytes"] == pa
assert sum(x["b_bytes"] for x in c) == d["b"]["live_at_peak_bytes"] == pb
assert all(x["delta_bytes"] == x["b_bytes"] - x["a_bytes"] for x in c)
assert [abs(x["delta_bytes"]) for x in c] == sorted((abs(x["delta_bytes"]) for x in c), reverse=True)
PY
"$HBM" diff "$A" "$A" --json >"$T/same.json"
check "a file against itself changes nothing" python3 -c '
import json, sys; d = json.load(open(sys.argv[1]))
assert d["delta_bytes_in_use"] == 0 and all(x["delta_bytes"] == 0 for x in d["contributors"])' "$T/same.json"
"$HBM" diff "$A" >/dev/null 2>&1; check "one file is a usage error" test $? -eq 2
"$HBM" diff "$A" "$B" "$A" >/dev/null 2>&1; check "three files are a usage error" test $? -eq 2
"$HBM" diff "$A" "$T/missing" >/dev/null 2>&1; check "a missing file exits 2" test $? -eq 2
"$HBM" diff --help | grep -q "Usage: hbm diff A B"; check "help" test $? -eq 0
exit $fail
