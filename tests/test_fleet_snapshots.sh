#!/usr/bin/env bash
# test_fleet_snapshots.sh - the real snapshots of the shared data as the ranks of one fleet:
# each rank's figures in the fleet view equal `hbm view --json` of its file alone (a file
# with several devices: each device a rank, each equal to its entry in "devices"), its sites
# at the peak add up to view's totals by source line; 1 and 2 threads and the summaries of
# the files give the same fleet.
set -u
. "$(dirname "$0")/lib.sh" "$@"
need python3 "to compare the JSON"
need_data snapshots/ftcourse.pickle
S=$DATA/snapshots
"$HBM" view "$S"/*.pickle --json --jobs 2 --top 100000 >"$T/f2.json" || fail "fleet, 2 threads"
"$HBM" view "$S"/*.pickle --json --jobs 1 --top 100000 >"$T/f1.json" || fail "fleet, 1 thread"
cmp -s "$T/f1.json" "$T/f2.json" || fail "1 and 2 threads differ"
for p in "$S"/*.pickle; do
    "$HBM" view "$p" --json --top 0 >"$T/$(basename "$p").view.json" || fail "view $p"
done
python3 - "$T/f2.json" "$T" <<'PY' || fail "a rank's figures differ from hbm view --json of its file"
import json, os, sys
f, T = json.load(open(sys.argv[1])), sys.argv[2]
keys = ["device", "device_index", "events", "allocs", "frees", "ooms", "peak_bytes_in_use", "peak_event",
        "peak_bytes_reserved", "reserved_at_peak_bytes", "fragmentation_at_peak", "first_oom_event"]
assert f["failed"] == 0 and f["read"] == len(f["ranks"]), (f["failed"], f["read"])
by_path = {}
for r in f["ranks"]:
    by_path.setdefault(r["path"], []).append(r)
checked = 0
for path, ranks in by_path.items():
    v = json.load(open(os.path.join(T, os.path.basename(path) + ".view.json")))
    assert len(ranks) == len(v["devices"]), (path, len(ranks), len(v["devices"]))
    for r in ranks:
        d = [x for x in v["devices"] if x["device"] == r["device"]]
        assert len(d) == 1, (path, r["device"])
        for k in keys:
            assert r[k] == d[0][k], (path, r["device"], k, r[k], d[0][k])
        checked += 1
    first = [r for r in ranks if r["device"] == v["device"]][0]  # view's top level: the first device
    assert (first["live_at_peak"], first["live_at_peak_bytes"]) == (v["live_at_peak"], v["live_at_peak_bytes"]), path
    src = {}
    for s in first["sites"]:
        src[s["source"] or "(unknown)"] = src.get(s["source"] or "(unknown)", 0) + s["bytes"]
    want = {o["key"]: o["at_peak"] for o in v["by_source"] if o["at_peak"]}
    assert src == want, (path, sorted(set(src.items()) ^ set(want.items()))[:4])
    assert sum(s["bytes"] for s in first["sites"]) == v["live_at_peak_bytes"], path
print("ranks checked:", checked)
PY
for p in "$S"/*.pickle; do "$HBM" view "$p" --summary "$T/$(basename "$p").summary.json" 2>/dev/null || fail "summary of $p"; done
"$HBM" view "$T"/*.summary.json --json --top 100000 >"$T/s.json" || fail "fleet of the summaries"
cmp -s "$T/f2.json" "$T/s.json" || fail "the summaries' fleet differs from the snapshots'"
echo "ok"
