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
                   "frames": [{"filename": "??", "line": 0, "name": "torch::unwind::unwind()"}, {"filename": "model.py", "line": 10 * (k + 1), "name": ops[k][0]}]})
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

# OUTDIR/multi.pickle: two devices (segments with their "device" keys), no time_us (events
# are numbered), blocks live before the history on each (held in the segments, never
# allocated by it), an OOM on cuda:1; OUTDIR/multi.json: what the page must show.
MIB = 1 << 20
segs, traces, want = [], [], []
for dev in range(2):
    r = random.Random(11 + dev)
    a_base, b_base = 0x7e0000000000 + dev * (1 << 40), 0x7e0040000000 + dev * (1 << 40)
    before = [(a_base, 4 * MIB), (a_base + 4 * MIB, 8 * MIB)]
    hist, live_b, bump = [{"action": "segment_alloc", "addr": b_base, "size": 32 * MIB, "stream": 0}], {}, b_base
    for i in range(120):
        if live_b and r.random() < 0.4:
            adr = r.choice(sorted(live_b))
            hist.append({"action": "free_completed", "addr": adr, "size": live_b.pop(adr), "stream": 0,
                         "frames": []})
        elif bump + 512 * 1024 <= b_base + 32 * MIB:
            sz = 64 * 1024 * r.randrange(1, 9)
            hist.append({"action": "alloc", "addr": bump, "size": sz, "stream": 0,
                         "frames": [{"filename": "train%d.py" % dev, "line": 7 + i % 5, "name": "step"}]})
            live_b[bump] = sz
            bump += sz
    if dev == 1:
        hist.append({"action": "oom", "addr": 0, "size": 64 * MIB, "stream": 0, "device_free": 3 * MIB, "frames": []})
    traces.append(hist)
    segs.append({"device": dev, "address": a_base, "total_size": 16 * MIB, "stream": 0, "segment_type": "large",
                 "blocks": [{"address": a, "size": s, "requested_size": s, "state": "active_allocated", "frames": []}
                            for a, s in before] +
                           [{"address": a_base + 12 * MIB, "size": 4 * MIB, "state": "inactive", "frames": []}]})
    segs.append({"device": dev, "address": b_base, "total_size": 32 * MIB, "stream": 0, "segment_type": "large",
                 "blocks": [{"address": a, "size": s, "requested_size": s, "state": "active_allocated", "frames": []}
                            for a, s in sorted(live_b.items())]})
    want.append({"device": "cuda:%d" % dev, "before_blocks": len(before), "before_bytes": sum(s for _, s in before)})
pickle.dump({"segments": segs, "device_traces": traces}, open(out + "/multi.pickle", "wb"), protocol=4)
json.dump({"devices": want}, open(out + "/multi.json", "w"))

# view_gen.py OUTDIR N: also OUTDIR/big.pickle, a history of N events (with times) whose
# allocations come from 5000 source lines, for the page's size and load time.
if len(sys.argv) > 2:
    n, r, live_b, hist, adr, tus = int(sys.argv[2]), random.Random(3), [], [], 1 << 40, 0
    for i in range(n):
        tus += 3
        if live_b and r.random() < 0.49:
            k = r.randrange(len(live_b))
            live_b[k], live_b[-1] = live_b[-1], live_b[k]
            a, s = live_b.pop()
            hist.append({"action": "free_completed", "addr": a, "size": s, "time_us": tus, "frames": []})
        else:
            s = 512 * r.randrange(1, 1 << r.randrange(1, 16))
            hist.append({"action": "alloc", "addr": adr, "size": s, "time_us": tus,
                         "frames": [{"filename": "big.py", "line": r.randrange(5000), "name": "f"}]})
            live_b.append((adr, s))
            adr += s
    pickle.dump({"segments": [], "device_traces": [hist]}, open(out + "/big.pickle", "wb"), protocol=4)
