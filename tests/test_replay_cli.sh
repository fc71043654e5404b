#!/usr/bin/env bash
# test_replay_cli.sh - hbm replay from the command line: table, JSON, errors.
set -u
. "$(dirname "$0")/lib.sh" "$@"
need python3 "to check the JSON"
cat > "$T/r.csv" <<'CSV'
Thread,Time,Action,Pointer,Size,Stream
1,1634567890.100000,allocate,0x7f0000000000,1073741824,0x0
1,1634567890.200000,allocate,0x7f0040000000,2147483648,0x0
2,1634567890.300000,free,0x7f0000000000,1073741824,0x0
1,1634567890.400000,allocate,0x7f0000000000,3221225472,0x0
CSV
# an OOM under a configuration is a negative verdict: exit 1, with the table
out=$("$HBM" replay "$T/r.csv" --allocators platform --device sim:4GiB); rc=$?
[ $rc -eq 1 ] || fail "replay with an OOM: exit $rc, want 1"
grep -q "allocator=platform" <<<"$out" || fail "no platform row: $out"
grep -q "event 3 (0.300000s): 3.00GiB" <<<"$out" || fail "first OOM not at event 3: $out"
grep -q "optimal packing bound *5.00GiB" <<<"$out" || fail "bound: $out"
"$HBM" replay "$T/r.csv" --device h100 --allocators platform --json > "$T/o.json" || fail "json exit"
python3 - "$T/o.json" <<'PY' || fail "JSON content"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["device"] == "sim:85520809984,name=H100-80GB", d["device"]
r = d["results"][0]
assert r["status"] == "HBM_OK" and r["first_oom"] is None, r
assert r["peak_bytes_in_use"] == 5 * 2**30, r
assert d["optimal_bound_bytes"] == 5 * 2**30
PY
# every policy with a sim twin, stream-ordered and virtual-memory ones included
"$HBM" replay "$T/r.csv" --allocators bfc,platform,cuda_async,vmm --device sim:8GiB --json > "$T/all.json" ||
  fail "four allocators exit $?"
python3 - "$T/all.json" <<'PY' || fail "four allocators: $(cat "$T/all.json")"
import json, sys
d = json.load(open(sys.argv[1]))
rs = d["results"]
assert [r["allocator"] for r in rs] == ["bfc", "platform", "cuda_async", "vmm"], rs
for r in rs:
    assert r["status"] == "HBM_OK" and r["first_oom"] is None, r
    assert r["peak_bytes_in_use"] == 5 * 2**30, r
    assert r["peak_bytes_reserved"] >= r["peak_bytes_in_use"], r
PY
"$HBM" replay "$T/r.csv" --fraction 2 >/dev/null 2>&1; [ $? -eq 2 ] || fail "--fraction 2 should be a usage error"
"$HBM" replay "$T/r.csv" --device tpu9 2>"$T/err" >/dev/null; [ $? -eq 2 ] || fail "bad device exit"
grep -q "tpu9" "$T/err" || fail "bad device message"
# one prefix, and no option replay lacks (it has no --capacity)
grep -q -- "--device: --device" "$T/err" && fail "bad device: doubled prefix: $(cat "$T/err")"
grep -q -- "--capacity" "$T/err" && fail "bad device: names --capacity, an option replay lacks: $(cat "$T/err")"
# bad configurations are refused before any replay: exit 2, no table
for bad in "--device sim:0" "--allocators foo" "--config bogus=1" "--allocators="; do
  # shellcheck disable=SC2086
  "$HBM" replay "$T/r.csv" $bad >"$T/out" 2>"$T/err"; rc=$?
  [ $rc -eq 2 ] || fail "replay $bad: exit $rc, want 2"
  [ -s "$T/out" ] && fail "replay $bad: printed a table: $(cat "$T/out")"
  [ "$(grep -c "^hbm replay: " "$T/err")" -eq 1 ] || fail "replay $bad: not one message: $(cat "$T/err")"
done
printf 'Thread,Time,Action,Pointer,Size,Stream\n1,xx,allocate,0x1,2,0x0\n' > "$T/bad.csv"
"$HBM" replay "$T/bad.csv" 2>"$T/err" >/dev/null; [ $? -eq 2 ] || fail "bad csv exit"
grep -q "bad.csv:2: Time" "$T/err" || fail "bad csv message: $(cat "$T/err")"
"$HBM" replay --help | grep -q "Example" || fail "help"
# a PyTorch snapshot with allocator=torch: what PyTorch did, and how closely the twin follows
SNAP="${2:-}/snapshots/silmont_small.pickle"
if [ -f "$SNAP" ]; then
  out=$("$HBM" replay "$SNAP" --allocators torch,platform) || fail "torch replay exit $?"
  # what PyTorch recorded is the table's first row, the twin's match the line after the table
  row=$(grep -A2 "^configuration" <<<"$out" | tail -2)
  grep -qE "^recorded \(PyTorch\) +3\.03GiB +3\.52GiB +- +9  none$" <<<"$row" || fail "recorded row: $out"
  grep -qE "^  PyTorch's peak reserved \(event 52\): 507\.37MiB of it not requested, 9 segments$" <<<"$row" || fail "recorded row: $out"
  # with no --allocators: the recorded row and allocator=torch, on the snapshot's peak reserved
  out=$("$HBM" replay "$SNAP") || fail "default replay exit $?"
  grep -q "^  on a simulated device of 3.52GiB (the snapshot's peak reserved; --device sets another)$" <<<"$out" || fail "default device: $out"
  [ "$(grep -cE "^(recorded \(PyTorch\)|allocator=)" <<<"$out")" = 2 ] || fail "default rows: $out"
  grep -q "^allocator=torch " <<<"$out" || fail "default torch row: $out"
  grep -q "sim:" <<<"$out" && fail "a device spec string in the text: $out"
  grep -q "segments 9/9 (100.0%), addresses 36/36 (100.0%)" <<<"$out" || fail "match line: $out"
  "$HBM" replay "$SNAP" --allocators torch --json > "$T/t.json" || fail "torch json exit"
  python3 - "$T/t.json" <<'PY' || fail "torch JSON: $(cat "$T/t.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["results"][0]["allocator"] == "torch", d
assert d["recorded"]["peak_bytes_reserved"] == 3781165056, d["recorded"]
assert d["recorded"]["oom"] is None
m = d["match"]["result"]
assert m["segments"] == [9, 9] and m["addresses"] == [36, 36], m
PY
  "$HBM" replay "$SNAP" --allocators bfc | grep -q "^recorded" && fail "recorded row without a torch twin"
else
  echo "(shared snapshots absent: torch replay not checked)"
fi
echo "ok"
