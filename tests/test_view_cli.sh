#!/usr/bin/env bash
# test_view.sh - hbm view in the terminal and as JSON, against figures Python computed for a
# random PyTorch snapshot.
set -u
. "$(dirname "$0")/lib.sh" "$@"
need python3 "to write the snapshot"
python3 "$SRC/tests/view_gen.py" "$T" || fail "generator"
"$HBM" view "$T/in.pickle" --json --top 1000 > "$T/v.json" || fail "view --json"
python3 - "$T/v.json" "$T/expect.json" <<'PY' || fail "JSON figures"
import json, sys
v, e = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert v["peak_bytes_in_use"] == e["peak"], (v["peak_bytes_in_use"], e["peak"])
assert v["peak_event"] == e["peak_event"], (v["peak_event"], e["peak_event"])
assert v["live_at_peak"] == e["live_at_peak"]
assert [b["size"] for b in v["top"]] == e["sizes"][:1000]
assert {o["key"]: o["at_peak"] for o in v["by_op"] if o["at_peak"]} == e["by_op"], (v["by_op"], e["by_op"])
assert v["top"][0]["source"].startswith("model.py:")
PY
out=$("$HBM" view "$T/in.pickle" --top 3 --width 40) || fail "view"
grep -q "^peak in use" <<<"$out" || fail "no peak line: $out"
grep -q "Top 3 of" <<<"$out" || fail "no top list"
grep -q "Totals by op" <<<"$out" || fail "no totals by op"
grep -q "Totals by source line" <<<"$out" || fail "no totals by line"
grep -q "model.py:" <<<"$out" || fail "no source lines"
grep -q "^  in use" <<<"$out" || fail "no sparkline"
"$HBM" view "$T/in.pickle" --ascii | grep -q "^  in use *[ .:=+*#@-]*@" || fail "ascii sparkline has no full column"
"$HBM" view "$T/in.pickle" --top x 2>/dev/null; [ $? -eq 2 ] || fail "--top x exit"
"$HBM" view "$T/missing" 2>/dev/null; [ $? -eq 2 ] || fail "missing file exit"
# escape characters in frame names and paths are made visible, never sent to the terminal
printf '%s' '{"device_traces": [[{"action": "alloc", "addr": 64, "size": 10, "frames": [{"filename": "a\u001b[31m.py", "line": 3, "name": "f\u001b]0;x\u0007"}]}]]}' >"$T/esc.json"
out=$("$HBM" view "$T/esc.json") || fail "view of a snapshot with escapes"
grep -qF 'a\x1b[31m.py:3' <<<"$out" || fail "escape in a path not shown as \\x1b: $out"
! grep -q $'\x1b' <<<"$out" || fail "a raw escape character reached the terminal"
# an HLO module is viewed as XProf's Memory Viewer of its plan
out=$("$HBM" view "$SRC/examples/svd_fixed.hlo") || fail "view of an HLO plan exit $?"
grep -q "Peak memory allocation    492.26MiB" <<<"$out" || fail "HLO plan peak: $out"
grep -q "custom-call.1{5} *f32\[69038144\]{0}" <<<"$out" || fail "HLO plan buffers: $out"
"$HBM" replay "$SRC/examples/svd_oom.hlo" --device v100-16gb --allocators platform | grep -q "first OOM\|OOM" ||
  fail "replay of the svd plan on a 16 GB device should run out of memory"
echo ok
