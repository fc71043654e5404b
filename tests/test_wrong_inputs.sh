#!/usr/bin/env bash
# test_wrong_inputs.sh HBM SHARED_DATA - what a new user hands hbm by mistake: every command
# names a file of another kind ("a PyTorch memory snapshot (pickle)") and the command to try,
# never echoing its bytes; empty and truncated files say so; gzip'd inputs and a UTF-8
# byte-order mark are read; sizes past 64 bits are errors naming the shape or event (exit 2);
# control characters in a file's names reach no output form raw; an impossible history is
# named by its first inconsistent event.
set -u
. "$(dirname "$0")/lib.sh" "$@"
SHARED=$DATA
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok   $*"; }
# expect NAME RC TEXT -- CMD...: exit RC, TEXT (if any) in stdout+stderr, and no control
# character in them but tab and newline (none of a file's raw bytes reaches the terminal)
expect() {
  local name=$1 rc=$2 want=$3
  shift 4
  "$@" >"$T/out" 2>&1
  local got=$?
  if [ "$got" != "$rc" ]; then fail "$name: exit $got, want $rc"; head -5 "$T/out"; return; fi
  if [ -n "$want" ] && ! grep -qF -- "$want" "$T/out"; then fail "$name: lacks '$want'"; head -5 "$T/out"; return; fi
  if LC_ALL=C grep -qP '[\x00-\x08\x0b-\x1f\x7f]' "$T/out"; then
    fail "$name: raw control characters in the output"; LC_ALL=C grep -naP '[\x00-\x08\x0b-\x1f\x7f]' "$T/out" | head -3 | cat -v
    return
  fi
  ok "$name"
}
hlo=$SRC/examples/svd_fixed.hlo
pickle=$SRC/fuzz/corpus/fuzz_pickle/snapshot_p4.pickle
# a JSON snapshot, a MiniMalloc CSV, an HloProto (protobuf, by hand: HloProto{hlo_module:
# {name: "jit_f", entry_computation_name: "main.5"}}), a Perfetto trace, binary noise
cat >"$T/snap.json" <<'EOF'
{"segments": [], "device_traces": [[{"action": "alloc", "addr": 4096, "size": 512, "stream": 0},
 {"action": "free_completed", "addr": 4096, "size": 512, "stream": 0}]]}
EOF
printf 'id,lower,upper,size\n0,0,10,1024\n1,5,20,2048\n' >"$T/p.csv"
printf '\x0a\x11\x0a\x05jit_f\x12\x06main.5\x1a\x00' >"$T/m.hlo.pb"
printf '{"traceEvents": [{"name": "in use", "ph": "C", "ts": 0, "pid": 1, "args": {"bytes": 1}}]}\n' >"$T/p.json"
head -c 4096 /dev/urandom >"$T/noise.bin"
printf '\x00\x01' >>"$T/noise.bin"

# ---- 1: the wrong command names the kind and the command meant ---------------------------
expect plan-pickle 2 "is a PyTorch memory snapshot (pickle), not an HLO module: try 'hbm view $pickle'" -- "$HBM" plan "$pickle"
expect plan-json 2 "is a PyTorch memory snapshot (JSON), not an HLO module: try 'hbm view" -- "$HBM" plan "$T/snap.json"
expect plan-csv 2 "is a MiniMalloc problem (CSV), not an HLO module: try 'hbm pack" -- "$HBM" plan "$T/p.csv"
expect pack-hlo 2 "is an HLO module (text), not a MiniMalloc CSV: try 'hbm plan" -- "$HBM" pack "$hlo"
expect pack-pickle 2 "is a PyTorch memory snapshot (pickle), not a MiniMalloc CSV: try 'hbm view" -- "$HBM" pack "$pickle"
for cmd in view replay export diff; do
  args=("$T/p.csv")
  [ $cmd = export ] && args+=(--format perfetto -o "$T/x.json")
  [ $cmd = diff ] && args+=("$hlo")
  expect "$cmd-csv" 2 "is a MiniMalloc problem (CSV), not a trace: try 'hbm pack" -- "$HBM" $cmd "${args[@]}"
done
# an HloProto is read by plan and view (src/hlo/proto_read.c): this one's computation is empty,
# which the reader says (or, built without protobuf-c, that it is missing); pack refuses it
pb_why="computation '' has no instructions"
"$HBM" plan "$T/m.hlo.pb" 2>&1 | grep -q "protobuf-c" && pb_why="protobuf-c"
expect view-hloproto 2 "$pb_why" -- "$HBM" view "$T/m.hlo.pb"
expect plan-hloproto 2 "$pb_why" -- "$HBM" plan "$T/m.hlo.pb"
expect pack-hloproto 2 "is an XLA HLO module as protobuf (HloProto), not a MiniMalloc CSV: try 'hbm plan" -- \
  "$HBM" pack "$T/m.hlo.pb"
expect view-perfetto 2 "is a Chrome/Perfetto trace (JSON), not a trace: open it in https://ui.perfetto.dev" -- \
  "$HBM" view "$T/p.json"
expect plan-noise 2 "is binary data of no kind hbm reads" -- "$HBM" plan "$T/noise.bin"
expect view-noise 2 "is binary data of no kind hbm reads" -- "$HBM" view "$T/noise.bin"
if [ -n "$SHARED" ] && [ -f "$SHARED/xprof/rocm_te_fused_attn.xplane.pb" ]; then
  expect pack-xplane 2 "is an XProf profile (XSpace protobuf, .xplane.pb), not a MiniMalloc CSV: try 'hbm plan" -- \
    "$HBM" pack "$SHARED/xprof/rocm_te_fused_attn.xplane.pb"
else
  echo "skip pack-xplane: no shared data ($SHARED)"
fi
# the library's readers name the kind too (hbm_trace_load on a CSV), without the CLI's check
expect plan-right 0 "BufferAssignment" -- "$HBM" plan "$hlo"

# ---- 2: empty, truncated, gzip'd, a byte-order mark ---------------------------------------
: >"$T/empty"
for cmd in plan view replay pack; do expect "$cmd-empty" 2 "hbm $cmd: $T/empty: empty file" -- "$HBM" $cmd "$T/empty"; done
expect export-empty 2 "empty file" -- "$HBM" export "$T/empty" --format perfetto -o "$T/x.json"
expect diff-empty 2 "empty file" -- "$HBM" diff "$hlo" "$T/empty"
size=$(wc -c <"$pickle")
head -c $((size / 2)) "$pickle" >"$T/cut.pickle"
expect pickle-truncated 2 "the file ends early (truncated at byte $((size / 2)) of a pickle)" -- "$HBM" view "$T/cut.pickle"
head -c 7 "$pickle" >"$T/cut7.pickle"
expect pickle-truncated-7 2 "the file ends early (truncated at byte 7 of a pickle)" -- "$HBM" view "$T/cut7.pickle"
{ printf '\xef\xbb\xbf'; cat "$hlo"; } >"$T/bom.hlo"
"$HBM" plan "$hlo" >"$T/plain.txt" 2>&1
expect plan-bom 0 "BufferAssignment" -- "$HBM" plan "$T/bom.hlo"
cmp -s "$T/plain.txt" "$T/out" && ok "plan-bom-same" || fail "plan-bom: another report than without the mark"
if command -v gzip >/dev/null; then
  gzip -c "$hlo" >"$T/m.hlo.gz"
  gzip -c "$pickle" >"$T/s.pickle.gz"
  "$HBM" plan "$T/m.hlo.gz" >"$T/gz.txt" 2>&1
  if grep -q "built without zlib" "$T/gz.txt"; then
    expect gzip-nozlib 2 "gunzip it first, or install zlib's headers" -- "$HBM" plan "$T/m.hlo.gz"
    echo "skip gzip reading: this hbm was built without zlib"
  else
    cmp -s "$T/plain.txt" "$T/gz.txt" && ok "plan-gzip" || fail "plan-gzip: another report than the plain file's"
    "$HBM" view "$pickle" --json >"$T/v1.json" 2>&1
    "$HBM" view "$T/s.pickle.gz" --json >"$T/v2.json" 2>&1
    sed 's/"name": "[^"]*"//' "$T/v1.json" >"$T/v1n" && sed 's/"name": "[^"]*"//' "$T/v2.json" >"$T/v2n"
    cmp -s "$T/v1n" "$T/v2n" && ok "view-gzip" || fail "view-gzip: other figures than the plain snapshot's"
    gzip -c "$T/p.csv" >"$T/p.csv.gz"
    expect pack-gzip 0 "2 buffers" -- "$HBM" pack "$T/p.csv.gz"
    expect plan-gzip-pickle 2 "is a PyTorch memory snapshot (pickle) (gzip'd), not an HLO module: try 'hbm view" -- \
      "$HBM" plan "$T/s.pickle.gz"
    head -c 300 "$T/s.pickle.gz" >"$T/cut.gz"
    expect gzip-truncated 2 "the file ends early" -- "$HBM" view "$T/cut.gz"
  fi
else
  echo "skip gzip: no gzip here"
fi

# ---- 3: sizes past 64 bits ----------------------------------------------------------------
cat >"$T/big.hlo" <<'EOF'
HloModule big

ENTRY %main (p: f32[4611686018427387904,4]) -> f32[4611686018427387904,4] {
  ROOT %p = f32[4611686018427387904,4]{1,0} parameter(0)
}
EOF
expect plan-overflow 2 "big.hlo:3:48: shape f32[4611686018427387904,4]: it holds more than 2^63 - 1 bytes" -- \
  "$HBM" plan "$T/big.hlo"
sed 's/"size": 512, "stream": 0},$/"size": 1180591620717411303424, "stream": 0},/' "$T/snap.json" >"$T/big.json"
expect view-overflow 2 'event 0: "size" is 1.18059e+21, outside 0 to 2^63' -- "$HBM" view "$T/big.json"
sed 's/"size": 512, "stream": 0},$/"size": 9223372036854775807, "stream": 0},\n {"action": "alloc", "addr": 8192, "size": 9, "stream": 0},/' \
  "$T/snap.json" >"$T/sum.json"
expect view-sum-overflow 2 "event 1: the bytes in use pass 2^63 - 1" -- "$HBM" view "$T/sum.json"
expect replay-sum-overflow 2 "" -- "$HBM" export "$T/sum.json" --format perfetto -o "$T/x.json"

# ---- 4: control characters from a file, through every command and output form ------------
E='\\u001b]0;pwned\\u0007\\u001b[2J' # JSON escapes: the reader makes them ESC and BEL
cat >"$T/evil.json" <<EOF
{"segments": [{"device": 0, "address": 16777216, "total_size": 2097152, "stream": 0, "blocks": []}],
 "device_traces": [[
 {"action": "segment_alloc", "addr": 16777216, "size": 2097152, "stream": 0, "time_us": 1, "frames": []},
 {"action": "alloc", "addr": 16777216, "size": 1048576, "stream": 0, "time_us": 2,
  "frames": [{"filename": "/tmp/x$E.py", "line": 7, "name": "fn$E"}]},
 {"action": "oom", "addr": 0, "size": 4194304, "stream": 0, "time_us": 3, "frames": []},
 {"action": "free_completed", "addr": 16777216, "size": 1048576, "stream": 0, "time_us": 4, "frames": []}]]}
EOF
esc=$(printf '\033]0;pwned\007\033[2J')
sed "s|jit(svd)/|jit(svd)/$esc|g; s|source_file=\"[^\"]*\"|source_file=\"/tmp/$esc.py\"|g" "$hlo" >"$T/evil.hlo"
grep -qF "$esc" "$T/evil.hlo" || fail "evil.hlo: no control characters in it (the test's own error)"
printf 'id,lower,upper,size\nbuf%s,0,10,1024\nb2,5,20,2048\n' "$esc" >"$T/evil.csv"
for f in "$T/evil.hlo" "$T/evil.json"; do
  b=$(basename "$f")
  expect "view-$b" 0 "" -- "$HBM" view "$f"
  expect "view-json-$b" 0 "" -- "$HBM" view "$f" --json
  expect "view-html-$b" 0 "" -- "$HBM" view "$f" --html "$T/v.html"
  expect "view-html-file-$b" 1 "" -- grep -qP '[\x00-\x08\x0b-\x1f\x7f]' "$T/v.html"
  expect "diff-$b" 0 "" -- "$HBM" diff "$f" "$hlo"
  expect "diff-json-$b" 0 "" -- "$HBM" diff "$f" "$hlo" --json
  expect "export-perfetto-$b" 0 "" -- "$HBM" export "$f" --format perfetto -o -
done
expect plan-evil 0 'op_name="jit(svd)/\x1b]0;pwned\x07\x1b[2J' -- "$HBM" plan "$T/evil.hlo" --width 0
expect plan-evil-json 0 "" -- "$HBM" plan "$T/evil.hlo" --json
expect plan-evil-pack 0 "" -- "$HBM" plan "$T/evil.hlo" --pack greedy
expect replay-evil 1 "" -- "$HBM" replay "$T/evil.json" --device sim:3MiB
expect replay-evil-json 1 "" -- "$HBM" replay "$T/evil.json" --device sim:3MiB --json
expect replay-evil-suggest 1 "" -- "$HBM" replay "$T/evil.json" --suggest --device sim:3MiB
expect pack-evil 0 "" -- "$HBM" pack "$T/evil.csv"
expect pack-evil-json 0 "" -- "$HBM" pack "$T/evil.csv" --json
printf 'id,lower,upper,size\nbuf%s,0,x,1024\n' "$esc" >"$T/evil-bad.csv"
expect pack-evil-error 2 "must be integers" -- "$HBM" pack "$T/evil-bad.csv"
printf 'HloModule m\n\nENTRY %%e {\n  p = f32[2] parameter(0), metadata={op_name="%s\n}\n' "$esc" >"$T/evil-bad.hlo"
expect plan-evil-error 2 "unterminated string" -- "$HBM" plan "$T/evil-bad.hlo"

# ---- 5: an impossible history --------------------------------------------------------------
cat >"$T/twice.json" <<'EOF'
{"segments": [], "device_traces": [[{"action": "alloc", "addr": 4096, "size": 512, "stream": 0},
 {"action": "free_completed", "addr": 4096, "size": 512, "stream": 0},
 {"action": "free_completed", "addr": 4096, "size": 512, "stream": 0}]]}
EOF
expect impossible 0 "real: event 2 frees 0x1000, which is not allocated" -- "$HBM" view "$T/twice.json"
expect impossible-json 0 '"warning": "event 2 frees 0x1000, which is not allocated"' -- "$HBM" view "$T/twice.json" --json
expect consistent 0 "" -- "$HBM" view "$T/snap.json"
grep -q "warning" "$T/out" && fail "consistent: a warning on a consistent history"

echo "$fails failures"
[ "$fails" -eq 0 ]
