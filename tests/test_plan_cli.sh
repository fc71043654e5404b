#!/bin/bash
# test_plan_cli.sh - the `hbm plan` and `hbm devices` commands end to end.
# usage: bash test_plan_cli.sh <path-to-hbm> <shared-data-dir>
set -u
. "$(dirname "$0")/lib.sh" "$@"
fail=0
check() { # name, condition command...
    local name=$1; shift
    if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; fi
}
out=$("$HBM" plan "$SRC/examples/svd_oom.hlo" --device V100-16GB); rc=$?
check "svd_oom does not fit: exit 1" test $rc -eq 1
check "svd_oom temp line" grep -q "     preallocated temp allocation:  335.59GiB" <<<"$out"
check "svd_oom parameter line" grep -q "             parameter allocation:   57.22MiB" <<<"$out"
check "svd_oom live-out line" grep -q "        maybe_live_out allocation:   57.23MiB" <<<"$out"
check "svd_oom buffer 1" grep -q "Shape: f32\[300000,300000\]" <<<"$out"
check "svd_oom verdict" grep -q "DOES NOT FIT" <<<"$out"
out=$("$HBM" plan "$SRC/examples/svd_fixed.hlo" --capacity 16GiB); rc=$?
check "svd_fixed fits 16GiB" grep -q "FITS: needs" <<<"$out"
check "svd_fixed fits: exit 0" test $rc -eq 0
out=$("$HBM" plan "$SRC/examples/svd_fixed.hlo" --capacity 600MiB); rc=$?
check "svd_fixed beyond 75 % of 600MiB" grep -q "NOT UNDER THE FRAMEWORK'S DEFAULT LIMIT" <<<"$out"
check "svd_fixed beyond the limit: exit 1" test $rc -eq 1
out=$("$HBM" plan "$SRC/examples/svd_fixed.hlo" --capacity 600MiB --framework-limit 0.8); rc=$?
check "a fraction given: the framework's limit, not its default" grep -q "NOT UNDER THE FRAMEWORK'S LIMIT: needs" <<<"$out"
check "a fraction given: no 75 %" bash -c '! grep -q "JAX preallocates 75" <<<"$1"' _ "$out"
check "a fraction given: XLA recompiles for it" grep -q "Compiling for this limit, XLA tries to recompute" <<<"$out"
check "a fraction given: the share" grep -q "the framework lets XLA use 80 % = 480.00MiB." <<<"$out"
check "a fraction given: exit 1" test $rc -eq 1
"$HBM" plan "$SRC/examples/svd_fixed.hlo" --capacity 600MiB --framework-limit 1 >/dev/null; rc=$?
check "svd_fixed without a limit: exit 0" test $rc -eq 0
out=$("$HBM" plan "$SRC/examples/svd_oom.hlo" --json --top 2)
check "json temp" grep -q '"temp_size_in_bytes": 360336162820' <<<"$out"
check "json argument" grep -q '"argument_size_in_bytes": 60000000' <<<"$out"
if command -v python3 >/dev/null; then
    check "json parses" python3 -c 'import json,sys; d=json.load(sys.stdin); assert len(d["peak_buffers"]) == 2' <<<"$out"
fi
out=$("$HBM" devices); check "devices lists H100" grep -q "H100-80GB" <<<"$out"
check "devices lists TPU v5e" grep -q "TPU-v5e" <<<"$out"
check "devices: v6e at XLA:TPU's 31.25G" grep -q "^TPU-v6e  *31.25GiB" <<<"$out"
# a real TPU train step on a small device: XLA:TPU's compile-time OOM, renamed copies read
# the backend from their content
TPU=${2:-}/hlo/tpu/qwen3_train_step.tpu_after_optimizations.hlo
if [ -f "$TPU" ]; then
    out=$("$HBM" plan "$TPU" --capacity 16GiB --width 0 --top 2); rc=$?
    check "tpu: exit 1" test $rc -eq 1
    check "tpu: XLA:TPU's first line" grep -q "^XLA:TPU compile permanent error. Ran out of memory in memory space hbm. Used [0-9.]*G of 16.00G hbm. Exceeded hbm capacity by [0-9.]*G. HLO module: jit_train_step.$" <<<"$out"
    check "tpu: largest allocations" grep -q "^  Largest program allocations in hbm:" <<<"$out"
    check "tpu: HLO temp line" grep -q "^    HLO temp  *[0-9.]*G ([0-9.]*% utilization: Unpadded" <<<"$out"
    tmp=$(mktemp -d); cp "$TPU" "$tmp/module.hlo"
    out=$("$HBM" plan "$tmp/module.hlo" --json); rm -rf "$tmp"
    check "tpu renamed: backend from content" grep -q '"backend_from": "content"' <<<"$out"
    check "tpu renamed: tpu" grep -q '"backend": "tpu"' <<<"$out"
else
    echo "skip tpu checks: $TPU not found"
fi
"$HBM" plan >/dev/null 2>&1; check "missing file is usage error" test $? -eq 2
"$HBM" plan "$SRC/examples/svd_oom.hlo" --device nope >/dev/null 2>&1; check "unknown device is usage error" test $? -eq 2
"$HBM" plan "$SRC/examples/svd_oom.hlo" --framework-limit 2 >/dev/null 2>&1; check "bad fraction is usage error" test $? -eq 2
bad=$(mktemp); printf 'HloModule m\nENTRY e {\n  p = f32[2 parameter(0)\n}\n' >"$bad"
err=$("$HBM" plan "$bad" 2>&1 >/dev/null); rc=$?
check "syntax error exits 2" test $rc -eq 2
check "syntax error names file:line:col" grep -q "$bad:3:13:" <<<"$err"
rm -f "$bad"
"$HBM" plan --help | grep -q "Usage: hbm plan"; check "help" test $? -eq 0
# --pack: the temp heap repacked by hbm's packers, never worse than the lower bound
out=$("$HBM" plan "$SRC/examples/svd_fixed.hlo" --pack exact)
check "pack line" grep -q "Repacking the temp heap with 'exact': " <<<"$out"
check "pack line 2" grep -q "  (XLA's heap simulator: 377.81MiB" <<<"$out"
"$HBM" plan "$SRC/examples/svd_fixed.hlo" --pack best --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
p = d["pack"]
assert d["plan"]["temp_size_in_bytes"] > 0, d
assert p["algorithm"] == "best" and p["lower_bound_bytes"] <= p["heap_bytes"] <= p["xla_heap_bytes"], p
'; check "pack json" test $? -eq 0
"$HBM" plan "$SRC/examples/svd_fixed.hlo" --pack magic >/dev/null 2>&1; check "bad --pack is usage error" test $? -eq 2
# 100 columns at most by default (--width), cut with '...', ASCII whatever the locale
maxw() { awk '{ gsub(/\t/, "        "); if (length($0) > m) m = length($0) } END { print m + 0 }'; }
w=$("$HBM" devices | maxw); check "devices fits 100 columns ($w)" test "$w" -le 100
w=$("$HBM" plan "$SRC/examples/svd_oom.hlo" --device V100-16GB --pack best | maxw); check "plan fits 100 columns ($w)" test "$w" -le 100
w=$("$HBM" devices --width 60 | maxw); check "devices --width 60 ($w)" test "$w" -le 60
"$HBM" devices --width 60 | grep -q '\.\.\.' ; check "cut lines end in an ellipsis" test $? -eq 0
"$HBM" devices --width 5 >/dev/null 2>&1; check "--width 5 is a usage error" test $? -eq 2
XD=${2:-}/hlo/xladumps/lorraxsbx_module_0657.jit__scan_window_44cbc091.hlo
if [ -f "$XD" ]; then # op names and paths of 150-250 columns
  w=$("$HBM" plan "$XD" --device h100 | maxw); check "xladumps plan fits 100 columns ($w)" test "$w" -le 100
  w=$("$HBM" plan "$XD" --device h100 --width 0 | maxw); check "--width 0: XLA's lines whole ($w)" test "$w" -gt 100
  "$HBM" plan "$XD" --device h100 | grep -q 'source_line=[0-9]*$'; check "a cut line keeps its file:line" test $? -eq 0
fi
n=$(LC_ALL=C "$HBM" plan "$SRC/examples/svd_oom.hlo" --device V100-16GB | LC_ALL=C grep -c '[^ -~	]')
check "plan prints ASCII only ($n lines otherwise)" test "$n" = 0
P=$(mktemp); printf 'id,lower,upper,size\na,0,3,3\nb,1,4,3\n' > "$P"
n=$( { LC_ALL=C "$HBM" devices; LC_ALL=C "$HBM" pack "$P" --capacity 6; } | LC_ALL=C grep -c '[^ -~	]')
check "devices and pack print ASCII only" test "$n" = 0; rm -f "$P"
# a folder is said to be one (every command reading files shares the reader)
mkdir "$T/adir"
for c in plan pack view replay; do
  out=$(H=$(cd "$(dirname "$HBM")" && pwd)/$(basename "$HBM") && cd "$T" && "$H" $c adir 2>&1); rc=$?
  check "$c adir: says it is a directory, exit 2" grep -q "adir is a directory" <<<"$out"
  check "$c adir exit 2" test $rc -eq 2
done
rm -rf "$T"
# --top has no limit (all the peak buffers there are); a negative one is a usage error
n=$("$HBM" plan "$SRC/examples/svd_oom.hlo" --json --top 1000 | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["peak_buffers"]))')
check "--top 1000 lists every peak buffer (11)" test "$n" = 11
"$HBM" plan "$SRC/examples/svd_oom.hlo" --top -1 >/dev/null 2>&1; check "--top -1 is a usage error" test $? -eq 2
"$HBM" plan --help | grep -q "no limit" || { echo "FAIL --help states --top's limit"; fail=1; }
# --capacity alone: the framework default of the module's backend (JAX's 75 % only on
# XLA:GPU; XLA:CPU and XLA:TPU read no XLA_PYTHON_CLIENT_MEM_FRACTION): no fraction advice
out=$("$HBM" plan "$SRC/examples/fit_scan_train.hlo" --capacity 4.3MiB 2>&1); rc=$?
check "CPU module, --capacity alone: the whole capacity is usable" grep -q "FITS: needs 4.25MiB of 4.30MiB usable" <<<"$out"
check "CPU module, --capacity alone: no fraction advised" bash -c '! grep -q XLA_PYTHON_CLIENT_MEM_FRACTION <<<"$1"' _ "$out"
check "CPU module, --capacity alone: exit 0" test $rc -eq 0
out=$("$HBM" plan "$SRC/examples/svd_fixed.hlo" --capacity 600MiB 2>&1)
check "GPU module, --capacity alone: JAX's 75 %" grep -q "the framework lets XLA use 75 % = 450.00MiB" <<<"$out"
TPU=$(ls "$DATA"/hlo/tpu/*.hlo 2>/dev/null | head -1)
if [ -n "$TPU" ]; then
  out=$("$HBM" fit "$TPU" --capacity 30GiB 2>&1)
  check "TPU module, fit --capacity alone: the whole capacity" grep -q "target 30.00GiB (32212254720 bytes): it fits as it is." <<<"$out"
  v=$("$HBM" plan "$TPU" --capacity 30GiB --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["verdict"], d["framework_limit_bytes"])')
  check "TPU module, plan --capacity alone: fits, limit = capacity ($v)" test "$v" = "fits 32212254720"
else
  echo "skip: the TPU module of the shared data is not here"
fi
exit $fail
