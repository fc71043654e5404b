#!/usr/bin/env bash
# test_plan_view.sh - hbm view of an HLO module is XProf's Memory Viewer of its plan, with
# the plan's figures: the terminal form (<= 100 columns, no trace words), --json (the peak
# heap is the plan's peak_live_bytes, the total the plan's peak_bytes, the buffers at the
# peak sum to the peak), and the HTML page (hbm view --html = hbm plan --html) opened in
# headless Chromium: self-contained, its numbers read back from the DOM equal the JSON's,
# its self-test (sort by size, a buffer's lifetime on hover, the memory-space selector)
# passes, and a screenshot is drawn. The shared corpus's TPU module (several memory spaces)
# and largest GPU module are viewed too when present. Chromium missing: the HTML part skips.
set -u
. "$(dirname "$0")/lib.sh" "$@"
need python3
CHROMIUM=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
chrome() {
  timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync --disable-extensions \
    --user-data-dir="$T/profile" --window-size=1280,1600 --virtual-time-budget=5000 "$@" 2>>"$T/chromium.log"
}
check() { # check MODULE NAME
  local m=$1 n=$2
  "$HBM" view "$m" > "$T/$n.txt" || fail "$n: hbm view"
  grep -q '^Memory Viewer: ' "$T/$n.txt" || fail "$n: not the Memory Viewer"
  grep -q 'Memory Allocation Size vs. Program Order' "$T/$n.txt" || fail "$n: no program-order chart"
  grep -q 'HLO Ops at Peak Memory Allocation Time' "$T/$n.txt" || fail "$n: no ops at the peak"
  grep -Eq 'event [0-9]|device 0|segments' "$T/$n.txt" && fail "$n: the plan's view reads like a trace's"
  python3 - "$T/$n.txt" <<'PY' || fail "$n: a line is wider than 100 columns"
import sys
for i, l in enumerate(open(sys.argv[1], encoding='utf-8')):
    if len(l.rstrip('\n')) > 100: sys.exit('line %d: %d columns' % (i + 1, len(l)))
PY
  "$HBM" view "$m" --json > "$T/$n.json" || fail "$n: hbm view --json"
  "$HBM" plan "$m" --json > "$T/$n.plan.json" || fail "$n: hbm plan --json"
  python3 - "$T/$n.json" "$T/$n.plan.json" <<'PY' || fail "$n: the view's figures disagree"
import json, sys
v = json.load(open(sys.argv[1])); p = json.load(open(sys.argv[2]))
assert v['peak_bytes'] == p['peak_bytes']
spaces = v['memory_spaces']
for s in spaces:
    at = sum(b['size'] for b in s['max_heap']) + s['small_bytes']
    assert at == s['peak_heap_bytes'], (s['name'], at, s['peak_heap_bytes'])
    assert s['peak_heap_bytes'] <= s['total_allocation_bytes'], s['name']
    assert s['peak_unpadded_heap_bytes'] <= s['peak_heap_bytes']
    assert s['fragmentation_bytes'] == s['total_allocation_bytes'] - s['peak_heap_bytes']
    assert all(b['size'] >= v['small_buffer_size'] for b in s['max_heap'])
dev = [s for s in spaces if s['color'] == 0]
if len(spaces) == 1 and dev:
    assert dev[0]['total_allocation_bytes'] == p['peak_bytes'], (dev[0]['total_allocation_bytes'], p['peak_bytes'])
    assert dev[0]['peak_heap_bytes'] == p['peak_live_bytes']
    assert dev[0]['peak_step'] == p['peak_step'] and dev[0]['peak_instruction'] == p['peak_instruction']
PY
  [ -z "$CHROMIUM" ] && return 0
  "$HBM" view "$m" --html "$T/$n.html" 2>/dev/null || fail "$n: hbm view --html"
  "$HBM" plan "$m" --html "$T/$n.plan.html" >/dev/null 2>&1 || fail "$n: hbm plan --html"
  cmp -s "$T/$n.html" "$T/$n.plan.html" || fail "$n: hbm plan --html and hbm view --html differ"
  if grep -Eiq '<script[^>]+src=|<link |@import|url\(|<img |https?://' "$T/$n.html"; then
    fail "$n: the page refers to something outside itself"
  fi
  chrome --dump-dom "file://$T/$n.html#selftest" > "$T/$n.dom" || fail "$n: chromium --dump-dom"
  python3 - "$T/$n.dom" "$T/$n.json" <<'PY' || fail "$n: the page's numbers differ from the JSON"
import json, re, sys
dom = open(sys.argv[1]).read(); s = json.load(open(sys.argv[2]))['memory_spaces'][0]
body = re.search(r'<body[^>]*>', dom).group(0)
assert 'data-ready="1"' in body, 'the script did not finish'
st = re.search(r'data-selftest="([^"]*)"', body).group(1)
assert 'bad' not in st and 'bysize:ok' in st, st
if any(b['allocation_type'] == 'Temporary' for b in s['max_heap']): assert 'lifetime:ok' in st, st
def val(i): return int(re.search(r'id="%s"[^>]*data-bytes="(\d+)"' % i, dom).group(1))
for i, k in [('ov-total', 'total_allocation_bytes'), ('ov-peak', 'peak_heap_bytes'),
             ('ov-padding', 'padding_overhead_bytes'), ('ov-args', 'argument_bytes'),
             ('ov-temp', 'hlo_temp_bytes'), ('ov-temp-nofrag', 'hlo_temp_without_fragmentation_bytes'),
             ('ov-frag', 'fragmentation_bytes')]:
    assert val(i) == s[k], (i, val(i), s[k])
rows = re.findall(r'<tr data-size="(\d+)">', dom)
assert len(rows) == len(s['max_heap']), (len(rows), len(s['max_heap']))
assert sum(map(int, rows)) + s['small_bytes'] == s['peak_heap_bytes']
PY
  chrome --screenshot="$T/$n.png" "file://$T/$n.html#hover" >/dev/null || fail "$n: chromium --screenshot"
  [ "$(stat -c %s "$T/$n.png")" -gt 20000 ] || fail "$n: the screenshot looks blank"
  [ -n "${HBM_KEEP_SCREENSHOTS:-}" ] && cp "$T/$n.png" "$T/$n.html" "$HBM_KEEP_SCREENSHOTS/" 2>/dev/null
  return 0
}
check "$SRC/examples/svd_oom.hlo" svd
if [ -n "$DATA" ] && [ -d "$DATA/hlo/tpu" ]; then
  check "$DATA/hlo/tpu/qwen3_train_step.tpu_after_optimizations.hlo" tpu
  grep -q 'memory space S(1)' "$T/tpu.txt" || fail "tpu: no memory space S(1)"
  big=$(ls -S "$DATA"/hlo/xladumps/*.hlo | head -1)
  check "$big" largest
fi
[ -z "$CHROMIUM" ] && { echo "SKIP: chromium is not installed: the HTML page was not checked"; exit 77; }
echo "ok: hbm view of HLO modules (text, JSON, HTML)"
