#!/bin/bash
# test_papercuts.sh - what a new user tripped over (issue 41, third round), end to end: each
# check names its item. Checks on the shared data are skipped, said so, when it is absent.
# usage: bash test_papercuts.sh <path-to-hbm> <shared-data-dir>
set -u
. "$(dirname "$0")/lib.sh" "$@"
fail=0
check() { # name, condition command...
    local name=$1; shift
    if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; fi
}
has() { grep -qF -- "$1" <<<"$2"; }
SNAP=${DATA:+$DATA/snapshots}
XPROF=${DATA:+$DATA/xprof/rocm_te_fused_attn.xplane.pb}

# 1: --alignment takes powers of two up to 1GiB; past it, exit 2 naming the limit
out=$("$HBM" plan "$SRC/examples/svd_fixed.hlo" --alignment 9223372036854775808 2>&1); rc=$?
check "1: alignment 2^63: exit 2" test $rc -eq 2
check "1: alignment 2^63: too large, the limit named" \
  has "--alignment '9223372036854775808': too large: at most 1073741824 bytes (1.00GiB)" "$out"
out=$("$HBM" plan "$SRC/examples/svd_fixed.hlo" --alignment 1TiB 2>&1); rc=$?
check "1: alignment 1TiB: exit 2" test $rc -eq 2
check "1: alignment 1TiB: too large" has "too large: at most 1073741824 bytes" "$out"
out=$("$HBM" plan "$SRC/examples/svd_fixed.hlo" --alignment 384 2>&1); rc=$?
check "1: alignment 384: exit 2" test $rc -eq 2
check "1: alignment 384: a power of two up to the limit" has "expected a power of two from 1 to 1.00GiB" "$out"
out=$("$HBM" plan "$SRC/examples/svd_fixed.hlo" --alignment 1GiB 2>&1); rc=$?
check "1: alignment 1GiB (the limit): accepted" test $rc -eq 0

# 14: too large sizes and timeouts say so, with the limit
out=$("$HBM" plan "$SRC/examples/svd_fixed.hlo" --capacity 99999999999999TiB 2>&1); rc=$?
check "14: capacity past 64 bits: exit 2" test $rc -eq 2
check "14: capacity past 64 bits: too large, the limit" \
  has "--capacity '99999999999999TiB': too large: at most 2^64 - 1 bytes (16.00EiB)" "$out"
check "14: capacity: not 'expected a size > 0'" bash -c '! grep -q "size > 0" <<<"$1"' _ "$out"
out=$("$HBM" plan "$SRC/examples/svd_fixed.hlo" --pack greedy --timeout 1e308 2>&1); rc=$?
check "14: timeout 1e308: exit 2" test $rc -eq 2
check "14: timeout 1e308: too large, the limit" has "--timeout '1e308': too large: at most 1000000000" "$out"
out=$("$HBM" fit "$SRC/examples/svd_oom.hlo" --capacity 16GiB --timeout 1e999 2>&1); rc=$?
check "14: fit timeout past a double: too large" has "--timeout '1e999': too large: at most 1000000" "$out"
out=$("$HBM" plan "$SRC/examples/svd_fixed.hlo" --pack greedy --timeout 0 2>&1); rc=$?
check "14: timeout 0: still 'seconds > 0'" has "expected seconds > 0" "$out"

# 15: PYTORCH_CUDA_ALLOC_CONF errors name the key and what PyTorch accepts for it
out=$(PYTORCH_CUDA_ALLOC_CONF=roundup_power2_divisions:3 "$HBM" config 2>&1); rc=$?
check "15: roundup_power2_divisions:3: exit 2" test $rc -eq 2
check "15: the key and the value named" has "PYTORCH_CUDA_ALLOC_CONF: roundup_power2_divisions:3 is not valid" "$out"
check "15: what PyTorch accepts" has "PyTorch accepts a power of 2" "$out"

# 17: PYTORCH_CUDA_ALLOC_CONF alone under another allocator: a note that its keys act only
# under allocator=torch
out=$(env -u HBM_ALLOCATOR -u HBM_CONFIG PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "$HBM" config 2>&1); rc=$?
check "17: config: exit 0" test $rc -eq 0
check "17: the note, with the allocator and fraction in use" \
  has "note: PYTORCH_CUDA_ALLOC_CONF sets the settings of allocator=torch (PyTorch's caching allocator: expandable_segments, max_split_size_mb, ...), which act only under it; the allocator here is bfc (default), with fraction 0.75 (JAX's default)" "$out"
out=$(env -u HBM_CONFIG HBM_ALLOCATOR=torch PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "$HBM" config 2>&1)
check "17: under allocator=torch: no note" bash -c '! grep -q "^note: PYTORCH" <<<"$1"' _ "$out"
out=$(env -u HBM_ALLOCATOR -u HBM_CONFIG PYTORCH_CUDA_ALLOC_CONF=backend:native,expandable_segments:True "$HBM" config 2>&1)
check "17: backend:native: no note" bash -c '! grep -q "^note: PYTORCH" <<<"$1"' _ "$out"

# 20: a directory gets one wording from every command that reads profiles
mkdir "$T/nodir"
H=$(cd "$(dirname "$HBM")" && pwd)/$(basename "$HBM") # (run from $T)
want="nodir is a directory without a profile (no plugins/profile/RUN/*.xplane.pb, no *.xplane.pb in it)"
for c in plan view replay diff export fit; do
  case $c in
    diff) out=$(cd "$T" && "$H" diff nodir nodir 2>&1); rc=$? ;;
    export) out=$(cd "$T" && "$H" export nodir --format perfetto -o x.json 2>&1); rc=$? ;;
    fit) out=$(cd "$T" && "$H" fit nodir --capacity 1GiB 2>&1); rc=$? ;;
    *) out=$(cd "$T" && "$H" $c nodir 2>&1); rc=$? ;;
  esac
  check "20: $c DIR: exit 2" test $rc -eq 2
  check "20: $c DIR: the one wording" has "hbm $c: invalid argument: $want" "$out"
done

# 5: a snapshot of older PyTorch keeps its blocks' stacks in history[].frames (and the size
# asked in history[].real_size)
cat >"$T/old.json" <<'EOF'
{"segments": [{"device": 0, "address": 139637976727552, "total_size": 2097152, "stream": 0, "segment_type": "small",
  "allocated_size": 1536, "active_size": 1536,
  "blocks": [
   {"size": 1024, "state": "active_allocated",
    "history": [{"addr": 139637976727552, "real_size": 1000,
                 "frames": [{"filename": "/usr/lib/python3/site-packages/torch/nn/modules/linear.py", "line": 114, "name": "forward"},
                            {"filename": "flexgen/flex_opt.py", "line": 321, "name": "init_weight"}]}]},
   {"size": 512, "state": "active_allocated",
    "history": [{"addr": 139637976728576, "real_size": 4, "frames": [{"filename": "flexgen/flex_opt.py", "line": 650, "name": "generate"}]}]},
   {"size": 2095616, "state": "inactive"}]}]}
EOF
out=$("$HBM" view "$T/old.json" 2>&1); rc=$?
check "5: old snapshot: exit 0" test $rc -eq 0
check "5: the first block's op and source from history[].frames" \
  grep -qE "^ +0 +1000B .* init_weight +flexgen/flex_opt.py:321 " <<<"$out"
check "5: the second block's" grep -qE "^ +1 +4B .* generate +flexgen/flex_opt.py:650 " <<<"$out"
check "5: nothing untagged" bash -c '! grep -q "(untagged)" <<<"$1"' _ "$out"

# 10: two figures whose rounded forms print the same are printed in bytes
cat >"$T/over.json" <<'EOF'
{"segments": [], "device_traces": [[
 {"action": "segment_alloc", "addr": 1099511627776, "size": 1073741824, "stream": 0, "frames": []},
 {"action": "alloc", "addr": 1099511627776, "size": 1073741824, "stream": 0, "frames": []},
 {"action": "alloc", "addr": 1100585369600, "size": 512, "stream": 0, "frames": []}]]}
EOF
out=$("$HBM" view "$T/over.json" 2>&1)
check "10: in use above reserved, both 1.00GiB: the bytes" \
  has "event 2 has 1073742336 B in use, above the 1073741824 B reserved" "$(tr '\n' ' ' <<<"$out" | tr -s ' ')"

# 4: diff groups sites by the path as the program knows it (two checkouts of one program),
# and two sites it must cut stay distinct
if command -v python3 >/dev/null; then
  python3 - "$T" <<'PY'
import json, sys
L = "/experiment_configuration_%s/src/models/layers.py"
def snap(root, big, layers):
    tr, a = [], 0x7f0000000000
    def al(sz, f, line):
        nonlocal a
        tr.append({"action": "alloc", "addr": a, "size": sz, "stream": 0,
                   "frames": [{"filename": f, "line": line, "name": "f"}]})
        a += sz
    al(big, root + "/hbm/_backends.py", 291)
    al(1 << 20, root + "/hbm/model.py", 5)
    al(2 << 20, root + "/venv/lib/python3.11/site-packages/transformers/llama.py", 40)
    al(layers, L % "A", 12)
    al(5 << 20, L % "B", 12)
    return {"segments": [], "device_traces": [tr]}
json.dump(snap("/root/code", 6 << 30, 3 << 20), open(sys.argv[1] + "/a.json", "w"))
json.dump(snap("/root/CS336-assignment2", (6 << 30) - (200 << 20), 4 << 20), open(sys.argv[1] + "/b.json", "w"))
PY
  out=$("$HBM" diff "$T/a.json" "$T/b.json" 2>&1); rc=$?
  check "4: diff: exit 0" test $rc -eq 0
  check "4: one site for both checkouts, the real change" grep -qE "^ +-200\.00MiB +6\.00GiB +5\.80GiB +f +_backends\.py:291$" <<<"$out"
  check "4: a package file from its package root" grep -qE " 2\.00MiB +2\.00MiB +f +transformers/llama\.py:40$" <<<"$out"
  check "4: 5 sites, not 8" has "(top 5 of 5)" "$out"
  check "4: two cut sites stay distinct" \
    test "$(grep -c "experiment_configuration_A" <<<"$out") $(grep -c "experiment_configuration_B" <<<"$out")" = "1 1"
else
  echo "skip 4: python3 is needed to write the snapshots"
fi

# 19: --suggest's table keeps its columns with long settings
if command -v python3 >/dev/null; then
  python3 - "$T" <<'PY'
import json, sys
st = {"max_split_size": 128 << 20, "garbage_collection_threshold": 0.6, "expandable_segments": True}
tr, a = [], 1 << 40
for i in range(30):
    tr.append({"action": "alloc", "addr": a + i * (64 << 20), "size": 32 << 20, "stream": 0, "frames": []})
for i in range(30):
    tr.append({"action": "free_completed", "addr": a + i * (64 << 20), "size": 32 << 20, "stream": 0, "frames": []})
json.dump({"segments": [], "device_traces": [tr], "allocator_settings": st}, open(sys.argv[1] + "/long.json", "w"))
PY
  out=$("$HBM" replay "$T/long.json" --suggest --device sim:8GiB 2>&1); rc=$?
  check "19: --suggest: exit 0" test $rc -eq 0
  table=$(sed -n '/OOMs  peak reserved  frag@peak$/,/^$/p' <<<"$out" | sed '/^$/d')
  check "19: the table: 11 lines" test "$(wc -l <<<"$table")" -eq 11
  check "19: every line of the table as wide as its title" \
    test "$(awk '{ print length($0) }' <<<"$table" | sort -u | wc -l)" -eq 1
  check "19: the title names the variable the rows drop" grep -q "^PYTORCH_CUDA_ALLOC_CONF= .*OOMs" <<<"$table"
  check "19: a cut setting given whole below" \
    has "  (recorded: expandable_segments=true,max_split_size_mb=128,garbage_collection_threshold=0.6)" "$out"
else
  echo "skip 19: python3 is needed to write the snapshot"
fi

# 21: the torch export writes back the allocator_settings (PyTorch's defaults too) and the
# external_annotations it read
if command -v python3 >/dev/null; then
  python3 - "$T" <<'PY'
import json, sys
st = {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1, "garbage_collection_threshold": 0.0,
      "expandable_segments": False, "release_lock_on_cudamalloc": False,
      "roundup_power2_divisions": {str(1 << i): 0 for i in range(16)}}
ann = [{"stage": "START", "name": "step 1", "device": 0, "time_us": 10},
       {"stage": "END", "name": "step 1", "device": 0, "time_us": 20}]
tr = [{"action": "alloc", "addr": 1 << 40, "size": 4096, "stream": 0, "time_us": 12, "frames": []},
      {"action": "free_completed", "addr": 1 << 40, "size": 4096, "stream": 0, "time_us": 18, "frames": []}]
json.dump({"segments": [], "device_traces": [tr], "allocator_settings": st, "external_annotations": ann},
          open(sys.argv[1] + "/keys.json", "w"))
PY
  "$HBM" export "$T/keys.json" --format torch -o "$T/keys.pickle" >/dev/null 2>&1; rc=$?
  check "21: export: exit 0" test $rc -eq 0
  check "21: allocator_settings and external_annotations kept as they were" python3 -c '
import json, pickle, sys
a, b = json.load(open(sys.argv[1])), pickle.load(open(sys.argv[2], "rb"))
for k in ("allocator_settings", "external_annotations"):
    assert b.get(k) == a[k], (k, b.get(k))' "$T/keys.json" "$T/keys.pickle"
  "$HBM" export "$T/keys.pickle" --format torch -o "$T/keys2.pickle" >/dev/null 2>&1
  check "21: exported again, the same file" cmp -s "$T/keys.pickle" "$T/keys2.pickle"
else
  echo "skip 21: python3 is needed to write the snapshot"
fi

# 13: --width 0 means no limit in view as in plan and fit: a sparkline column per event
if command -v python3 >/dev/null; then
  python3 - "$T" <<'PY'
import json, sys
tr = [{"action": "alloc", "addr": (1 << 40) + i * 4096, "size": 4096, "stream": 0, "frames": []} for i in range(100)]
json.dump({"segments": [], "device_traces": [tr]}, open(sys.argv[1] + "/w100.json", "w"))
PY
  out=$("$HBM" view "$T/w100.json" --width 0 --ascii 2>&1); rc=$?
  check "13: view --width 0: exit 0" test $rc -eq 0
  check "13: view --width 0: a column per event (100)" \
    test "$(awk '$1 == "in" && $2 == "use" { print length($3) }' <<<"$out")" = 100
  out=$("$HBM" view "$T/w100.json" --width 7 2>&1); rc=$?
  check "13: view --width 7: exit 2" test $rc -eq 2
  check "13: view --width 7: the words plan and fit use" has "--width '7': expected columns: 0 (no limit) or 8 to 1000" "$out"
else
  echo "skip 13: python3 is needed to write the snapshot"
fi
out=$("$HBM" view "$SRC/examples/svd_fixed.hlo" --width 0 --ascii 2>&1); rc=$?
check "13: view MODULE --width 0: exit 0" test $rc -eq 0
check "13: view MODULE --width 0: a chart column per step (10)" grep -qE "^ +\+-{10}$|^ +\+[-^]{10}$" <<<"$out"

# 16: a capacity given in bytes: the verdict names the device by its size, said once
out=$("$HBM" plan "$SRC/examples/svd_fixed.hlo" --capacity 1 2>&1); rc=$?
check "16: capacity 1: exit 1" test $rc -eq 1
check "16: capacity 1: 'a device of 1B'" has "Verdict for a device of 1B:" "$out"
check "16: capacity 1: not 'a 1 device (1B)'" bash -c '! grep -q "a 1 device" <<<"$1"' _ "$out"
out=$("$HBM" plan "$SRC/examples/svd_fixed.hlo" --capacity 80GB 2>&1)
check "16: capacity 80GB: in the report's units" has "Verdict for a device of 74.50GiB:" "$out"
out=$("$HBM" plan "$SRC/examples/svd_fixed.hlo" --device V100-16GB 2>&1)
check "16: a known device: its name and size" has "Verdict for V100-16GB (16.00GiB):" "$out"

# 18: in plan's explanation the list of the peak's buffers follows the colon that introduces
# it, with where the step is (inside a loop body) said before the colon
after_colon() { # the line after the peak line's colon
  awk '/^  Peak of live bytes:/ { p = 1 } p && /:$/ { getline; print; exit }' <<<"$1"
}
for f in fit_scan_train svd_fixed; do
  out=$("$HBM" plan "$SRC/examples/$f.hlo" 2>&1)
  check "18: $f: the buffer list right after the colon" \
    grep -qE "^ +[0-9.]+[KMGTPE]?i?B +[0-9.]+%  " <<<"$(after_colon "$out")"
done
cat >"$T/tiled.hlo" <<'EOF'
HloModule m, is_scheduled=true
ENTRY e {
  p = f32[100,100]{1,0:T(8,128)} parameter(0)
  a = f32[100,100]{1,0:T(8,128)} exponential(p)
  ROOT n = f32[100,100]{1,0:T(8,128)} add(a, p)
}
EOF
out=$("$HBM" plan "$T/tiled.hlo" --device TPU-v5e 2>&1)
check "18: tiled layouts: the padding line before the peak's, the list after its colon" \
  grep -qE "^ +[0-9.]+[KMGTPE]?i?B +[0-9.]+%  " <<<"$(after_colon "$out")"
check "18: tiled layouts: the padding line said" grep -q "^  Padding to tiled layouts: 38.8KiB of the 168.0KiB" <<<"$out"
out=$("$HBM" plan "$SRC/examples/fit_scan_train.hlo" 2>&1)
check "18: the step's loop body named before the colon" \
  has "    the step is inside %wide.wide.region_2.9.clone.clone (while body of while.3) < %main.11:" "$out"

# 9: XLA's "BufferAssignment OOM Debugging." heads the report only when it does not fit
for a in "" "--device A100-80GB"; do
  out=$("$HBM" plan "$SRC/examples/svd_fixed.hlo" $a 2>&1)
  check "9: svd_fixed ${a:-(no device)}: a neutral heading" \
    test "$(head -1 <<<"$out")" = "Buffer assignment (XLA's stats and peak buffers, as hbm computes them):"
  check "9: svd_fixed ${a:-(no device)}: not XLA's OOM heading" bash -c '! grep -q "OOM Debugging" <<<"$1"' _ "$out"
done
out=$("$HBM" plan "$SRC/examples/svd_oom.hlo" --device V100-16GB 2>&1)
check "9: svd_oom on a V100-16GB: XLA's heading" test "$(head -1 <<<"$out")" = "BufferAssignment OOM Debugging."
out=$("$HBM" plan "$SRC/examples/svd_fixed.hlo" --capacity 600MiB 2>&1)
check "9: past the framework's limit (75 % of 600MiB): XLA's heading" \
  test "$(head -1 <<<"$out")" = "BufferAssignment OOM Debugging."

# 8: plan's JSON names the device need device_need_bytes (peak_bytes kept); total_bytes is
# XLA's total, host memory (S(5)) included; docs/plan.md's table names every key in bytes
cat >"$T/host.hlo" <<'EOF'
HloModule m, is_scheduled=true
ENTRY e {
  p = f32[1024]{0} parameter(0)
  h = f32[1024]{0:S(5)} parameter(1)
  a = f32[1024]{0:S(5)} copy(h)
  b = f32[1024]{0} copy(a)
  c = f32[1024]{0} add(p, b)
  d = f32[2048]{0:S(5)} concatenate(a, a), dimensions={0}
  ROOT t = (f32[1024]{0}, f32[2048]{0:S(5)}) tuple(c, d)
}
EOF
out=$("$HBM" plan "$T/host.hlo" --json 2>&1); rc=$?
check "8: plan --json with host offload: exit 0" test $rc -eq 0
check "8: device_need_bytes: the device figure" grep -q '"device_need_bytes": 8208,' <<<"$out"
check "8: peak_bytes kept, the same figure" grep -q '"peak_bytes": 8208,' <<<"$out"
check "8: total_bytes kept: XLA's total, host memory in it" grep -q '"total_bytes": 24592,' <<<"$out"
if command -v python3 >/dev/null; then
  check "8: every *_bytes key of plan --json in docs/plan.md's table" python3 -c '
import json, re, sys
keys = [k for k in json.loads(sys.argv[1]) if k.endswith("bytes")]
doc = open(sys.argv[2]).read()
rows = [l for l in doc.splitlines() if l.startswith("| `")]
missing = [k for k in keys if not any("`%s`" % k in r for r in rows)]
assert not missing and "device_need_bytes" in keys, missing' "$out" "$SRC/docs/plan.md"
fi

# 12: a module before XLA's passes (torch_xla's SyncTensorsGraph, for Neuron or any other
# device) is not XLA:CPU's for its unfused ops: the backend is said to be unknown, and what an
# unoptimized module's figure means
cat >"$T/SyncTensorsGraph.12.hlo" <<'EOF'
HloModule SyncTensorsGraph.12, entry_computation_layout={(f32[1024,1024]{1,0}, f32[1024,1024]{1,0})->(f32[1024,1024]{1,0})}

ENTRY %SyncTensorsGraph.12 (p0.1: f32[1024,1024], p1.2: f32[1024,1024]) -> (f32[1024,1024]) {
  %p0.1 = f32[1024,1024]{1,0} parameter(0)
  %p1.2 = f32[1024,1024]{1,0} parameter(1)
  %dot.3 = f32[1024,1024]{1,0} dot(f32[1024,1024]{1,0} %p0.1, f32[1024,1024]{1,0} %p1.2), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %tanh.4 = f32[1024,1024]{1,0} tanh(f32[1024,1024]{1,0} %dot.3)
  ROOT %tuple.5 = (f32[1024,1024]{1,0}) tuple(f32[1024,1024]{1,0} %tanh.4)
}
EOF
out=$("$HBM" plan "$T/SyncTensorsGraph.12.hlo" --device A100-80GB 2>&1); rc=$?
flat=$(tr '\n' ' ' <<<"$out" | tr -s ' ')
check "12: unoptimized module: exit 0" test $rc -eq 0
check "12: not XLA:CPU for unfused ops" bash -c '! grep -q "Rules: XLA:CPU" <<<"$1"' _ "$out"
check "12: the backend unknown, the module not optimized" \
  has "(assumed: the backend is unknown, nothing in the module says which XLA compiler will compile it, and the module is not optimized;" "$flat"
check "12: what the figure means" \
  has "Not optimized, so an estimate: the arguments and outputs follow from the entry's signature, but temp counts every intermediate of the unfused module" "$flat"
out=$("$HBM" plan "$T/SyncTensorsGraph.12.hlo" --json 2>&1)
check "12: JSON: backend assumed" grep -q '"backend_from": "assumed"' <<<"$out"

if [ -n "$DATA" ] && [ -e "$XPROF" ]; then
  # 3: a module name that several programs share: exit 2, each listed with its id
  out=$("$HBM" plan "$XPROF" --module jit__normal 2>&1); rc=$?
  check "3: two programs named jit__normal: exit 2" test $rc -eq 2
  check "3: both listed with their program ids" \
    has "2 modules are called 'jit__normal': 'jit__normal(5)' (program id 5), 'jit__normal(13)' (program id 13)" "$out"
  out=$("$HBM" plan "$XPROF" --module jit_loss_fn 2>&1); rc=$?
  check "3: a module name one program has: exit 0" test $rc -eq 0
else
  echo "skip 3: no shared profile at ${XPROF:-(no shared data)}"
fi

if [ -n "$DATA" ] && [ -d "$SNAP" ]; then
  # 11: --suggest on a snapshot without history
  out=$("$HBM" replay "$SNAP/kkaitlyn_segments_only.pickle" --suggest 2>&1); rc=$?
  check "11: --suggest without history: exit 2" test $rc -eq 2
  check "11: nothing to replay" has "has no allocation history (0 events): nothing to replay" "$out"
  check "11: no candidate table" bash -c '! grep -q "expandable_segments:True" <<<"$1"' _ "$out"
  # 7: PyTorch's words name the snapshot's device; the recorded line says what it counts
  out=$("$HBM" replay "$SNAP/constructor_sun.pickle" 2>/dev/null)
  check "7: a snapshot of cuda:1: GPU 1" has "Tried to allocate 4.95 GiB. GPU 1 has a total capacity of 78.51 GiB" "$out"
  check "7: the recorded line: reserved minus requested" \
    has "  PyTorch's peak reserved (event 420): 132.94MiB of it not requested, 0 segments" "$out"
else
  echo "skip 11: no shared snapshots at ${SNAP:-(no shared data)}"
fi

exit $fail
