#!/usr/bin/env bash
# test_view_html.sh - hbm view --html opened in headless Chromium: the page must be
# self-contained, its script must run (rows built in the DOM, one per buffer live at the
# peak), the timeline must draw its buffers as bands, hover and click must work (the page's
# #selftest drives them and reports), a multi-device snapshot must list every device and
# show segments at the picked event, what was live before the history must be drawn as such,
# a snapshot without times must say "event N" and no seconds, and a screenshot must show a
# drawn page, not a blank one. The real snapshots of the shared data are viewed too when
# present. Skips without chromium ('scripts/deps.sh test' installs Debian's package),
# except under CI (CI set) where it fails.
set -u
. "$(dirname "$0")/lib.sh" "$@"
CHROMIUM=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
if [ -z "$CHROMIUM" ]; then
  # CI installs it (.ci/run -> make test -> scripts/deps.sh test): missing there is a failure
  [ -n "${CI:-}" ] && { echo "FAIL: chromium is not installed under CI (scripts/deps.sh test installs it)"; exit 1; }
  echo "SKIP: chromium is not installed ('scripts/deps.sh test' installs Debian's package)"
  exit 77
fi
need python3
fail() { echo "FAIL: $*"; exit 1; }
python3 "$SRC/tests/view_gen.py" "$T" "${HBM_VIEW_HTML_EVENTS:-200000}" || fail "generator"
"$HBM" view "$T/in.pickle" --html "$T/v.html" 2>/dev/null || fail "view --html"
# self-contained: no external scripts, styles, images or fonts
if grep -Eiq '<script[^>]+src=|<link |@import|url\(|<img |https?://' "$T/v.html"; then
  fail "the page refers to something outside itself"
fi
# the whole stack of each band is in the page (hover shows it), the allocator's own frames left out
grep -q '"stacks": \[\[' "$T/v.html" || fail "no stacks in the page"
! grep -q 'torch::unwind::unwind' "$T/v.html" || fail "the unwinder's frame is shown in a stack"
chrome() {
  timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync --disable-extensions \
    --user-data-dir="$T/profile" --window-size=1280,1000 --virtual-time-budget=5000 "$@" 2>>"$T/chromium.log"
}
chrome --dump-dom "file://$T/v.html" > "$T/dom.html" || fail "chromium --dump-dom (log: $(tail -3 "$T/chromium.log"))"
grep -q 'data-ready="1"' "$T/dom.html" || fail "the page's script did not finish"
rows=$(grep -Eo '<tr class="buf-row" data-i="[0-9]+"' "$T/dom.html" | wc -l)
# the table shows 500 rows at first (a button adds more), the strip the 400 largest
live=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["live_at_peak"])' "$T/expect.json")
want=$((live < 500 ? live : 500))
[ "$rows" -eq "$want" ] || fail "$rows table rows, want $want"
blocks=$(grep -Eo '<div data-i="[0-9]+"' "$T/dom.html" | wc -l)
want=$((live < 400 ? live : 400))
[ "$blocks" -eq "$want" ] || fail "$blocks blocks, want $want"
grep -q 'Buffers live at the peak (event' "$T/dom.html" || fail "the blocks title was not filled in"
# interaction: the page's #selftest drives sort, zoom, reset, hover (a block, a band) and a
# click on the timeline (the peak's column: the segments there) through DOM events
body() { grep -o '<body[^>]*>' "$1"; }
attr() { grep -o " data-$2=\"[^\"]*\"" <<<"$1" | sed 's/.*="\(.*\)"/\1/'; }
selftest() { # selftest HTML NAME: the body tag of the #selftest run, every check ok
  chrome --dump-dom "file://$1#selftest" > "$T/$2.dom" || fail "$2: chromium --dump-dom #selftest"
  local b st
  b=$(body "$T/$2.dom")
  st=$(attr "$b" selftest)
  [ -n "$st" ] || fail "$2: no self-test result"
  grep -q bad <<<"$st" && fail "$2: self-test: $st"
  for k in $3; do grep -q "$k:ok" <<<"$st" || fail "$2: self-test $k missing: $st"; done
  echo "$b"
}
b=$(selftest "$T/v.html" v "sort-op sort-size zoom reset hover bands band-hover pick arrow") || { echo "$b"; exit 1; }
[ "$(attr "$b" bands)" -gt 10 ] || fail "only $(attr "$b" bands) bands drawn"
# this snapshot has times: the axis shows them
grep -Eq '[0-9]s(\||$)' <<<"$(attr "$b" axis)" || fail "no times on the axis of a timed trace: $(attr "$b" axis)"
# two devices, segments with "device" keys, blocks live before the history, no time_us
"$HBM" view "$T/multi.pickle" --html "$T/m.html" 2>/dev/null || fail "view --html multi"
chrome --dump-dom "file://$T/m.html" > "$T/m.dom" || fail "chromium --dump-dom multi"
opts=$(grep -o '<option value="[0-9]*">[^<]*' "$T/m.dom")
[ "$(grep -c . <<<"$opts")" -eq 2 ] || fail "device selector: $opts"
grep -q '>cuda:1 ' <<<"$(head -1 <<<"$opts")" || fail "the device with the OOM is not first: $opts"
grep -q '>cuda:0 ' <<<"$opts" || fail "cuda:0 missing from the selector: $opts"
# the page's figures are those of hbm view --json, device by device
"$HBM" view "$T/multi.pickle" --json > "$T/m.json" || fail "view --json multi"
python3 - "$T/m.html" "$T/m.json" <<'PY' || fail "the page's figures differ from hbm view --json"
import json, re, sys
page = json.loads(re.search(r'id="hbm-data">(.*?)</script>', open(sys.argv[1]).read(), re.S).group(1))
ref = json.load(open(sys.argv[2]))["devices"]
assert [d["device"] for d in page["devices"]] == [d["device"] for d in ref], "device order"
for p, r in zip(page["devices"], ref):
    h = p["history_start"]
    got = (p["peak"]["bytes"], p["peak"]["reserved"], p["peak"]["event"] - h if p["peak"]["event"] >= h else -1,
           p["allocs"], p["frees"], p["ooms"], p["live_before_bytes"], p["live_before_blocks"], p["events"] - h)
    want = (r["peak_bytes_in_use"], r["peak_bytes_reserved"], r["peak_event"], r["allocs"], r["frees"], r["ooms"],
            r["live_before_history_bytes"], r["live_before_history_blocks"], r["events"])
    assert got == want, (p["device"], got, want)
    # the columns' highest in use is the peak
    assert max(p["cols"]["u"]) == r["peak_bytes_in_use"], p["device"]
PY
mb=$(body "$T/m.dom")
[ "$(attr "$mb" segs)" -eq 2 ] || fail "$(attr "$mb" segs) segments at the peak, want 2"
[ "$(attr "$mb" segblocks)" -ge 3 ] || fail "$(attr "$mb" segblocks) blocks in the segments"
[ "$(attr "$mb" hatched)" -eq 2 ] || fail "$(attr "$mb" hatched) bands drawn as live before the history, want 2"
grep -q 'live before the history' "$T/m.dom" || fail "no 'live before the history' label"
grep -q '12.00MiB in 2 blocks' "$T/m.dom" || fail "the state before the history is not summed"
grep -q 'class="blk before"' "$T/m.dom" || fail "blocks live before the history are not marked in the segments"
ax=$(attr "$mb" axis)
grep -q '^before the history|event ' <<<"$ax" || fail "axis of an untimed trace: $ax"
grep -Eq '[0-9]s(\||$)' <<<"$ax" && fail "seconds on the axis of an untimed trace: $ax"
python3 -c 'import re,sys; t=re.sub(r"(?s)<script.*?</script>|<[^>]*>", " ", open(sys.argv[1]).read()); sys.exit(0 if re.search(r"[0-9][.][0-9]+s[^a-z]", t) else 1)' "$T/m.dom" \
  && fail "seconds in the text of an untimed trace"
selftest "$T/m.html" m "bands pick arrow oom no-seconds device" >/dev/null || exit 1
# a long trace: the page stays bounded and opens
if [ -s "$T/big.pickle" ]; then
  "$HBM" view "$T/big.pickle" --html "$T/big.html" 2>/dev/null || fail "view --html big"
  bytes=$(stat -c %s "$T/big.html")
  [ "$bytes" -lt 20000000 ] || fail "the page of a long trace has $bytes bytes"
  bb=$(selftest "$T/big.html" big "bands pick") || { echo "$bb"; exit 1; }
  echo "long trace: $bytes bytes, script $(attr "$bb" scriptms) ms (JSON.parse $(attr "$bb" parsems) ms), a redraw $(attr "$bb" renderms) ms"
fi
# the shared snapshots, when present: every one opens and passes its self-test
DATA=${2:-}
for f in constructor_sun ftcourse; do
  p="$DATA/snapshots/$f.pickle"
  [ -n "$DATA" ] && [ -f "$p" ] || { echo "skipping $f: not in the shared data"; continue; }
  "$HBM" view "$p" --html "$T/$f.html" 2>/dev/null || fail "view --html $f"
  rb=$(selftest "$T/$f.html" "$f" "bands pick") || { echo "$rb"; exit 1; }
  case $f in
    constructor_sun) grep -q 'device:ok' <<<"$(attr "$rb" selftest)" || fail "$f: device switch";;
    ftcourse) grep -q 'no-seconds:ok' <<<"$(attr "$rb" selftest)" || fail "$f: seconds shown"
              [ "$(attr "$rb" hatched)" -gt 0 ] || fail "$f: nothing drawn as live before the history";;
  esac
done
chrome --screenshot="$T/v.png" "file://$T/v.html" >/dev/null || fail "chromium --screenshot"
python3 "$SRC/tests/png_check.py" "$T/v.png" 16 0.05 || fail "blank screenshot"
chrome --screenshot="$T/m.png" "file://$T/m.html" >/dev/null || fail "chromium --screenshot multi"
python3 "$SRC/tests/png_check.py" "$T/m.png" 16 0.05 || fail "blank screenshot (multi)"
# the screenshot shows bands in the timeline's colours and the hatching of what was live
# before the history (the page draws them pixel by pixel, in exactly these colours)
python3 - "$SRC/tests/png_check.py" "$T/m.png" "$(attr "$mb" plot)" <<'PY' || fail "no bands or no hatching in the timeline of the screenshot"
import sys
src = open(sys.argv[1]).read()
exec(src[:src.rindex("main()")])  # decode() without running the check again
w, h, bpp, rows = decode(sys.argv[2])
pal = {bytes.fromhex(c) for c in "4e79a7 59a14f e15759 76b7b2 edc949 af7aa1 ff9da7 9c755f f28e2c bab0ab".split()}
hatch = {bytes.fromhex("9aa1ad"), bytes.fromhex("d9dce2")}
seen, nh = {}, 0
px0, py0, pw, ph = map(int, sys.argv[3].split(","))  # the plot area (CSS pixels = screenshot pixels)
for r in rows[py0:py0 + ph]:
    for x in range(px0 * bpp, (px0 + pw) * bpp, bpp):
        px = r[x:x + 3]
        if px in pal: seen[px] = seen.get(px, 0) + 1
        elif px in hatch: nh += 1
big = [c.hex() for c, n in seen.items() if n >= 200]
print("screenshot, timeline: %d band colours with 200+ pixels, %d hatch pixels" % (len(big), nh))
sys.exit(0 if len(big) >= 5 and nh >= 2000 else 1)
PY
echo ok
