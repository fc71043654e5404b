#!/bin/bash
# test_memprof_cli.sh - hbm view of a profile's memory profile (issue 38): the shared ROCm
# profile's figures in text and --json, the attribution, --device-index, --modules and
# --module (the Memory Viewer one flag away), --html, and a profile that JAX's CPU client
# records (no memory events: said, its modules shown) when a Python with JAX is at hand
# (HBM_PYTHON: the interpreter(s) to try).
# usage: bash test_memprof_cli.sh <path-to-hbm> <shared-data-dir>
set -u
. "$(dirname "$0")/lib.sh" "$@"
fail=0
check() { # name, condition command...
    local name=$1; shift
    if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; fi
}
X="$DATA/xprof/rocm_te_fused_attn.xplane.pb"
if [ -r "$X" ]; then
    out=$("$HBM" view "$X" --ascii); rc=$?
    check "view profile: exit 0" test $rc -eq 0
    check "the allocator and its events" grep -q "^Memory profile of GPU_0_bfc (device 0) in " <<<"$out"
    check "event counts" grep -q "^  59 events: 30 allocations, 29 deallocations" <<<"$out"
    check "the peak" grep -q "^  peak in use       632.50MiB at 10.680 ms (step 0, event 52)" <<<"$out"
    check "XProf's figures at the peak" grep -q "capacity 279.34GiB, fragmentation 47.3%" <<<"$out"
    check "the allocator's own peak" grep -q "allocator's peak  632.50MiB (its peak_bytes_in_use stat, the same" <<<"$out"
    check "the temp allocation, sure" grep -q "304.50MiB  304.50MiB  sure    temp      jit_loss_fn(17) (running)" <<<"$out"
    check "a parameter made earlier" grep -q "48.00MiB   48.00MiB  sure    parameter jit_loss_fn(17)  .* bf16\[2,2048,3,16,128\]" <<<"$out"
    check "held from before" grep -q "128.00MiB .* held      from before the peak's step: arrays kept between calls" <<<"$out"
    check "the explanation" grep -q "^At the peak, jit_loss_fn(17) was running. By its plan it needs 400.50MiB" <<<"$out"
    check "what was already held" grep -q "^Already held, 224.00MiB: 96.00MiB in blocks of its parameters' sizes" <<<"$out"
    "$HBM" view "$X" --json >"$T/m.json"; rc=$?
    check "--json: exit 0" test $rc -eq 0
    if command -v python3 >/dev/null; then
        check "--json: the figures" python3 - "$T/m.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
a = d["allocators"][0]
assert d["memory_profile"] and a["allocator"] == "GPU_0_bfc"
assert (a["events"], a["allocations"], a["max_bytes_allocated"], a["max_peak_bytes_in_use_stat"]) == (59, 30, 663228416, 663228416)
assert a["peak_bytes_in_use"] == 663228416 and a["memory_capacity"] == 299944250900
assert sum(x["allocation_bytes"] for x in a["active"]) + a["unmapped_bytes"] == a["peak_allocated_bytes"]
r = a["running"]
assert r["module"] == "jit_loss_fn(17)" and r["temp_size_in_bytes"] == 319293224 and r["output_size_in_bytes"] == 100663332
assert [x["kind"] for x in a["active"] if x["running"]].count("temp") == 1
assert len(a["timeline"]) == 59
PY
    fi
    # the profile as fleet ranks (issue 39): each rank's figures are hbm view --json PROFILE's,
    # and the same read back from the profile's summary
    "$HBM" view "$X" "$X" --json >"$T/f.json"; rc=$?
    check "fleet of the profile twice: exit 0" test $rc -eq 0
    "$HBM" view "$X" --summary "$T/x.summary.json" 2>/dev/null; rc=$?
    check "--summary of the profile: exit 0" test $rc -eq 0
    "$HBM" view "$T/x.summary.json" "$T/x.summary.json" --json >"$T/fs.json"; rc=$?
    check "fleet of its summary: exit 0" test $rc -eq 0
    if command -v python3 >/dev/null; then
        check "fleet ranks equal hbm view --json PROFILE" python3 - "$T/m.json" "$T/f.json" "$T/fs.json" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))["allocators"][0]
for fleet in sys.argv[2:]:
    f = json.load(open(fleet))
    assert f["read"] == 2 and f["failed"] == 0, (f["read"], f["failed"])
    for r in f["ranks"]:
        got = (r["device"], r["device_index"], r["events"], r["allocs"], r["frees"], r["peak_bytes_in_use"],
               r["peak_event"], r["peak_bytes_reserved"], r["reserved_at_peak_bytes"], r["fragmentation_at_peak"],
               r["live_at_peak"], r["live_at_peak_bytes"], r["figures"])
        # XProf's active allocations and its special rows (held from before, stack) make the peak
        want = (a["allocator"], a["device_index"], a["events"], a["allocations"], a["deallocations"],
                a["peak_bytes_in_use"], a["peak_event"], a["max_bytes_reserved"], a["peak_reserved_bytes"],
                a["peak_fragmentation"], len(a["active"]) + (a["unmapped_bytes"] > 0) + (a["peak_reserved_bytes"] > 0),
                a["peak_bytes_in_use"], "xprof")
        assert got == want, (fleet, got, want)
        assert r["peak_bytes_in_use"] == 663228416 and r["peak_bytes_reserved"] == 0, r
        assert sum(s["bytes"] for s in r["sites"]) == a["peak_bytes_in_use"], r["sites"]
        assert r["sites"][0]["op"] == "jit_loss_fn(17) temp" and r["sites"][0]["bytes"] == 319293440, r["sites"][0]
    st = f["stats"]
    assert st["peak_bytes_in_use"]["max"] == 663228416 and st["fragmentation_at_peak"]["median"] == a["peak_fragmentation"]
PY
    fi
    "$HBM" view "$X" "$X" --html "$T/fl.html" 2>/dev/null; rc=$?
    check "fleet --html of the profile: exit 0" test $rc -eq 0
    check "fleet --html: each rank's page is its memory profile's" grep -q '"module":"jit_loss_fn(17)","kind":"temp"' "$T/fl.html.ranks/rank-1-0.html"
    out=$("$HBM" view "$X" "$X" --top 2); rc=$?
    check "fleet text: XProf's peak, reserved and fragmentation" grep -q " 632.50MiB        0B 47.3%    0 " <<<"$out"
    out=$("$HBM" view "$X" --device-index 3 2>&1); rc=$?
    check "--device-index it lacks: exit 2" test $rc -eq 2
    check "--device-index it lacks: names those it has" grep -q "no allocator of device 3 in the memory profile (it has 0)" <<<"$out"
    out=$("$HBM" view "$X" --device-index 0); rc=$?
    check "--device-index 0: exit 0" test $rc -eq 0
    out=$("$HBM" view "$X" --modules --top 3); rc=$?
    check "--modules: the Memory Viewer" grep -q "^Memory Viewer: jit_loss_fn" <<<"$out"
    out=$("$HBM" view "$X" --module "jit__normal(13)" --top 3); rc=$?
    check "--module: that module's Memory Viewer" grep -q "^Memory Viewer: jit__normal" <<<"$out"
    "$HBM" view "$X" --html "$T/m.html" 2>/dev/null; rc=$?
    check "--html: exit 0" test $rc -eq 0
    check "--html: a page of the allocator" grep -q "GPU_0_bfc" "$T/m.html"
    check "--html: the memory profile's page" grep -q "<title>hbm memory profile: " "$T/m.html"
    check "--html: its attribution inside" grep -q '"module":"jit_loss_fn(17)","kind":"temp"' "$T/m.html"
    check "--html: self-contained" bash -c "! grep -Eiq '<script[^>]+src=|<link |@import|url\\(|<img |https?://' '$T/m.html'"
    CHROMIUM=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
    if [ -n "$CHROMIUM" ]; then # the page's script draws the timeline and a row per allocation at the peak
        timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --no-first-run --disable-extensions \
            --user-data-dir="$T/chr" --virtual-time-budget=3000 --dump-dom "file://$T/m.html" >"$T/dom.html" 2>/dev/null
        check "--html: the script ran" grep -q 'data-ready="1"' "$T/dom.html"
        check "--html: the timeline drawn" grep -Eq '<path class="use" d="M[0-9.]+ [0-9.]+ H' "$T/dom.html"
        rows=$(grep -o '<tr class="act' "$T/dom.html" | wc -l)
        check "--html: a row per allocation at the peak (11, $rows)" test "$rows" -eq 11
        check "--html: the held row" grep -q '<tr class="held"><td>128.00MiB' "$T/dom.html"
        check "--html: the temp, by its module" grep -q '<td class="l">temp</td>' "$T/dom.html"
    else
        echo "skip --html in Chromium: chromium is not installed"
    fi
    # the memory profile is a trace: replay, diff, export
    out=$("$HBM" replay "$X" 2>&1); rc=$?
    check "replay profile: exit 0" test $rc -eq 0
    check "replay: the allocator's events" grep -q "^replay of rocm_te_fused_attn.xplane.pb (device GPU_0_bfc, 59 events" <<<"$out"
    check "replay: what was held before, rebuilt" grep -q "59 events after 4 rebuilt from what was in use before its first event)" <<<"$out"
    check "replay: on the profile's capacity" grep -q "on a simulated device of 279.34GiB" <<<"$out"
    check "replay: the peak asked for" grep -q "^allocator=platform *624.50MiB" <<<"$out"
    out=$("$HBM" diff "$X" "$X"); rc=$?
    check "diff profile profile: the allocators' traces" grep -q "(xprof, device GPU_0_bfc)" <<<"$out"
    "$HBM" export "$X" --format perfetto -o "$T/p.json" 2>/dev/null; rc=$?
    check "export perfetto: exit 0" test $rc -eq 0
    check "export perfetto: counters" grep -q '"in use"' "$T/p.json"
else
    echo "skip: $X not found (the shared data set is absent)"
fi

# JAX's CPU client: a profile of a small training loop has no memory events
py=
for c in ${HBM_PYTHON:-python3}; do
    if "$c" -c "import jax" 2>/dev/null; then py=$c; break; fi
done
if [ -n "$py" ]; then
    JAX_PLATFORMS=cpu "$py" - "$T/prof" >"$T/py.out" 2>&1 <<'PY'
import sys, jax, jax.numpy as jnp
def loss(w, x): return jnp.sum(jnp.tanh(x @ w) ** 2)
step = jax.jit(lambda w, x: w - 0.01 * jax.grad(loss)(w, x))
w, x = jnp.ones((256, 256)), jnp.ones((64, 256))
w = step(w, x).block_until_ready()
with jax.profiler.trace(sys.argv[1]):
    for _ in range(3):
        w = step(w, x)
    w.block_until_ready()
print("memory_stats", jax.devices()[0].memory_stats())
PY
    rc=$?
    check "JAX CPU profile recorded" test $rc -eq 0
    check "JAX's CPU client has no memory_stats()" grep -q "^memory_stats None" "$T/py.out"
    out=$("$HBM" view "$T/prof" 2>&1); rc=$?
    check "CPU profile: exit 0" test $rc -eq 0
    check "CPU profile: no memory profile, said" grep -q "no memory profile: the host plane ('/host:CPU') records no MemoryAllocation" <<<"$out"
    check "CPU profile: its modules shown" grep -q "^Memory Viewer: jit__lambda" <<<"$out"
else
    echo "skip: no Python with JAX (HBM_PYTHON) for the CPU profile"
fi
exit $fail
