#!/bin/bash
# test_devices_cli.sh - devices as the driver reports them, fraction advice checked under
# XLA's rule, --capacity 1 as one byte, advice never cut by --width: the text a user pastes.
# usage: bash test_devices_cli.sh <path-to-hbm> <shared-data-dir>
set -u
. "$(dirname "$0")/lib.sh" "$@"
fail=0
check() { # name, condition command...
    local name=$1; shift
    if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; fi
}
has() { grep -qxF -- "$1" <<<"$2"; } # a whole line, exactly
out=$("$HBM" devices --width 0)
check "A100-40GB: the driver's total" has "A100-40GB      39.39GiB    42298834944     0.75  NVIDIA A100 40GB: driver's 39.39 GiB" "$out"
check "H200: the total measured" has "H200-141GB    140.40GiB   150754820096     0.75  NVIDIA H200 141GB: driver's 143771 MiB (measured)" "$out"
# a module needing 41,472,000,000 B: 20.736 GB in, 20.736 GB out; an unfused op in a scheduled
# module is XLA:CPU's, so --backend gpu: JAX's fraction applies to XLA:GPU only
cat >"$T/m.hlo" <<'HLO'
HloModule jit_step, is_scheduled=true, entry_computation_layout={(f32[5184000000]{0})->f32[5184000000]{0}}

ENTRY %main (p0: f32[5184000000]) -> f32[5184000000] {
  %p0 = f32[5184000000]{0} parameter(0)
  ROOT %n = f32[5184000000]{0} negate(f32[5184000000]{0} %p0)
}
HLO
# 39 GiB: .99 x 39 GiB rounded up to 2 MiB is 41,458,597,888 B, under the need
out=$("$HBM" plan "$T/m.hlo" --backend gpu --capacity 39GiB); rc=$?
check "39GiB: exit 1" test $rc -eq 1
check "39GiB: no fraction fits" has "  No fraction fits: the module needs 38.62GiB, XLA_PYTHON_CLIENT_MEM_FRACTION=.99 gives 38.61GiB" "$out"
check "39GiB: short by" has "    under XLA's rule and 38.44GiB as JAX 0.11 gave on an H200, short by 182.79MiB." "$out"
check "39GiB: never .99 as a fix" bash -c '! grep -q "Set XLA_PYTHON_CLIENT_MEM_FRACTION" <<<"$1"' _ "$out"
out=$("$HBM" plan "$T/m.hlo" --backend gpu --capacity 39GiB --framework-limit .99)
check "39GiB at .99: not .99 again" bash -c '! grep -q "Set XLA_PYTHON_CLIENT_MEM_FRACTION=.99" <<<"$1"' _ "$out"
check "39GiB at .99: the limit under XLA's rule" has "    the framework lets XLA use 99 % = 38.61GiB." "$out"
# 40 GiB: .97 is the smallest hundredth whose limit holds it
out=$("$HBM" plan "$T/m.hlo" --backend gpu --capacity 40GiB --width 40)
check "40GiB: the fraction" has "  Set XLA_PYTHON_CLIENT_MEM_FRACTION=.97 (or XLA_PYTHON_CLIENT_ALLOCATOR=platform):" "$out"
check "40GiB: the lower figure too" has "    as does 38.63GiB, 0.43 % less, as JAX 0.11 gave on an H200." "$out"
check "40GiB: its check, whole at --width 40" has "    XLA's limit is then 38.80GiB (.97 x 40.00GiB, rounded up to 2 MiB), which holds the 38.62GiB needed," "$out"
out=$("$HBM" plan "$T/m.hlo" --backend gpu --capacity 40GiB --width 0)
check "--width 0: advice whole" has "    XLA's limit is then 38.80GiB (.97 x 40.00GiB, rounded up to 2 MiB), which holds the 38.62GiB needed," "$out"
out=$("$HBM" fit "$T/m.hlo" --backend gpu --capacity 40GiB --remat none)
check "fit: the same checked fraction" has "    XLA_PYTHON_CLIENT_MEM_FRACTION=.97 (or XLA_PYTHON_CLIENT_ALLOCATOR=platform)" "$out"
out=$("$HBM" fit "$T/m.hlo" --backend gpu --capacity 39GiB --remat none)
# fit wraps advice at spaces (never cuts a word) at its width, and writes it on one line at 0
check "fit: no fraction fits" has "    XLA_PYTHON_CLIENT_ALLOCATOR=platform (no fraction fits: the module needs 38.62GiB," "$out"
check "fit: by how much" has "      gave on an H200, short by 182.79MiB)" "$out"
out=$("$HBM" fit "$T/m.hlo" --backend gpu --capacity 39GiB --remat none --width 0)
check "fit --width 0: the advice on one line" has "    XLA_PYTHON_CLIENT_ALLOCATOR=platform (no fraction fits: the module needs 38.62GiB, XLA_PYTHON_CLIENT_MEM_FRACTION=.99 gives 38.61GiB under XLA's rule and 38.44GiB as JAX 0.11 gave on an H200, short by 182.79MiB)" "$out"
# --capacity 1 is one byte
out=$("$HBM" fit "$SRC/examples/svd_oom.hlo" --capacity 1); rc=$?
check "fit --capacity 1: exit 1" test $rc -eq 1
check "fit --capacity 1: no 'fits as it is'" bash -c '! grep -q "fits as it is" <<<"$1"' _ "$out"
check "fit --capacity 1: target under JAX's .75" has "  target 0B (0 bytes), 335.70GiB to take off the peak" "$out"
out=$("$HBM" fit "$SRC/examples/svd_oom.hlo" --capacity 1 --framework-limit 1)
check "fit --capacity 1 --framework-limit 1: one byte" has "  target 1B (1 bytes), 335.70GiB to take off the peak" "$out"
out=$("$HBM" plan "$SRC/examples/svd_oom.hlo" --capacity 1); rc=$?
check "plan --capacity 1: exit 1" test $rc -eq 1
check "plan --capacity 1: one byte" has "  DOES NOT FIT: needs 335.70GiB, the device has 1B (short by 335.70GiB)." "$out"
"$HBM" replay "$SRC/examples/svd_fixed.hlo" --device sim:1 >/dev/null 2>&1; rc=$?
check "replay on sim:1: exit 1" test $rc -eq 1
exit $fail
