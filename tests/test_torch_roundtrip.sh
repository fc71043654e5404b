#!/usr/bin/env bash
# test_torch_roundtrip.sh - hbm's torch export as PyTorch's own reader sees it
# (torch.cuda._memory_viz, the `stats` and `trace` commands; tests/torch_viz_check.py):
#   - a small snapshot written here, and every shared snapshot, print the same as hbm's
#     export of it;
#   - exports of traces that are not snapshots (an hbm trace, an RMM log, an XProf memory
#     profile) open without an error, and their totals are hbm's: bytes in use at the end,
#     allocs, frees and OOMs.
# PyTorch (CPU build) comes from the test tier's environment (scripts/deps.sh test, pinned
# in python/requirements-test.txt); without it the test skips and says so. HBM_TORCH_PYTHON
# names another python3 that has it.
set -u
. "$(dirname "$0")/lib.sh" "$@"
venv=${HBM_VENV:-$SRC/build-py/venv}
py=""
for c in ${HBM_TORCH_PYTHON:-$venv/bin/python python3}; do
  if "$c" -c 'import torch.cuda._memory_viz' >/dev/null 2>&1; then py=$c; break; fi
done
[ -n "$py" ] || skip "no python3 with PyTorch (torch.cuda._memory_viz) in ${HBM_TORCH_PYTHON:-$venv or on PATH}: scripts/deps.sh test installs it"
check() { "$py" -W ignore "$SRC/tests/torch_viz_check.py" "$@" 2>"$T/py.err"; }

# traces that are not snapshots: the blocks are the PyTorch allocator twin's
cat > "$T/r.csv" <<'CSV'
Thread,Time,Action,Pointer,Size,Stream
1,1634567890.100000,allocate,0x7f0000000000,1000,0x0
1,1634567890.200000,allocate,0x7f0000100000,26214400,0x0
1,1634567890.300000,allocate,0x7f0002000000,4,0x0
2,1634567890.400000,free,0x7f0000000000,1000,0x0
1,1634567890.500000,allocate,0x7f0003000000,3145728,0x0
CSV
others=("$SRC/fuzz/corpus/fuzz_trace/recorded.hbmt" "$T/r.csv")
xprof=${DATA:+$DATA/xprof/rocm_te_fused_attn.xplane.pb} # an XProf memory profile (read with protobuf-c)
if [ -n "$xprof" ] && [ -e "$xprof" ] && "$HBM" view "$xprof" >/dev/null 2>&1; then others+=("$xprof")
else echo "note: no XProf memory profile read (${xprof:-no shared data}; protobuf-c absent?)"; fi
for f in "${others[@]}"; do
  b=$(basename "$f")
  "$HBM" export "$f" --format torch -o "$T/$b.pickle" 2>"$T/err" || fail "export $b: $(cat "$T/err")"
  "$HBM" export "$f" --format perfetto -o "$T/$b.perfetto" 2>"$T/err" || fail "export $b (perfetto): $(cat "$T/err")"
  "$HBM" view "$f" --json > "$T/$b.json" || fail "view $b"
  out=$(check --totals "$T/$b.json" "$T/$b.perfetto" "$T/$b.pickle") ||
    fail "memory_viz on the export of $b: $out $(tail -3 "$T/py.err")"
  echo "$out"
done
# the RMM log's blocks as PyTorch holds them: 1000 B in a 1024 B block (free now), 4 B in
# 512, 25 MiB in an unsplit 26 MiB block of a 26 MiB segment (PyTorch rounds a large
# request to 2 MiB), 3 MiB in a 20 MiB segment (requests under 10 MiB take 20 MiB)
"$py" -W ignore - "$T/r.csv.pickle" <<'PY' 2>"$T/py.err" || fail "RMM blocks: $(tail -3 "$T/py.err")"
import pickle, sys
d = pickle.load(open(sys.argv[1], "rb"))
got = sorted((s["total_size"], [(b["size"], b["state"], b["requested_size"]) for b in s["blocks"]]) for s in d["segments"])
want = [(2097152, [(1024, "inactive", 0), (512, "active_allocated", 4), (2095616, "inactive", 0)]),
        (20971520, [(3145728, "active_allocated", 3145728), (17825792, "inactive", 0)]),
        (27262976, [(27262976, "active_allocated", 26214400)])]
assert got == want, got
PY

# a small snapshot written here: a 4-byte request in a 512-byte block, 25 MiB in an unsplit
# 26 MiB block, an inactive block that keeps its requested_size, a block pending free, the
# entries' compile_context/user_metadata, a "snapshot" marker, a device with only a marker,
# a segment_map with its frames
"$py" -W ignore - "$T/small.pickle" <<'PY' 2>"$T/py.err" || fail "small snapshot: $(tail -3 "$T/py.err")"
import pickle, sys
fr = [{"name": "step", "filename": "train.py", "line": 7}, {"name": "<module>", "filename": "train.py", "line": 40}]
def blk(a, size, state, req, frames=fr):
    return {"address": a, "size": size, "requested_size": req, "state": state, "frames": frames}
def seg(a, total, blocks, expandable=False, stype="small"):
    act = [b for b in blocks if b["state"] != "inactive"]
    return {"device": 1, "address": a, "total_size": total, "stream": 0, "segment_type": stype,
            "segment_pool_id": (0, 0), "is_expandable": expandable, "frames": fr, "blocks": blocks,
            "allocated_size": sum(b["size"] for b in blocks if b["state"] == "active_allocated"),
            "active_size": sum(b["size"] for b in act), "requested_size": sum(b["requested_size"] for b in act)}
S, L = 0x7f0000000000, 0x7f0040000000
segs = [seg(S, 2 << 20, [blk(S, 512, "active_allocated", 4), blk(S + 512, 1024, "inactive", 1000, []),
                         blk(S + 1536, 512, "active_pending_free", 8), blk(S + 2048, (2 << 20) - 2048, "inactive", 0, [])]),
        seg(L, 26 << 20, [blk(L, 26 << 20, "active_allocated", 25 << 20)], True, "large")]
def ev(action, addr, size, t, **kw):
    e = {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": 1700000000000000 + t}
    e.update(kw)
    return e
cc = {"compile_context": "N/A", "user_metadata": ""}
hist = [ev("snapshot", 0, 0, 1),
        ev("segment_map", L, 26 << 20, 2, **cc, frames=fr),
        ev("alloc", L, 25 << 20, 3, **cc, frames=fr),
        ev("alloc", S, 4, 4, **cc, frames=fr),
        ev("alloc", S + 512, 1000, 5, **cc, frames=fr),
        ev("free_requested", S + 512, 1000, 6, **cc, frames=fr),
        ev("free_completed", S + 512, 1000, 7, **cc, frames=fr),
        ev("alloc", S + 1536, 8, 8, **cc, frames=fr),
        ev("free_requested", S + 1536, 8, 9, **cc, frames=fr)]
snap = {"segments": segs, "device_traces": [[ev("snapshot", 0, 0, 0)], hist],
        "allocator_settings": {"expandable_segments": True}}
pickle.dump(snap, open(sys.argv[1], "wb"), protocol=2)
PY
"$HBM" export "$T/small.pickle" --format torch -o "$T/small.out.pickle" 2>"$T/err" || fail "export small: $(cat "$T/err")"
out=$(check "$T/small.pickle" "$T/small.out.pickle") || fail "memory_viz differs on the small snapshot: $out"
echo "$out"

# every shared snapshot and its export
need_data snapshots
args=()
for s in "$DATA"/snapshots/*.pickle; do
  b=$(basename "$s" .pickle)
  "$HBM" export "$s" --format torch -o "$T/$b.pickle" 2>"$T/err" || fail "export $b: $(cat "$T/err")"
  args+=("$s" "$T/$b.pickle")
done
[ ${#args[@]} -ge 2 ] || skip "no snapshots in $DATA/snapshots"
out=$(check "${args[@]}"); rc=$?
echo "$out"
[ $rc = 0 ] || fail "memory_viz differs on an export: $(tail -3 "$T/py.err")"
echo "ok: memory_viz stats and trace equal on every shared snapshot and its export"
