#!/usr/bin/env bash
# test_import_torch.sh - PyTorch snapshots written by Python's own pickle (protocols 2, 3, 4,
# shared frame objects through the memo) and json, with random histories: hbm replay must
# see exactly the allocations Python counted and the same live-bytes peak.
set -u
. "$(dirname "$0")/lib.sh" "$@"
need python3 "to write the snapshots"
python3 - "$T" <<'PY' || { echo "FAIL: generator"; exit 1; }
import json, pickle, random, sys
out = sys.argv[1]
rng = random.Random(7)
frames = [[{"filename": "/site-packages/torch/nn/functional.py", "line": 10 + i, "name": "linear"},
           {"filename": "train.py", "line": 100 + i, "name": "layer%d" % i}] for i in range(5)]
live, trace, t, peak, cur, allocs = {}, [], 10**6, 0, 0, 0
next_addr = 0x7f0000000000
for i in range(3000):
    t += rng.randrange(1, 50)
    if live and rng.random() < 0.45:
        a = rng.choice(sorted(live))
        sz = live.pop(a)
        trace.append({"action": "free_requested", "addr": a, "size": sz, "stream": 0, "time_us": t, "frames": []})
        trace.append({"action": "free_completed", "addr": a, "size": sz, "stream": 0, "time_us": t, "frames": []})
        cur -= sz
    else:
        sz = 512 * rng.randrange(1, 4096)
        a = next_addr; next_addr += sz
        live[a] = sz; cur += sz; peak = max(peak, cur); allocs += 1
        trace.append({"action": "alloc", "addr": a, "size": sz, "stream": 0, "time_us": t,
                      "frames": frames[rng.randrange(5)]})
snap = {"segments": [], "device_traces": [trace, []]}
for p in (2, 3, 4):
    open("%s/s%d.pickle" % (out, p), "wb").write(pickle.dumps(snap, protocol=p))
open("%s/s.json" % out, "w").write(json.dumps(snap))
json.dump({"peak": peak, "allocs": allocs, "frees": allocs - len(live)}, open(out + "/expect.json", "w"))
PY
for f in s2.pickle s3.pickle s4.pickle s.json; do
  "$HBM" replay "$T/$f" --allocators platform --device sim:1TiB --json > "$T/$f.out" || { echo "FAIL: replay $f"; exit 1; }
  python3 - "$T/$f.out" "$T/expect.json" <<'PY' || { echo "FAIL: $f"; exit 1; }
import json, sys
got, want = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
r = got["results"][0]
assert r["allocs"] == want["allocs"], (r["allocs"], want)
assert r["frees"] == want["frees"], (r["frees"], want)
assert r["peak_bytes_in_use"] == want["peak"], (r["peak_bytes_in_use"], want)
assert got["optimal_bound_bytes"] == want["peak"], got
PY
done
echo ok
