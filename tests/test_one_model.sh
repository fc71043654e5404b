#!/bin/bash
# test_one_model.sh HBM SHARED_DATA - every command that shows an HLO module's figures agrees
# with `hbm plan`, through the CLI (and Python's hbm.load / hbm.plan when python3 loads the
# library): the same peak of live bytes, at the same schedule step with its instruction, and
# the same buffers live there; no "event N" for a module. Spot checks on a few modules
# (tests/test_plan_model.c checks every module of the shared corpus through the library).
set -u
. "$(dirname "$0")/lib.sh" "$@"
need python3 "to read JSON"
bad=0
check() { local name=$1; shift; if "$@"; then echo "ok   $name"; else echo "FAIL $name"; bad=1; fi; }
mods=("$SRC/examples/svd_oom.hlo" "$SRC/examples/svd_fixed.hlo")
if [ -n "$DATA" ] && [ -d "$DATA/hlo/xladumps" ]; then
    mods+=("$DATA"/hlo/xladumps/lorraxsbx_module_0135.jit__right_ifft_mul_fft_b1822311.hlo)
    mods+=("$DATA"/hlo/tpu/qwen3_train_step.tpu_after_optimizations.hlo)
fi
lib=$(cd "$BUILD" && pwd)/libhbm.so
py=0
# (a sanitizer build's library needs its runtime preloaded into python3: test_python does that)
if [ -z "${HBM_SANITIZE:-}" ] && [ -e "$lib" ]; then
    HBM_LIBRARY="$lib" PYTHONPATH="$SRC/python" python3 -c 'import hbm; hbm._lib.get()' 2>/dev/null && py=1
fi
for m in "${mods[@]}"; do
    [ -f "$m" ] || continue
    b=$(basename "$m")
    "$HBM" plan --json "$m" >"$T/plan.json"
    "$HBM" view --json "$m" >"$T/view.json"
    "$HBM" replay --json "$m" >"$T/replay.json"
    "$HBM" diff --json "$m" "$m" >"$T/diff.json"
    "$HBM" export "$m" --format perfetto -o "$T/perfetto.json" 2>/dev/null
    "$HBM" replay "$m" >"$T/replay.txt"
    "$HBM" diff "$m" "$m" >"$T/diff.txt"
    if [ $py = 1 ]; then
        HBM_LIBRARY="$lib" PYTHONPATH="$SRC/python" python3 - "$m" "$T" <<'EOF'
import json, sys
import hbm
m, t = sys.argv[1], sys.argv[2]
tr = hbm.load(m)
json.dump({"view": tr.as_dict(top=1000), "report": tr.report(top=5), "plan": hbm.plan(m).as_dict()},
          open(t + "/py.json", "w"))
EOF
    else
        echo '{}' >"$T/py.json"
    fi
    out=$(python3 - "$T" <<'EOF'
import json, sys
t = sys.argv[1]
J = lambda n: json.load(open(t + "/" + n))
plan, view, replay, diff, pf, py = (J("plan.json"), J("view.json"), J("replay.json"), J("diff.json"),
                                    J("perfetto.json"), J("py.json"))
peak, step, name = plan["peak_live_bytes"], plan["peak_step"], plan["peak_instruction"]
where = {"peak_step": step, "peak_instruction": name}
bad = []
def same(what, got, want):
    if got != want: bad.append("%s: %r, plan %r" % (what, got, want))
dev = [s for s in view["memory_spaces"] if s["color"] == 0][0]
same("view --json peak heap", dev["peak_heap_bytes"], peak)
same("view --json total", dev["total_allocation_bytes"], plan["peak_bytes"])
same("view --json peak step", (dev["peak_step"], dev["peak_instruction"]), (step, name))
same("replay --json", {k: replay.get(k) for k in ("peak_live_bytes", "peak_step", "peak_instruction")},
     dict(where, peak_live_bytes=peak))
same("replay bound above the plan", replay["optimal_bound_bytes"] <= plan["peak_bytes"], True)
for side in ("a", "b"):
    same("diff --json " + side, {k: diff[side].get(k) for k in ("peak_bytes_in_use", "peak_step", "peak_instruction")},
         dict(where, peak_bytes_in_use=peak))
    same("diff --json %s: buffers at the peak sum to it" % side, diff[side]["live_at_peak_bytes"], peak)
inst = [e for e in pf["traceEvents"] if e["name"] == "peak of live bytes"]
same("export perfetto peak", [dict(i["args"]) for i in inst], [dict(where, bytes=peak)])
if py:
    v = py["view"]
    same("hbm.load", {k: v.get(k) for k in ("peak_bytes_in_use", "peak_step", "peak_instruction")},
         dict(where, peak_bytes_in_use=peak))
    same("hbm.load: buffers at the peak sum to it", sum(b["size"] for b in v["top"]), peak)
    # the Memory Viewer's buffers at the peak (size and lifetime in steps) are among hbm.load's,
    # and the rest of hbm.load's are the viewer's small ones, grouped
    mine = sorted((b["size"], b["start"], b["end"]) for b in v["top"])
    theirs = sorted((b["size"], b["start"], b["end"]) for b in dev["max_heap"])
    rest = list(mine)
    for x in theirs:
        if x in rest: rest.remove(x)
        else: bad.append("hbm.load has no buffer %r of the viewer's peak" % (x,))
    same("hbm.load: the others are the viewer's small buffers", (len(rest), sum(r[0] for r in rest)),
         (dev["small_count"], dev["small_bytes"]))
    same("hbm.load: every buffer at the peak lives at the step",
         all(b["start"] <= step < b["end"] for b in v["top"]), True)
    same("hbm.load report", ("at step %d (" % step) in py["report"], True)
    same("hbm.plan", (py["plan"]["peak_live_bytes"], py["plan"]["peak_step"]), (peak, step))
print("\n".join(bad))
EOF
)
    check "$b: every command's peak, step and instruction are hbm plan's" test -z "$out"
    [ -n "$out" ] && echo "$out"
    # the text forms count in steps, never in events, and fit 100 columns
    check "$b: replay names no event" bash -c '! grep -q "event [0-9]" "$1"' _ "$T/replay.txt"
    check "$b: replay's peak line" grep -qF "at step $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["peak_step"])' "$T/plan.json") (" "$T/replay.txt"
    check "$b: diff names no event" bash -c '! grep -q "event [0-9]" "$1"' _ "$T/diff.txt"
    check "$b: replay's and diff's positions fit 100 columns" \
        bash -c '! grep -h "step [0-9]" "$1" "$2" | awk "length > 100" | grep -q .' _ "$T/replay.txt" "$T/diff.txt"
done
# hbm.load(m).html(): the trace page of a module counts in steps too (headless Chromium)
CHROMIUM=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
m=$SRC/examples/svd_oom.hlo
if [ $py = 1 ] && [ -n "$CHROMIUM" ]; then
    HBM_LIBRARY="$lib" PYTHONPATH="$SRC/python" python3 -c 'import hbm, sys; hbm.load(sys.argv[1]).html(sys.argv[2])' \
        "$m" "$T/m.html"
    timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir="$T/profile" \
        --window-size=1280,1000 --virtual-time-budget=5000 --dump-dom "file://$T/m.html#selftest" >"$T/m.dom" 2>/dev/null
    want=$("$HBM" plan --json "$m" | python3 -c 'import json,sys; j=json.load(sys.stdin); print("step %d (%s)" % (j["peak_step"], j["peak_instruction"]))')
    check "page: the peak at the plan's step" grep -qF "Buffers live at the peak ($want)" "$T/m.dom"
    check "page: positions are schedule steps" grep -q "positions are schedule steps" "$T/m.dom"
    check "page: the axis counts steps" grep -Eq 'data-axis="step [0-9]' "$T/m.dom"
    check "page: self-test" bash -c 'grep -o "data-selftest=\"[^\"]*\"" "$1" | grep -q "pick:ok" && ! grep -o "data-selftest=\"[^\"]*\"" "$1" | grep -q bad' _ "$T/m.dom"
fi
[ $py = 1 ] || echo "note: python3 does not load $lib: hbm.load / hbm.plan not checked"
exit $bad
