#!/usr/bin/env bash
# test_torch_roundtrip.sh - hbm's torch export as PyTorch's own reader sees it
# (torch.cuda._memory_viz, the `stats` and `trace` commands; tests/torch_viz_check.py):
#   - every shared snapshot and hbm's export of it print the same figures;
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
