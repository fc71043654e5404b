#!/usr/bin/env bash
# test_snapshots.sh - hbm view --json on the real PyTorch snapshots of ../shared/data/snapshots:
# every device with data, and its allocs, frees, OOMs, peak in use and peak reserved equal to
# what pytorch.org/memory_viz draws (truth.csv; the state before the history counted as
# memory_viz counts it). Also: every device listed, --device-index picks one, the text fits
# 100 columns, and a snapshot without times says "event N" and no seconds.
set -u
. "$(dirname "$0")/lib.sh" "$@"
DATA=${2:-}/snapshots
[ -f "$DATA/truth.csv" ] || skip "no shared snapshots at $DATA"
need python3 "to compare JSON"
fail=0
mkdir -p "$T/export"
for f in "$DATA"/*.pickle; do
    b=$(basename "$f" .pickle)
    "$HBM" view "$f" --json >"$T/$b.json" || { echo "FAIL view --json $f"; fail=1; }
    # the torch export round-trips: the same figures from it, and the same file when exported again
    "$HBM" export "$f" --format torch -o "$T/export/$b.pickle" || { echo "FAIL export $f"; fail=1; }
    "$HBM" view "$T/export/$b.pickle" --json >"$T/export/$b.json" || { echo "FAIL view of the export of $f"; fail=1; }
    "$HBM" export "$T/export/$b.pickle" --format torch -o "$T/export/$b.again" || { echo "FAIL re-export $f"; fail=1; }
    cmp -s "$T/export/$b.pickle" "$T/export/$b.again" || { echo "FAIL $b: export -> import -> export differs"; fail=1; }
done
for dir in "$T" "$T/export"; do
python3 - "$DATA/truth.csv" "$dir" <<'PY' || fail=1
import csv, json, os, sys
truth, d = sys.argv[1], sys.argv[2]
rows = list(csv.DictReader(open(truth)))
keys = ["allocs", "frees", "ooms", "peak_bytes_in_use", "peak_bytes_reserved"]
exact = bad = 0
seen = {}
for r in rows:
    j = json.load(open(os.path.join(d, r["snapshot"] + ".json")))
    devs = {x["device"]: x for x in j["devices"]}
    seen.setdefault(r["snapshot"], set()).add(r["device"])
    x = devs.get(r["device"])
    got = [x[k] for k in keys] if x else None
    want = [int(r[k]) for k in keys]
    if got == want:
        exact += 1
    else:
        bad += 1
        print("FAIL %s %s: got %s, memory_viz %s" % (r["snapshot"], r["device"], got, want))
for name, want in seen.items():
    j = json.load(open(os.path.join(d, name + ".json")))
    have = {x["device"] for x in j["devices"]}
    if have != want:
        bad += 1
        print("FAIL %s: devices %s, expected %s" % (name, sorted(have), sorted(want)))
print("%s: %d of %d device rows exact (allocs, frees, OOMs, peak in use, peak reserved)" %
      ("exported snapshots" if d.endswith("export") else "snapshots", exact, len(rows)))
sys.exit(1 if bad else 0)
PY
done
# the device with an OOM comes first; --device-index picks another and says which
f="$DATA/constructor_sun.pickle"
if [ -f "$f" ]; then
    out=$("$HBM" view "$f" --top 5 --ascii)
    head -2 <<<"$out" | grep -q "== device cuda:1 (1 of 3) ==" || { echo "FAIL OOM device first"; fail=1; }
    grep -q "OOM at event 421 (.*s): tried to allocate 4.94GiB; the device had 91.25MiB free" <<<"$out" ||
        { echo "FAIL OOM line"; fail=1; }
    long=$(awk 'length($0) > 100' <<<"$out" | wc -l)
    [ "$long" -eq 0 ] || { echo "FAIL $long lines over 100 columns"; fail=1; }
    "$HBM" view "$f" --device-index 2 | head -1 | grep -q "device cuda:2" || { echo "FAIL --device-index 2"; fail=1; }
    "$HBM" view "$f" --device-index 5 >/dev/null 2>"$T/err"; rc=$?
    [ $rc -eq 2 ] && grep -q "no device 5 in this file (it holds devices 1, 2, 0)" "$T/err" ||
        { echo "FAIL --device-index 5: rc $rc $(cat "$T/err")"; fail=1; }
fi
# replay: allocator=torch under the snapshot's recorded settings (expandable segments) runs out of
# memory where PyTorch did, at the OOM of cuda:1
f="$DATA/constructor_sun.pickle"
if [ -f "$f" ]; then
    out=$("$HBM" replay "$f" --allocators torch --device-index 1 --json 2>/dev/null)
    python3 -c '
import json, sys
d = json.loads(sys.argv[1]); r = d["results"][0]
assert r["config"] == "allocator=torch,expandable_segments=true", r["config"]
assert r["first_oom"]["event"] == 421 and r["first_oom"]["bytes"] == 5308694528, r["first_oom"]
assert r["peak_bytes_reserved"] == 84202749952, r["peak_bytes_reserved"]' "$out" || { echo "FAIL torch replay of cuda:1"; fail=1; }
fi
# no time_us in ftcourse: events, never seconds
f="$DATA/ftcourse.pickle"
if [ -f "$f" ]; then
    out=$("$HBM" view "$f")
    grep -q "peak in use  5.47GiB at event 3697; " <<<"$out" || { echo "FAIL event without time"; fail=1; }
    grep -q "before the history: 1.02GiB live in 622 blocks" <<<"$out" || { echo "FAIL live before"; fail=1; }
    ! grep -Eq "[0-9]s\)" <<<"$out" || { echo "FAIL a time printed for a snapshot without times"; fail=1; }
fi
[ $fail -eq 0 ] && echo "test_snapshots: ok"
exit $fail
