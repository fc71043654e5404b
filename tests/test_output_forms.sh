#!/usr/bin/env bash
# test_output_forms.sh HBM SHARED_DATA - the small things of the output a new user meets:
# ASCII under a non-UTF-8 locale, plurals and zeros, export's "wrote" line for every format
# and Perfetto's process per device, an unknown command in one line, diff's sides named by
# file and a device per side.
set -u
. "$(dirname "$0")/lib.sh" "$@"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok   $*"; }
has() { # has NAME TEXT FILE
  if grep -qF -- "$2" "$3"; then ok "$1"; else fail "$1: lacks '$2'"; head -8 "$3"; fi
}
hasnt() { # hasnt NAME TEXT FILE
  if grep -qF -- "$2" "$3"; then fail "$1: has '$2'"; grep -F -- "$2" "$3" | head -3; else ok "$1"; fi
}
hlo=$SRC/examples/svd_fixed.hlo oom=$SRC/examples/svd_oom.hlo
ev() { printf '{"action": "%s", "addr": %d, "size": %d, "stream": 0}' "$1" "$2" "$3"; }
# two devices: cuda:0 one block, cuda:1 two blocks and an OOM
cat >"$T/two.json" <<EOF
{"segments": [], "device_traces": [[$(ev alloc 4096 512)],
 [$(ev alloc 4096 1048576), $(ev alloc 9999872 4194304), $(ev oom 0 8388608)]]}
EOF
echo '{"segments": [], "device_traces": [[]]}' >"$T/empty.json"
printf 'id,lower,upper,size\n0,0,10,1024\n1,5,20,2048\n' >"$T/p.csv"

# ---- 10: an unknown command: one line, and where the commands are --------------------------
"$HBM" frob >"$T/o" 2>&1
rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <"$T/o")" -eq 1 ] && grep -qF "hbm: unknown command 'frob' (the commands: 'hbm --help')" "$T/o" &&
  ok "frob: one line" || { fail "frob: exit $rc, $(wc -l <"$T/o") lines"; cat "$T/o"; }

# ---- 6: LC_ALL=C: every output ASCII, without --ascii ----------------------------------------
ascii() { # ascii NAME CMD...: stdout+stderr of CMD under LC_ALL=C hold no byte above 127
  local name=$1
  shift
  LC_ALL=C "$@" >"$T/a" 2>&1
  if LC_ALL=C grep -q '[^ -~[:space:]]' "$T/a"; then fail "ascii $name"; LC_ALL=C grep -n '[^ -~[:space:]]' "$T/a" | head -3
  else ok "ascii $name"; fi
}
ascii view-two "$HBM" view "$T/two.json"
ascii view-hlo "$HBM" view "$hlo"
ascii plan "$HBM" plan "$oom" --device V100-16GB
ascii diff "$HBM" diff "$oom" "$hlo"
ascii replay "$HBM" replay "$T/two.json" --device sim:3MiB
ascii pack "$HBM" pack "$T/p.csv"
ascii devices "$HBM" devices
ascii config "$HBM" config
ascii demo "$HBM" demo
ascii help "$HBM" --help
for c in config demo run replay export view diff plan devices pack; do ascii "$c-help" "$HBM" $c --help; done
# and a UTF-8 terminal still gets the blocks (the same command, so the check above can fail)
LC_ALL=C.UTF-8 "$HBM" view "$T/two.json" >"$T/u" 2>&1
LC_ALL=C grep -q '[^ -~[:space:]]' "$T/u" && ok "utf-8: blocks" || fail "utf-8: no Unicode blocks under C.UTF-8"
LC_ALL= LC_CTYPE= LANG=en_US.UTF-8 "$HBM" view "$T/two.json" >"$T/u" 2>&1
LC_ALL=C grep -q '[^ -~[:space:]]' "$T/u" && ok "utf-8: LANG" || fail "utf-8: no blocks under LANG=en_US.UTF-8"

# ---- 8: plurals and zeros --------------------------------------------------------------------
"$HBM" replay "$T/two.json" --device sim:7MiB --config allocator=bfc >"$T/r" 2>&1
has "replay: (1 OOM)" "event 2: 8.00MiB (1 OOM)" "$T/r"
hasnt "replay: no (1 OOMs)" "(1 OOMs)" "$T/r"
"$HBM" view "$T/empty.json" >"$T/e" 2>&1
has "view empty: nothing allocated" "peak in use  0B (nothing allocated); peak reserved 0B" "$T/e"
hasnt "view empty: no moment named" "at event 0" "$T/e"
"$HBM" replay "$T/two.json" --device sim:3MiB --config allocator=torch >"$T/t" 2>&1
has "replay torch: no segments recorded" "segments: none recorded" "$T/t"
hasnt "replay torch: no 0/0" "segments 0/0" "$T/t"
# a block live before the history (a free the history did not allocate): "1 block"
cat >"$T/before.json" <<EOF
{"segments": [], "device_traces": [[$(ev free_completed 4096 512), $(ev alloc 8192 1024)]]}
EOF
"$HBM" view "$T/before.json" >"$T/b" 2>&1
has "view: 1 block" "512B live in 1 block," "$T/b"

# ---- 9: export's "wrote" line, Perfetto's devices --------------------------------------------
for f in perfetto pprof torch minimalloc; do
  "$HBM" export "$T/two.json" --format $f -o "$T/x.$f" 2>"$T/w"
  has "export $f: wrote" "hbm export: wrote $T/x.$f (device" "$T/w"
done
has "export torch: every device" "(devices cuda:1, cuda:0)" <("$HBM" export "$T/two.json" --format torch -o "$T/y" 2>&1)
"$HBM" export "$T/two.json" --format perfetto -o "$T/p.json" 2>"$T/w"
has "export perfetto: every device" "(devices cuda:1, cuda:0)" "$T/w"
if command -v python3 >/dev/null; then
  python3 - "$T/p.json" <<'EOF' && ok "perfetto: a process per device" || fail "perfetto: processes"
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
names = {e["pid"]: e["args"]["name"] for e in ev if e["name"] == "process_name"}
assert names == {1: "hbm cuda:1", 2: "hbm cuda:0"}, names
peaks = {p: max(e["args"]["bytes"] for e in ev if e["pid"] == p and e["name"] == "in use") for p in names}
assert peaks == {1: 5242880, 2: 512}, peaks
assert [e["pid"] for e in ev if e["name"] == "OOM"] == [1]
EOF
fi
"$HBM" export "$T/two.json" --format perfetto --device-index 0 -o "$T/p0.json" 2>"$T/w"
has "export perfetto --device-index 0: that device" "(device cuda:0)" "$T/w"
grep -q '"pid": 2' "$T/p0.json" && fail "perfetto --device-index 0: other devices in it" || ok "perfetto: one device asked, one given"

# ---- 11: diff names its sides by file; a device per side -------------------------------------
"$HBM" diff "$oom" "$hlo" >"$T/d" 2>&1
has "diff: A is the first file" "A  $oom (timeline)" "$T/d"
has "diff: B is the second file" "B  $hlo (timeline)" "$T/d"
"$HBM" diff "$T/two.json" "$T/two.json" --device-index 1:0 >"$T/d" 2>&1
has "diff 1:0: A device 1" "(torch, device cuda:1)" <(sed -n 1p "$T/d")
has "diff 1:0: B device 0" "(torch, device cuda:0)" <(sed -n 3p "$T/d")
"$HBM" diff "$T/two.json" "$T/two.json" --device-index :0 >"$T/d" 2>&1
has "diff :0: A its first (the OOM's)" "device cuda:1" <(sed -n 1p "$T/d")
has "diff :0: B device 0" "device cuda:0" <(sed -n 3p "$T/d")
"$HBM" diff "$T/two.json" "$T/two.json" --device-index 0 >"$T/d" 2>&1
[ "$(grep -c 'device cuda:0' "$T/d")" -eq 2 ] && ok "diff 0: both sides device 0" || fail "diff 0: both sides"
"$HBM" diff "$T/two.json" "$T/two.json" --device-index 1:x >"$T/d" 2>&1
rc=$?
[ $rc -eq 2 ] && has "diff 1:x: usage error" "hbm diff: --device-index '1:x': expected N or A:B" "$T/d" || fail "diff 1:x: exit $rc"
"$HBM" diff "$T/two.json" "$T/two.json" --device-index 0:7 >"$T/d" 2>&1
has "diff 0:7: names the device the file lacks" "no device 7 in this file" "$T/d"

echo "$fails failures"
[ "$fails" -eq 0 ]
