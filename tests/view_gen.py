#!/usr/bin/env python3
"""view_gen.py OUTDIR - a random PyTorch snapshot with tagged allocations (OUTDIR/in.pickle)
and what a view of it must show (OUTDIR/expect.json): peak bytes, the event of the peak,
the buffers live there (largest first) and totals by op at the peak."""
import json
import pickle
import random
import sys

out = sys.argv[1]
rng = random.Random(5)
ops = [("attention", "f32[8,128,128]"), ("mlp.fc1", "bf16[4096,1024]"), ("embedding", "f32[50000,512]"),
       ("layernorm", "f32[1024]"), ("adam.m", "f32[1024,1024]")]
live, tr, t, cur, peak, peak_ev, peak_set = {}, [], 0, 0, -1, 0, None
addr = 0x7f0000000000
for i in range(3000):
    t += 7
    if live and rng.random() < 0.47:
        a = rng.choice(sorted(live))
        sz, _ = live.pop(a)
        cur -= sz
        tr.append({"action": "free_completed", "addr": a, "size": sz, "stream": 0, "time_us": t, "frames": []})
    else:
        k = rng.randrange(len(ops))
        sz = 512 * rng.randrange(1, 2000)
        live[addr] = (sz, k)
        cur += sz
        tr.append({"action": "alloc", "addr": addr, "size": sz, "stream": 0, "time_us": t,
                   "frames": [{"filename": "model.py", "line": 10 * (k + 1), "name": ops[k][0]}]})
        if cur > peak:
            peak, peak_ev, peak_set = cur, len(tr) - 1, dict(live)
        addr += sz
pickle.dump({"segments": [], "device_traces": [tr]}, open(out + "/in.pickle", "wb"), protocol=4)
by_op = {}
for sz, k in peak_set.values():
    by_op[ops[k][0]] = by_op.get(ops[k][0], 0) + sz
json.dump({"peak": peak, "peak_event": peak_ev, "live_at_peak": len(peak_set),
           "sizes": sorted((v[0] for v in peak_set.values()), reverse=True), "by_op": by_op},
          open(out + "/expect.json", "w"))
