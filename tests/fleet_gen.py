#!/usr/bin/env python3
"""fleet_gen.py OUTDIR - synthetic ranks of a pipeline-parallel job, as PyTorch snapshots
(JSON): three stages of four ranks each whose peaks in use differ by 5 % from stage to stage
(ranks of a stage within 0.3 % of each other), and one rank of the middle stage holding a
planted extra 25 % at planted.py:42. OUTDIR/expect.json: the stages, the outlier, and the
planted bytes, which the fleet view must find."""
import json
import random
import sys

out = sys.argv[1]
MIB = 1 << 20
rng = random.Random(39)
stages = [600, 630, 661]  # MiB of activations per stage at its peak (5 % apart)
planted_rank, planted = 5, 160 * MIB  # rank 5 (stage 1): +25 % over its stage's 630 MiB
expect = {"stages": [], "outlier": "rank%02d.json" % planted_rank, "planted_bytes": planted}
for r in range(12):
    stage = r // 4
    base = stages[stage] * MIB + rng.randrange(0, 2 * MIB)  # < 0.3 % noise
    ev, addr, t = [], 0x7f0000000000, 0
    def alloc(size, f, line, name):
        global addr, t
        t += 10
        ev.append({"action": "alloc", "addr": addr, "size": size, "stream": 0, "time_us": t,
                   "frames": [{"filename": f, "line": line, "name": name}]})
        addr += size
        return addr - size, size
    live = [alloc(64 * MIB, "model.py", 10, "weights")]
    acts = []
    left = base - 64 * MIB
    layer = 0
    while left > 0:  # activations of the stage's layers
        sz = min(left, 32 * MIB)
        acts.append(alloc(sz, "model.py", 20 + stage, "layer%d" % layer))
        left -= sz
        layer += 1
    if r == planted_rank:
        acts.append(alloc(planted, "planted.py", 42, "leak"))
    for a, sz in acts:  # the backward pass frees them
        t += 10
        ev.append({"action": "free_completed", "addr": a, "size": sz, "stream": 0, "time_us": t, "frames": []})
    json.dump({"segments": [], "device_traces": [ev]}, open("%s/rank%02d.json" % (out, r), "w"))
for s in range(3):
    expect["stages"].append(["rank%02d.json" % r for r in range(4 * s, 4 * s + 4) if r != planted_rank])
json.dump(expect, open(out + "/expect.json", "w"))
