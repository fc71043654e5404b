#!/usr/bin/env bash
# test_trace_device.sh HBM SHARED_DATA - the device of an hbm trace (docs/trace-format.md,
# "The device"): a trace that names none (as hbm run wrote them before it recorded its
# device) is replayed and viewed on hbm's default 80 GiB device, and the output says so;
# a bad device field is named (exit 2). hbm run's own traces: tests/test_run.sh.
set -u
. "$(dirname "$0")/lib.sh" "$@"
fails=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; [ -n "${2:-}" ] && echo "$2"; fails=$((fails+1)); }

# header: magic, version 3, size 32, capacity 0, flags 0; then alloc 1 KiB, free it
hdr='HBMTRACE\x03\x00\x00\x00\x20\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00'
evs='\x01\x00\x00\x80\x08\x00\x00\x01\x00\x00\x02\x01\x00\x80\x08\x00\x00\x01\x00\x00'
printf "$hdr$evs" > "$T/old.hbmt"
out=$("$HBM" view "$T/old.hbmt" 2>&1); rc=$?
[ "$rc" = 0 ] && grep -qx "device       simulated, 80.00GiB (default, the trace names no device)" <<<"$out" &&
  ok "old trace: view assumes 80 GiB and says why" || bad "old trace: view ($rc)" "$out"
out=$("$HBM" view "$T/old.hbmt" --json 2>&1)
grep -q '"device_bytes": 85899345920, "device_assumed": "default, the trace names no device"' <<<"$out" &&
  ok "old trace: view --json" || bad "old trace: view --json" "$out"
out=$("$HBM" replay "$T/old.hbmt" 2>&1); rc=$?
[ "$rc" = 0 ] && grep -q "^  on a simulated device of 80.00GiB (default, the trace names no device; --device sets another)$" <<<"$out" &&
  ok "old trace: replay on 80 GiB, says why" || bad "old trace: replay ($rc)" "$out"
out=$("$HBM" replay "$T/old.hbmt" --json 2>&1)
grep -q '"device": "sim:80GiB", "device_assumed": "default, the trace names no device"' <<<"$out" &&
  ok "old trace: replay --json" || bad "old trace: replay --json" "$out"
out=$("$HBM" replay "$T/old.hbmt" --device h100 2>&1)
grep -q "^  on H100-80GB (79.65GiB)$" <<<"$out" && ok "old trace: --device wins" || bad "old trace: --device" "$out"

# the recorder's trace (HBM_TRACE) of a run on sim:24GiB names that device
HBM_TRACE="$T/demo.hbmt" "$HBM" demo --device sim:24GiB >/dev/null 2>&1
out=$("$HBM" view "$T/demo.hbmt" 2>&1)
grep -qx "device       simulated, 24.00GiB (from the trace header)" <<<"$out" &&
  ok "recorder trace: view assumes its sim device" || bad "recorder trace: view" "$out"
out=$("$HBM" replay "$T/demo.hbmt" --allocators platform 2>&1)
grep -q "^  on a simulated device of 24.00GiB (from the trace header; --device sets another)$" <<<"$out" &&
  ok "recorder trace: replay on it" || bad "recorder trace: replay" "$out"

# a meta record device_bytes = "12x" (type 0x12, payload 23 bytes) before the events
meta='\x12\x00\x00\x00\x17\x00\x00\x00\x0c\x00\x00\x00device_bytes\x03\x00\x00\x0012x'
printf "$hdr$meta$evs" > "$T/bad.hbmt"
for cmd in view replay; do
  out=$("$HBM" $cmd "$T/bad.hbmt" 2>&1); rc=$?
  [ "$rc" = 2 ] && grep -q "bad.hbmt: byte offset 32: meta device_bytes '12x' is not the device's total bytes" <<<"$out" &&
    ok "bad device field: $cmd names it, exit 2" || bad "bad device field: $cmd ($rc)" "$out"
done
[ "$fails" = 0 ] || { echo "$fails failures"; exit 1; }
