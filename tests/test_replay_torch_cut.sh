#!/usr/bin/env bash
# test_replay_torch_cut.sh - the twin on histories that start mid-run as PyTorch's ring
# buffer cuts them (_record_memory_history(max_entries=N) keeps the last N entries): the
# expandable-segments snapshot's histories (constructor_sun, three devices) with their
# first K entries dropped, its segments (the end state) kept. The twin must start from the
# state rebuilt at the cut and follow PyTorch: the floors below are what it reaches (before
# the loader gave each expandable segment its own share of the bytes mapped before the
# history, every cut failed to seed: "seeded run ... is not whole 20971520-byte pages";
# then cuda:1 cut at 300 reached 9/11 and 46/54 while the seed split a free block where two
# runs touch, PyTorch holding one). Skips without the shared data.
set -u
. "$(dirname "$0")/lib.sh" "$@"
need python3 "to cut the histories"
need_data snapshots/constructor_sun.pickle
python3 - "$DATA/snapshots/constructor_sun.pickle" "$T" <<'PY' || fail "cutting the histories"
import pickle, sys
src, out = sys.argv[1], sys.argv[2]
d = pickle.load(open(src, "rb"))
for dev, cuts in ((0, (100, 1000, 3000, 5000)), (1, (100, 300)), (2, (100, 400))):
    for k in cuts:
        traces = list(d["device_traces"])
        traces[dev] = traces[dev][k:]
        pickle.dump(dict(d, device_traces=traces), open("%s/cut%d_%d.pickle" % (out, dev, k), "wb"), protocol=2)
PY
# device cut: segments-same segments-recorded addresses-same addresses-recorded (floors)
while read -r dev k ss sr as ar; do
    f=$T/cut${dev}_$k.pickle
    rc=0
    "$HBM" replay "$f" --device-index "$dev" --json >"$T/out.json" 2>"$T/err" || rc=$?
    [ "$rc" -le 1 ] || fail "cuda:$dev cut at $k: exit $rc: $(cat "$T/err")" # 1: a configuration runs out of memory
    got=$(python3 -c '
import json, sys
m = json.load(open(sys.argv[1])).get("match")
r = m["result"] if m else None
print(" ".join(map(str, r["segments"] + r["addresses"])) if r else "none")' "$T/out.json") || fail "cuda:$dev cut at $k: no JSON"
    echo "cuda:$dev cut at $k: segments and addresses $got (floor $ss $sr $as $ar)"
    set -- $got
    [ "$#" = 4 ] || fail "cuda:$dev cut at $k: the twin did not run ($(cat "$T/err"))"
    [ "$2" = "$sr" ] && [ "$4" = "$ar" ] || fail "cuda:$dev cut at $k: recorded $2 segment events and $4 allocations, expected $sr and $ar"
    [ "$1" -ge "$ss" ] && [ "$3" -ge "$as" ] || fail "cuda:$dev cut at $k: $1/$2 segment events, $3/$4 addresses, below $ss and $as"
done <<'EOF'
0 100 146 146 2363 2363
0 1000 65 65 1904 1904
0 3000 52 52 1223 1223
0 5000 40 40 588 588
1 100 31 31 144 144
1 300 11 11 54 54
2 100 63 63 337 337
2 400 33 33 203 203
EOF
echo "ok"
