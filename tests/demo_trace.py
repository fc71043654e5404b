#!/usr/bin/env python3
"""demo_trace.py OUT.pickle - a PyTorch-shaped memory snapshot of one synthetic training
step of a 12-layer transformer (weights, forward activations kept for backward, temporaries,
gradients, Adam states), used for the picture in docs/view.png:
    python3 tests/demo_trace.py /tmp/step.pickle
    hbm view /tmp/step.pickle --html step.html --title "one training step"
"""
import pickle
import sys

MiB = 1 << 20
tr, t, addr, live = [], 0, 0x7F0000000000, {}


def fr(name, line):
    return [{"filename": "train.py", "line": line, "name": name}]


def alloc(size, name, line):
    global t, addr
    t += 5
    a = addr
    addr += size
    live[a] = size
    tr.append({"action": "alloc", "addr": a, "size": size, "stream": 0, "time_us": t, "frames": fr(name, line)})
    return a


def free(a):
    global t
    t += 5
    tr.append({"action": "free_completed", "addr": a, "size": live.pop(a), "stream": 0, "time_us": t, "frames": []})


L = 12
weights = [alloc(48 * MiB, "linear.weight", 20) for i in range(L)]
emb = alloc(96 * MiB, "embedding.weight", 18)
acts = []
for i in range(L):  # forward: activations stay for backward, temporaries die at once
    a1 = alloc(24 * MiB, "attention.softmax", 41)
    tmp = alloc(40 * MiB, "attention.qk_matmul", 40)
    a2 = alloc(32 * MiB, "mlp.gelu", 52)
    free(tmp)
    acts.append((a1, a2))
logits = alloc(120 * MiB, "lm_head.logits", 60)
grads = []
free(logits)
for i in reversed(range(L)):  # backward: activations die, gradients appear
    g = alloc(48 * MiB, "linear.weight.grad", 70)
    tmp = alloc(56 * MiB, "mlp.backward_matmul", 72)
    free(tmp)
    free(acts[i][1])
    free(acts[i][0])
    grads.append(g)
states = [alloc(96 * MiB, "adam.exp_avg", 90) for _ in range(L // 2)]  # optimizer
for g in grads:
    free(g)
pickle.dump({"segments": [], "device_traces": [tr]}, open(sys.argv[1], "wb"), protocol=4)
