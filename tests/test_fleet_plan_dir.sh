#!/usr/bin/env bash
# test_fleet_plan_dir.sh - hbm plan DUMPDIR, the multi-module program: every module of a dump
# folder with its need, equal to hbm plan FILE --json's peak_bytes, the largest named; an XLA
# dump's *after_optimizations.txt only when it has them; on 1 and 2 threads the same; a module
# that cannot be parsed named (exit 2), one that does not fit the device exit 1.
set -u
. "$(dirname "$0")/lib.sh" "$@"
need python3 "to compare the JSON"
mkdir "$T/d"
cp "$SRC/examples/svd_oom.hlo" "$T/d/module_0001.jit_svd.after_optimizations.txt"
cp "$SRC/examples/svd_fixed.hlo" "$T/d/module_0002.jit_svd.after_optimizations.txt"
cp "$SRC/examples/svd_fixed.hlo" "$T/d/module_0001.jit_svd.before_optimizations.txt"
printf 'not HLO\n' >"$T/d/module_0001.jit_svd.after_optimizations-buffer-assignment.txt"
"$HBM" plan "$T/d" --json >"$T/d.json" || fail "plan of a dump folder"
python3 - "$T/d.json" "$HBM" "$T/d" <<'PY' || fail "dump folder modules"
import json, subprocess, sys
d = json.load(open(sys.argv[1]))
files = sorted(m["file"] for m in d["modules"])
assert files == ["module_0001.jit_svd.after_optimizations.txt", "module_0002.jit_svd.after_optimizations.txt"], files
for m in d["modules"]:
    p = json.loads(subprocess.run([sys.argv[2], "plan", sys.argv[3] + "/" + m["file"], "--json"], capture_output=True,
                                  text=True).stdout)
    assert m["need_bytes"] == p["peak_bytes"] and m["temp_size_in_bytes"] == p["temp_size_in_bytes"], (m, p["peak_bytes"])
assert d["largest"] == max(d["modules"], key=lambda m: m["need_bytes"])["file"]
PY
"$HBM" plan "$T/d" --device v100-16gb >"$T/v.txt"; rc=$?
[ $rc -eq 1 ] || fail "svd_oom does not fit a V100-16GB: exit $rc"
grep -q "1 of 2 modules do not fit V100-16GB" "$T/v.txt" || fail "verdict: $(cat "$T/v.txt")"
printf 'HloModule broken\n\nENTRY e {\n  p = f32[4 parameter(0)\n}\n' >"$T/d/module_0003.jit_bad.after_optimizations.txt"
"$HBM" plan "$T/d" >"$T/b.txt" 2>"$T/b.err"; rc=$?
[ $rc -eq 2 ] || fail "a broken module: exit $rc"
grep -q "module_0003.jit_bad" "$T/b.txt" && grep -q "largest: module_0001" "$T/b.txt" || fail "broken module: $(cat "$T/b.txt")"
# the shared XLA dumps (1,454 modules): sampled against hbm plan FILE, 1 and 2 threads alike
if [ -n "$DATA" ] && [ -d "$DATA/hlo/xladumps" ]; then
    "$HBM" plan "$DATA/hlo/xladumps" --json -j 2 >"$T/x2.json" || fail "xladumps"
    "$HBM" plan "$DATA/hlo/xladumps" --json -j 1 >"$T/x1.json" || fail "xladumps, 1 thread"
    cmp -s "$T/x1.json" "$T/x2.json" || fail "1 and 2 threads differ"
    python3 - "$T/x2.json" "$HBM" "$DATA/hlo/xladumps" <<'PY' || fail "xladumps sampled"
import json, subprocess, sys
d = json.load(open(sys.argv[1]))
mods = d["modules"]
assert d["failed"] == 0 and len(mods) == d["modules_total"] > 1000, (d["failed"], len(mods))
assert d["largest"] == mods[0]["file"] and all(a["need_bytes"] >= b["need_bytes"] for a, b in zip(mods, mods[1:]))
for m in mods[::97] + [mods[0]]:
    p = json.loads(subprocess.run([sys.argv[2], "plan", sys.argv[3] + "/" + m["file"], "--json"], capture_output=True,
                                  text=True).stdout)
    assert (m["need_bytes"], m["argument_size_in_bytes"], m["output_size_in_bytes"], m["temp_size_in_bytes"]) == (
        p["peak_bytes"], p["argument_size_in_bytes"], p["output_size_in_bytes"], p["temp_size_in_bytes"]), m["file"]
print("modules:", len(mods), "largest:", d["largest"], d["largest_need_bytes"])
PY
else
    echo "SKIP (part): no shared data at ${DATA:-(none)}/hlo/xladumps"
fi
echo "ok"
