#!/usr/bin/env bash
# test_view_html.sh - hbm view --html opened in headless Chromium: the page must be
# self-contained, its script must run (rows built in the DOM, one per buffer live at the
# peak), and a screenshot must show a drawn page, not a blank one. Skips without chromium
# ('scripts/deps.sh test' installs Debian's package), except under CI (CI set) where it fails.
set -u
HBM=$1
SRC=${HBM_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
CHROMIUM=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
if [ -z "$CHROMIUM" ]; then
  # CI installs it (.ci/run -> make test -> scripts/deps.sh test): missing there is a failure
  [ -n "${CI:-}" ] && { echo "FAIL: chromium is not installed under CI (scripts/deps.sh test installs it)"; exit 1; }
  echo "SKIP: chromium is not installed ('scripts/deps.sh test' installs Debian's package)"
  exit 77
fi
command -v python3 >/dev/null || { echo "SKIP: python3 is needed"; exit 77; }
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
python3 "$SRC/tests/view_gen.py" "$T" || fail "generator"
"$HBM" view "$T/in.pickle" --html "$T/v.html" 2>/dev/null || fail "view --html"
# self-contained: no external scripts, styles, images or fonts
if grep -Eiq '<script[^>]+src=|<link |@import|url\(|<img |https?://' "$T/v.html"; then
  fail "the page refers to something outside itself"
fi
chrome() {
  timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync --disable-extensions \
    --user-data-dir="$T/profile" --window-size=1280,1000 --virtual-time-budget=5000 "$@" 2>>"$T/chromium.log"
}
chrome --dump-dom "file://$T/v.html" > "$T/dom.html" || fail "chromium --dump-dom (log: $(tail -3 "$T/chromium.log"))"
grep -q 'data-ready="1"' "$T/dom.html" || fail "the page's script did not finish"
rows=$(grep -Eo '<tr class="buf-row" data-i="[0-9]+"' "$T/dom.html" | wc -l)
want=$(python3 -c 'import json,sys; print(min(5000, json.load(open(sys.argv[1]))["live_at_peak"]))' "$T/expect.json")
[ "$rows" -eq "$want" ] || fail "$rows table rows, want $want"
blocks=$(grep -Eo '<div data-i="[0-9]+"' "$T/dom.html" | wc -l)
[ "$blocks" -eq "$want" ] || fail "$blocks blocks, want $want"
grep -q 'Buffers live at the peak (event' "$T/dom.html" || fail "the blocks title was not filled in"
# interaction: the page's #selftest drives sort, zoom, reset and hover through DOM events
chrome --dump-dom "file://$T/v.html#selftest" > "$T/dom2.html" || fail "chromium --dump-dom #selftest"
st=$(grep -o 'data-selftest="[^"]*"' "$T/dom2.html") || fail "no self-test result"
for k in sort-op sort-size zoom reset hover; do
  grep -q "$k:ok" <<<"$st" || fail "interaction $k: $st"
done
chrome --screenshot="$T/v.png" "file://$T/v.html" >/dev/null || fail "chromium --screenshot"
python3 "$SRC/tests/png_check.py" "$T/v.png" 16 0.05 || fail "blank screenshot"
echo ok
