#!/bin/bash
# test_plan_jaxterms.sh - hbm plan's explanation in the JAX user's terms (issue 37, item 3):
# after a negative verdict, a JAX module's scan residuals named with the change that stops
# saving each (the text hbm fit gives, bytes left to fit), or, without a backward pass, that
# jax.checkpoint policies do not apply and what does; nothing for a module that fits, nor for
# one JAX did not compile. The library's text (Python's report) is the CLI's.
# usage: bash test_plan_jaxterms.sh <path-to-hbm> <shared-data-dir>
set -u
. "$(dirname "$0")/lib.sh" "$@"
failed=0
check() { # name, condition command...
    local name=$1; shift
    if "$@"; then echo "ok   $name"; else echo "FAIL $name"; failed=1; fi
}
has() { grep -qxF -- "$1" <<<"$2"; } # a whole line, exactly
D="$SRC/examples"

out=$("$HBM" plan "$D/fit_scan_train.hlo" --capacity 1MiB --width 0); rc=$?
check "exit 1" test $rc -eq 1
check "residual named, after the verdict" bash -c 'grep -A2 "^  DOES NOT FIT" <<<"$1" | grep -qxF "The scan over 6 layers saves f32[64,256] per layer for its backward pass (f32[6,64,256], 384.0KiB, at the peak):"' _ "$out"
check "what computes it, its line" has "  computed by jit(train_step)/jvp()/while/body/closed_call/dot_general at fit_scan.py:10 (loop while.12 writes it, loop while.3 reads it)" "$out"
check "the change, as fit gives it" has '  change: x = checkpoint_name(x, "dot_general_10") at fit_scan.py:10, and on the scanned body'"'"'s jax.checkpoint policy=jax.checkpoint_policies.save_any_names_but_these("dot_general_10") (the backward loop recomputes it; other named values stay saved), or policy=jax.checkpoint_policies.save_and_offload_only_these_names(names_which_can_be_saved=[], names_which_can_be_offloaded=["dot_general_10"], offload_src="device", offload_dst="pinned_host") (kept in host memory)' "$out"
check "the carry" has "  the layer's input, the scan's carry (loop while.12 writes it, loop while.3 reads it), scan at fit_scan.py:16" "$out"
check "bytes: estimated here, fit's to verify" test "$(grep -cxF "  takes off: up to 320.0KiB (the buffer less the one layer the backward loop holds), estimated; hbm fit plans the module with each change and says what it takes off" <<<"$out")" -eq 2
fitout=$("$HBM" fit "$D/fit_scan_train.hlo" --capacity 1MiB --framework-limit 1 --width 0)
check "the same change line as fit's" bash -c 'a=$(grep "^  change: " <<<"$1"); b=$(grep "^  change: " <<<"$2"); [ -n "$a" ] && [ "$a" = "$b" ]' _ "$out" "$fitout"
out=$("$HBM" plan "$D/fit_scan_train.hlo" --capacity 1MiB --width 60)
check "--width 60: wrapped, never cut" test "$(awk 'length > 60' <<<"$(sed -n '/^The scan over/,$p' <<<"$out")" | wc -l)" -eq 0

out=$("$HBM" plan "$D/fit_scan_forward.hlo" --capacity 1KiB --width 0)
check "forward only: policies do not apply" has "No backward pass in this module (no op_name under transpose(...)): jax.checkpoint policies do not apply to it. What does: donating arguments (donate_argnames), keeping arguments in host memory (memory_kind='pinned_host'), a smaller batch or sequence." "$out"
check "forward only: no policy advised" test "$(grep -c 'checkpoint_policies\.\|checkpoint_name(' <<<"$out")" -eq 0

out=$("$HBM" plan "$D/fit_scan_train.hlo" --capacity 1GiB)
check "fits: nothing of it" test "$(grep -c 'The scan over\|No backward pass' <<<"$out")" -eq 0
cat >"$T/m.hlo" <<'HLO'
HloModule m, is_scheduled=true
ENTRY %main (p0: f32[1048576]) -> f32[1048576] {
  %p0 = f32[1048576]{0} parameter(0)
  ROOT %n = f32[1048576]{0} negate(f32[1048576]{0} %p0)
}
HLO
out=$("$HBM" plan "$T/m.hlo" --capacity 1KiB)
check "not from JAX: nothing of it" test "$(grep -c 'The scan over\|No backward pass' <<<"$out")" -eq 0
out=$("$HBM" plan "$D/fit_scan_train.hlo" --capacity 1MiB --json)
check "--json unchanged: no text in it" test "$(grep -c 'The scan over' <<<"$out")" -eq 0
exit $failed
