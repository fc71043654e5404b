#!/bin/bash
# test_fit_jaxterms.sh - hbm fit's advice in the JAX user's terms: the exact text a user pastes
# for each kind (scan residual, the scan's carry, MaxText's remat_policy, donation, an argument
# in host memory, a module without a backward pass), advice never cut (--width 0, --width 60),
# and on the shared corpus no checkpoint policy for a module without a backward pass.
# examples/fit_scan_*.hlo: modules JAX 0.10.2 compiled on CPU from examples/fit_scan.py (its
# path written "fit_scan.py"); tests/fit_jax/scan_maxtext.hlo is fit_scan_train.hlo with the layer's name
# stack written as a MaxText decoder's (".../decoder/layers/mlp/wi_0/"), by hand.
# usage: bash test_fit_jaxterms.sh <path-to-hbm> <shared-data-dir>
set -u
. "$(dirname "$0")/lib.sh" "$@"
failed=0
check() { # name, condition command...
    local name=$1; shift
    if "$@"; then echo "ok   $name"; else echo "FAIL $name"; failed=1; fi
}
has() { grep -qxF -- "$1" <<<"$2"; } # a whole line, exactly
D="$SRC/examples"

# --- a scanned training step: two residuals, donation, an argument in host memory ---------
out=$("$HBM" fit "$D/fit_scan_train.hlo" --capacity 1MiB --framework-limit 1 --width 0)
check "exit 1 (nothing fits 1 MiB)" test $? -eq 1
check "residual named" has "The scan over 6 layers saves f32[64,256] per layer for its backward pass (f32[6,64,256], 384.0KiB, at the peak):" "$out"
check "what computes it, its line" has "  computed by jit(train_step)/jvp()/while/body/closed_call/dot_general at fit_scan.py:10 (loop while.12 writes it, loop while.3 reads it)" "$out"
check "the change for a computed residual" has '  change: x = checkpoint_name(x, "dot_general_10") at fit_scan.py:10, and on the scanned body'"'"'s jax.checkpoint policy=jax.checkpoint_policies.save_any_names_but_these("dot_general_10") (the backward loop recomputes it; other named values stay saved), or policy=jax.checkpoint_policies.save_and_offload_only_these_names(names_which_can_be_saved=[], names_which_can_be_offloaded=["dot_general_10"], offload_src="device", offload_dst="pinned_host") (kept in host memory)' "$out"
check "the carry" has "  the layer's input, the scan's carry (loop while.12 writes it, loop while.3 reads it), scan at fit_scan.py:16" "$out"
check "the change for the carry" has '  change: x = checkpoint_name(x, "layer_input") first in the scanned body, and policy=jax.checkpoint_policies.save_and_offload_only_these_names(names_which_can_be_saved=[], names_which_can_be_offloaded=["layer_input"], offload_src="device", offload_dst="pinned_host") on its jax.checkpoint: the input goes to host memory, the layer is recomputed from it' "$out"
check "in host memory: planned" has "  takes off: 383.9KiB (393152 bytes) in host memory, verified: the module with this buffer in host memory (S(5)) plans to a peak of 3.88MiB, over the target by 2.88MiB; no extra FLOPs, 384.0KiB each way over the host link (about 25 us at A100's 32 GB/s)" "$out"
check "the carry in host memory: planned" has "  takes off: 384.0KiB (393216 bytes) in host memory, verified: the module with this buffer in host memory (S(5)) plans to a peak of 3.88MiB, over the target by 2.88MiB; no extra FLOPs, 384.0KiB each way over the host link (about 25 us at A100's 32 GB/s)" "$out"
check "recomputed: verified by the edited module" has "             384.0KiB (393208 bytes) recomputed instead, verified: the module with the backward loop computing it again plans to a peak of 3.88MiB, over the target by 2.88MiB; 50.3 MFLOP more" "$out"
check "donation by the argument's name" has "          JAX: jax.jit(f, donate_argnames=(\"params\",)): donates argument params (params['w'] is HLO parameter 0)" "$out"
check "argument in host memory" has "          JAX: keep argument batch['x'] (HLO parameter 1) in host memory: pass it as jax.device_put(x, s.with_memory_kind('pinned_host')) (s: its sharding; the same for its in_shardings entry) and inside f read it through jax.device_put(x, s.with_memory_kind('device'))" "$out"
check "the residual's buffer points to its policy" has "          JAX: the scan over 6 layers saves it for the backward pass: the change is the policy named above" "$out"
check "a value without op_name: not called outside autodiff" has "          JAX: no JAX-side change: autodiff does not save it (no op_name says which pass computes it); the change is XLA's (hbm fit --emit writes it)" "$out"
check "how to check" has "Check a change in JAX: jax.ad_checkpoint.print_saved_residuals(f, *args) lists what autodiff saves; jax.jit(f).lower(*args).compile().memory_analysis() gives XLA's bytes." "$out"
check "no placeholder" test "$(grep -c 'donate_argnums=\.\.\.\|\.\.\.)' <<<"$out")" -eq 0
check "--width 0 cuts nothing" test "$(grep -c '\.\.\.$' <<<"$out")" -eq 0

# --width narrows tables, not advice: wrapped lines join to the same words
# the XLA-side set misses 4 MiB, the carry in host memory (a JAX-side policy) reaches it:
# said as what fits, and the exit status is 0; at 1 MiB nothing does
out4=$("$HBM" fit "$D/fit_scan_train.hlo" --capacity 4MiB --framework-limit 1 --width 0); rc=$?
check "4 MiB: exit 0 (a residual in host memory fits)" test $rc -eq 0
check "4 MiB: what fits, named" has "What fits: the scan residual f32[6,64,256] (the layer's input, scan at fit_scan.py:16, above) in host memory, by its checkpoint policy in the JAX code: the module plans to 3.88MiB, under the target by 127.8KiB. The set of XLA-side changes alone reaches 4.19MiB, 192.3KiB over it." "$out4"
check "4 MiB: not 'nothing fits'" bash -c '! grep -q "Nothing within the limits fits" <<<"$1"' _ "$out4"
j=$("$HBM" fit "$D/fit_scan_train.hlo" --capacity 4MiB --framework-limit 1 --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["fits"], d["residual_fits"], d["residual_alone"], d["residual_peak_bytes"] <= d["target_bytes"])')
check "4 MiB JSON: the set misses, the residual alone fits ($j)" test "$j" = "False True True True"
check "1 MiB: nothing fits" grep -q "Nothing within the limits fits" <<<"$out"
narrow=$("$HBM" fit "$D/fit_scan_train.hlo" --capacity 1MiB --framework-limit 1 --width 60)
check "--width 60: advice lines wrapped" grep -q '^    names_which_can_be_offloaded=\["layer_input"\],$' <<<"$narrow"
words() { grep -A12 '^  change: x = checkpoint_name(x, "layer_input")' | sed '/^  takes off/,$d' | tr -s ' \n' ' '; }
check "--width 60: the carry's change whole" test "$(words <<<"$narrow")" = "$(words <<<"$out")"

json=$("$HBM" fit "$D/fit_scan_train.hlo" --capacity 1MiB --framework-limit 1 --json)
check "json: has_backward" grep -q '"has_backward": true' <<<"$json"
if command -v python3 >/dev/null; then
    check "json: scan residuals" python3 -c '
import json, sys
d = json.load(sys.stdin)
r = d["scan_residuals"]
assert len(r) == 2 and {x["carry"] for x in r} == {True, False}, r
x = [x for x in r if not x["carry"]][0]
assert x["layers"] == 6 and x["per_layer"] == "f32[64,256]" and x["source_line"] == 10, x
assert x["bytes"] == 393216 and x["estimated_bytes_off"] == 327680, x
assert x["verified"] is True and x["host_peak_bytes"] == 4063516 and d["bytes_before"] == 4456668, x
assert x["recompute_peak_bytes"] == 4456668 - 393208 and x["recompute_not_planned"] == "", x' <<<"$json"
fi

# --- MaxText's names: the remat_policy value, not checkpoint_name ------------------------
out=$("$HBM" fit "$SRC/tests/fit_jax/scan_maxtext.hlo" --capacity 1MiB --framework-limit 1 --width 0)
check "MaxText: the layer's input" has '  MaxText names it "decoder_layer_input": remat_policy=custom with decoder_layer_input=offload keeps it in host memory, the layer recomputed from it' "$out"
check "MaxText remat_policy" has '  MaxText saves it as "mlpwi_0": remat_policy=save_dot_except_mlpwi recomputes it, remat_policy=minimal_offloaded keeps it in host memory' "$out"

# --- XLA:TPU, a Flax model: the residual a multi-output fusion writes, the module path named ----
out=$("$HBM" fit "$SRC/tests/fit_jax/flax_scan_tpu.hlo" --capacity 100MiB --framework-limit 1 --width 0)
check "TPU/Flax: the saved projection" has "The scan over 8 layers saves f32[16,512,1024] per layer for its backward pass (f32[8,16,512,1024], 256.00MiB, at the peak):" "$out"
check "TPU/Flax: the Flax module path" has "  computed by jit(step)/jvp(Model)/while/body/closed_call/layers/wi/dot_general in the Flax module Model/layers/wi (loop while.4 writes it, loop while.5 reads it)" "$out"
check "TPU/Flax: the change there" has '  change: x = checkpoint_name(x, "wi_dot_general") in the Flax module Model/layers/wi, and on the scanned body'"'"'s jax.checkpoint policy=jax.checkpoint_policies.save_any_names_but_these("wi_dot_general") (the backward loop recomputes it; other named values stay saved), or policy=jax.checkpoint_policies.save_and_offload_only_these_names(names_which_can_be_saved=[], names_which_can_be_offloaded=["wi_dot_general"], offload_src="device", offload_dst="pinned_host") (kept in host memory)' "$out"
check "TPU/Flax: planned in host memory" has "  takes off: 256.66MiB (269123584 bytes) in host memory, verified: the module with this buffer in host memory (S(5)) plans to a peak of 40.08MiB, under the target by 59.92MiB; no extra FLOPs, 256.00MiB each way over the host link (about 16.8 ms at TPU-v5e's 32 GB/s)" "$out"
check "TPU/Flax: recomputing it, verified through the multi-output fusion" has "             216.01MiB (226508792 bytes) recomputed instead, verified: the module with the backward loop computing it again plans to a peak of 80.72MiB, under the target by 19.28MiB; 34.4 GFLOP more; the clone reads the layer's input f32[16,512,256] from the bf16[16,512,256] copy the backward loop holds, converted back (rounded)" "$out"
check "TPU/Flax: --emit writes the recompute module" has "hbm fit --emit writes the module with the backward loop recomputing the scan residual f32[8,16,512,1024], planned to 80.72MiB (84645384 bytes), not the XLA-side set." "$out"
# the emitted module is the one planned: hbm plan of it is the figure fit printed
"$HBM" fit "$SRC/tests/fit_jax/flax_scan_tpu.hlo" --capacity 100MiB --framework-limit 1 --json --emit "$T/recompute.hlo" >"$T/recompute.json"
check "TPU/Flax: fit's JSON names the recompute route" grep -q '"recompute_residual_peak_bytes": 84645384,' "$T/recompute.json"
check "TPU/Flax: fit's JSON, the emitted module's peak" grep -q '"emitted_peak_bytes": 84645384,' "$T/recompute.json"
check "TPU/Flax: the emitted module has the clone in the backward body" grep -q "^  %bitcast_dynamic-update-slice_fusion.6.recompute = f32\[16,512,1024\]{2,1,0:T(8,128)} fusion(" "$T/recompute.hlo"
check "TPU/Flax: hbm plan of the emitted module = the figure printed" grep -q '"peak_bytes": 84645384,' <<<"$("$HBM" plan "$T/recompute.hlo" --json)"
# at 1 MiB nothing reaches the target: --emit writes the XLA-side set, as before
"$HBM" fit "$SRC/tests/fit_jax/flax_scan_tpu.hlo" --capacity 1MiB --framework-limit 1 --emit "$T/set.hlo" >/dev/null
check "TPU/Flax at 1 MiB: the set is emitted, not the recompute" bash -c '! grep -q "\.recompute" "$1"' _ "$T/set.hlo"
check "TPU/Flax: a residual that changes nothing alone, said so" has "  takes off: nothing alone, verified: the module with this buffer in host memory (S(5)) plans to 296.74MiB, the peak as it is" "$out"

# --- no backward pass: no checkpoint policy, what applies instead --------------------------
out=$("$HBM" fit "$D/fit_scan_forward.hlo" --capacity 1MiB --framework-limit 1 --width 0)
check "forward only: said" has "No backward pass in this module (no op_name under transpose(...)): jax.checkpoint policies do not apply to it. What does: donating arguments (donate_argnames), keeping arguments in host memory (memory_kind='pinned_host'), a smaller batch or sequence." "$out"
check "forward only: no policy advised" test "$(grep -c 'checkpoint_policies\.\|checkpoint_name(' <<<"$out")" -eq 0
check "forward only: no residual" test "$(grep -c 'The scan over' <<<"$out")" -eq 0

# --- the real TPU step (shared data) -----------------------------------------------------------
TPU="$DATA/hlo/tpu/qwen3_train_step.tpu_after_optimizations.hlo"
if [ -n "$DATA" ] && [ -f "$TPU" ]; then
    for cap in 40GiB 31.25GiB; do
        out=$("$HBM" fit "$TPU" --capacity $cap --framework-limit 1 --width 0)
        check "TPU step at $cap: fits as it is" grep -q "needs 26.05GiB (27967362056 bytes).*" <<<"$out"
    done
    out=$("$HBM" fit "$TPU" --capacity 20GiB --framework-limit 1 --width 0)
    check "TPU step at 20 GiB: the scan's residual" has "The scan over 32 layers saves bf16[4,8192,4096] per layer for its backward pass (bf16[32,4,8192,4096], 8.00GiB, at the peak):" "$out"
    check "TPU step: the layers' inputs in host memory, planned" has "  takes off: 8.00GiB (8589934592 bytes) in host memory, verified: the module with this buffer in host memory (S(5)) plans to a peak of 18.05GiB, under the target by 1.95GiB; no extra FLOPs, 8.00GiB each way over the host link (about 536.9 ms at TPU-v5e's 32 GB/s)" "$out"
    check "TPU step: the scan's line" has "  the layer's input, the scan's carry (loop while.164 writes it, loop while.165 reads it), scan at /app/trainer/model/modeling_llama3.py:975" "$out"
else
    echo "skip the TPU step: no ${DATA:-(no shared data)}/hlo/tpu"
fi

# --- the shared corpus: no checkpoint policy where there is no backward pass -------------------
if [ -n "$DATA" ] && [ -d "$DATA/hlo/xladumps" ]; then
    n=0 bad=0 fwd=0
    for f in "$DATA"/hlo/xladumps/*.hlo; do
        n=$((n + 1))
        grep -q 'transpose(' "$f" && continue
        fwd=$((fwd + 1))
        o=$("$HBM" fit "$f" --capacity 1KiB --framework-limit 1 --timeout 0.05 --width 0 --no-offload 2>/dev/null)
        if grep -q 'checkpoint_policies\.\|checkpoint_name(\|The scan over' <<<"$o"; then
            echo "  a policy advised without a backward pass: $f"
            bad=$((bad + 1))
        fi
    done
    echo "  corpus: $n modules, $fwd without a backward pass, $bad advised a checkpoint policy"
    # module 0303's kernel (the issue's): rows that were jax.checkpoint(policy=dots_saveable)
    k=$(ls "$DATA"/hlo/xladumps/lorraxsbx_module_0303.jit__kernel_3f41f47f.hlo 2>/dev/null)
    if [ -n "$k" ]; then
        o=$("$HBM" fit "$k" --capacity 1KiB --framework-limit 1 --timeout 0.05 --width 0 2>/dev/null)
        check "module 0303: no backward pass, said" grep -q "^No backward pass in this module" <<<"$o"
        check "module 0303: its rows say no JAX-side change" grep -q "JAX: no JAX-side change: this module has no backward pass" <<<"$o"
    fi
    check "corpus: no policy without a backward pass" test $bad -eq 0
else
    echo "skip the corpus: no ${DATA:-(no shared data)}/hlo/xladumps"
fi
exit $failed
