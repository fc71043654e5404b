#!/usr/bin/env bash
# test_export.sh - every exporter's output read back by independent readers (Python's json,
# pickle, gzip, csv and a protobuf wire decoder in export_check.py), for a random history
# whose figures Python computes itself; then the torch export is imported back by hbm.
set -u
. "$(dirname "$0")/lib.sh" "$@"
need python3 "to read the exports back"
python3 - "$T" <<'PY' || fail "generator"
import json, pickle, random, sys
out = sys.argv[1]
rng = random.Random(11)
ops = ["attention", "mlp", "embedding"]
frames = [[{"filename": "model.py", "line": 10 * (i + 1), "name": ops[i]}] for i in range(3)]
live, tr, t, cur, peak, allocs, total, ooms = {}, [], 0, 0, 0, 0, 0, 0
addr = 0x7f0000000000
for i in range(2000):
    t += 3
    r = rng.random()
    if r < 0.01:
        tr.append({"action": "oom", "addr": 0, "size": 1 << 40, "stream": 0, "time_us": t, "frames": frames[0]})
        ooms += 1
    elif live and r < 0.45:
        a = rng.choice(sorted(live)); sz = live.pop(a); cur -= sz
        tr.append({"action": "free_completed", "addr": a, "size": sz, "stream": 0, "time_us": t, "frames": []})
    else:
        sz = 512 * rng.randrange(1, 1000); live[addr] = sz; cur += sz; total += sz; allocs += 1
        peak = max(peak, cur)
        tr.append({"action": "alloc", "addr": addr, "size": sz, "stream": 0, "time_us": t, "frames": frames[rng.randrange(3)]})
        addr += sz
pickle.dump({"segments": [], "device_traces": [tr]}, open(out + "/in.pickle", "wb"), protocol=4)
json.dump({"allocs": allocs, "alloc_bytes": total, "peak": peak, "live_end": len(live), "ooms": ooms,
           "buffers": allocs, "ops": ops}, open(out + "/expect.json", "w"))
PY
for f in perfetto pprof torch minimalloc; do
  "$HBM" export "$T/in.pickle" --format $f -o "$T/out.$f" || fail "export $f"
done
python3 "$SRC/tests/export_check.py" "$T/expect.json" "$T/out.perfetto" "$T/out.pprof" "$T/out.torch" "$T/out.minimalloc" || fail "read back"
# the torch export is a snapshot hbm reads again with the same history
"$HBM" export "$T/out.torch" --format torch -o "$T/again.torch" || fail "re-import"
cmp -s "$T/out.torch" "$T/again.torch" || fail "torch export -> import -> export differs"
# a recorded hbm trace with native backtraces: its frames become pprof locations with addresses
"$HBM" export "$SRC/fuzz/corpus/fuzz_trace/recorded.hbmt" --format pprof -o "$T/bt.pprof" || fail "export bt"
python3 - "$SRC/tests/export_check.py" "$T/bt.pprof" <<'PY' || fail "pprof with backtraces"
import gzip, sys
src = open(sys.argv[1]).read().split("def main():")[0]
exec(src)
msg = fields(gzip.open(sys.argv[2]).read())
locs = [fields(v) for f, w, v in msg if f == 4]
assert any(ff == 3 and vv > 0 for l in locs for ff, ww, vv in l), "no location with an address"
samples = [fields(v) for f, w, v in msg if f == 2]
allocs = sum(packed(vv)[0] for s in samples for ff, ww, vv in s if ff == 2)
assert allocs == 8, allocs  # the seed program allocates 8 blocks (and one fails)
PY
# usage errors
"$HBM" export "$T/in.pickle" --format svg -o "$T/x" 2>/dev/null; [ $? -eq 2 ] || fail "bad format exit"
"$HBM" export "$T/in.pickle" --format perfetto 2>/dev/null; [ $? -eq 2 ] || fail "missing -o exit"
"$HBM" export "$T/nope" --format perfetto -o "$T/x" 2>/dev/null; [ $? -eq 2 ] || fail "missing input exit"
"$HBM" export --help | grep -q "memory_viz" || fail "help"
echo ok
