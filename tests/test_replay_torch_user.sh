#!/usr/bin/env bash
# test_replay_torch_user.sh - hbm as a PyTorch user meets it (issue 26): the default rows and
# device of a snapshot's replay, the recorded row, labels, --suggest on other traces,
# PYTORCH_CUDA_ALLOC_CONF in hbm config, allocator_settings kept by export, advice checked
# before it is given, and PyTorch's words in a torch OOM report.
# $1 = hbm binary, $2 = shared data dir (the snapshot checks skip without it).
. "$(dirname "$0")/lib.sh" "$@"
DATA="$DATA/snapshots"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# 4. --suggest speaks of PYTORCH_CUDA_ALLOC_CONF: on an HLO module it refuses (exit 2)
"$HBM" replay "$SRC/examples/svd_oom.hlo" --suggest >"$T/out" 2>"$T/err"; rc=$?
[ $rc -eq 2 ] || fail "--suggest on a module: exit $rc"
grep -q "not a PyTorch snapshot" "$T/err" && grep -q "hbm fit" "$T/err" || fail "--suggest message: $(cat "$T/err")"
[ -s "$T/out" ] && fail "--suggest on a module printed: $(cat "$T/out")"

# 5. PYTORCH_CUDA_ALLOC_CONF: its settings with their source; a bad one names the key (exit 2)
out=$(PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,max_split_size_mb:128 "$HBM" config) || fail "config exit $?"
grep -qE "^expandable_segments +true +PYTORCH_CUDA_ALLOC_CONF$" <<<"$out" || fail "expandable source: $out"
grep -qE "^max_split_size_mb +128 +PYTORCH_CUDA_ALLOC_CONF$" <<<"$out" || fail "max_split source: $out"
for bad in max_split_size_mb:abc frob:1 backend:native,expandable_segments:Frob max_split_size_mb:10; do
  key=${bad##*,}; key=${key%%:*}
  PYTORCH_CUDA_ALLOC_CONF=$bad "$HBM" config >/dev/null 2>"$T/err"; rc=$?
  [ $rc -eq 2 ] || fail "PYTORCH_CUDA_ALLOC_CONF=$bad: exit $rc"
  grep -q "$key" "$T/err" || fail "PYTORCH_CUDA_ALLOC_CONF=$bad: message lacks $key: $(cat "$T/err")"
done

# 8. the demo's advice is checked: on 40 GiB no fraction fits and none is advised
out=$("$HBM" demo --device sim:40GiB); rc=$?
[ $rc -eq 1 ] || fail "demo 40GiB exit $rc"
grep -q "Try: XLA_PYTHON_CLIENT_MEM_FRACTION" <<<"$out" && fail "demo 40GiB advises a fraction that fails: $out"
grep -q "No fraction fits: even XLA_PYTHON_CLIENT_MEM_FRACTION=1 fails" <<<"$out" || fail "demo 40GiB verdict: $out"
"$HBM" demo | grep -q "^  Try: XLA_PYTHON_CLIENT_MEM_FRACTION=.76$" || fail "demo 80GiB advice"

if [ ! -d "$DATA" ]; then
  echo "(shared snapshots absent: snapshot checks skipped)"
  [ $fails -eq 0 ] || exit 1
  exit 0
fi

# 1. defaults: the recorded row and allocator=torch, on one device said once, in words
f="$DATA/kkaitlyn_ctx256_fullstep.pickle"
out=$("$HBM" replay "$f") || fail "default replay exit $?"
[ "$(grep -c "simulated device" <<<"$out")" = 1 ] || fail "device said once: $out"
grep -q "sim:\|fraction\|XLA_PYTHON\|TF_GPU" <<<"$out" && fail "JAX words or spec strings: $out"
grep -qE "^allocator=torch +" <<<"$out" || fail "torch row: $out"
grep -qE "^allocator=(bfc|platform)" <<<"$out" && fail "JAX rows by default: $out"
# 2. the recorded row: its peak held is the peak in use (memory_viz's, truth.csv), and a
# moment before the history is said in words
grep -q "event -1" <<<"$out" && fail "event -1: $out"
grep -q "PyTorch's peak reserved (before the history)" <<<"$out" || fail "before the history: $out"
for snap in kkaitlyn_ctx256_fullstep silmont_small ftcourse magma27 hugepanda_peso; do
  want=$(awk -F, -v s=$snap '$1 == s && $2 == "cuda:0" {print $6}' "$DATA/truth.csv")
  "$HBM" replay "$DATA/$snap.pickle" --json > "$T/r.json" || fail "$snap json exit $?"
  got=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["recorded"]["peak_bytes_in_use"])' "$T/r.json")
  [ "$got" = "$want" ] || fail "$snap recorded peak in use $got, truth $want"
done
# a device smaller than what PyTorch held when the history starts: the rows stand (exit 1,
# the negative verdict), the twin says why it did not run (it once failed the command, exit 2)
out=$("$HBM" replay "$f" --device sim:1GiB); rc=$?
[ $rc = 1 ] || fail "small device exit $rc: $out"
grep -qE "^allocator=torch +" <<<"$out" || fail "small device torch row: $out"
grep -q "^twin (the torch row) against PyTorch: not run: the [0-9]* segments (.*) PyTorch held when the history starts do not fit on sim:1GiB$" <<<"$out" \
  || fail "small device twin: $out"
"$HBM" replay "$f" --device sim:1GiB --json > "$T/s.json"; rc=$?
[ $rc = 1 ] || fail "small device json exit $rc"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["match"] is None and "do not fit" in d["match_not_run"], d.get("match_not_run"); assert d["results"][0]["first_oom"]' "$T/s.json" \
  || fail "small device json"
# 3. labels: rows that differ in the middle of their settings stay told apart
out=$("$HBM" replay "$f" --config allocator=torch,expandable_segments=true,max_split_size_mb=128 \
  --config allocator=torch,expandable_segments=false,max_split_size_mb=128 \
  --config allocator=torch,garbage_collection_threshold=0.5,max_split_size_mb=128) || fail "labels exit $?"
labels=$(sed -n '/^configuration/,/^$/p' <<<"$out" | grep -vE "^(configuration|recorded|  PyTorch|$)" | cut -c1-28 | sort -u)
[ "$(grep -c . <<<"$labels")" -ge 3 ] || fail "labels not distinct: $out"
grep -q "expandable_segments=false,max_split_size_mb=128$" <<<"$out" || fail "the cut label's whole config: $out"
# 6. allocator_settings: used by default, said, kept by export
f="$DATA/bolongcheng_xl_fwd_fp32.pickle"
out=$("$HBM" replay "$f") || fail "bolongcheng exit $?"
grep -q "torch rows: the recorded settings (expandable_segments=true)" <<<"$out" || fail "settings said: $out"
# the row of the recorded settings alone reads as it does under PyTorch's defaults
grep -q "^allocator=torch  " <<<"$out" || fail "the torch row's label: $out"
"$HBM" export "$f" --format torch -o "$T/b.pickle" >/dev/null || fail "export exit $?"
python3 -c 'import pickle,sys; s=pickle.load(open(sys.argv[1],"rb"))["allocator_settings"]; assert s["expandable_segments"] is True, s' \
  "$T/b.pickle" || fail "export lost allocator_settings"
"$HBM" replay "$T/b.pickle" | grep -q "torch rows: the recorded settings (expandable_segments=true)" || fail "exported settings unused"
# 7. the twin from a state rebuilt with expandable segments mapped before the history
grep -q "addresses 1704/1704 (100.0%)" <<<"$out" || fail "bolongcheng twin: $out"
# 9. a torch OOM report reads as PyTorch's, then hbm's findings, in PyTorch's terms
out=$("$HBM" replay "$DATA/constructor_sun.pickle" 2>/dev/null); rc=$?
[ $rc -eq 1 ] || fail "constructor_sun exit $rc"
oom=$(sed -n '/^--- first OOM with allocator=torch/,$p' <<<"$out")
sed -n 2p <<<"$oom" | grep -q "^CUDA out of memory. Tried to allocate 4.95 GiB. GPU 1 has a total capacity of 78.51 GiB" ||
  fail "PyTorch's first line: $oom"
tr '\n' ' ' <<<"$oom" | grep -q "reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" ||
  fail "PyTorch's message: $oom"
grep -q "RESOURCE_EXHAUSTED\|XLA_PYTHON\|TF_GPU\|JAX\|fraction 0.75" <<<"$oom" && fail "JAX words in a torch report: $oom"
# the table and PyTorch's message fit 100 columns (the tags of the findings may not)
grep -E "^(recorded|  PyTorch's|  on |  torch rows|twin )" <<<"$out" | awk 'length > 100 {bad = 1} END {exit bad}' ||
  fail "a line over 100 columns: $out"
sed -n '2,/^hbm: /p' <<<"$oom" | grep -v "^hbm: " | awk 'length > 100 {bad = 1} END {exit bad}' ||
  fail "PyTorch's message over 100 columns: $oom"
[ $fails -eq 0 ] || exit 1
echo "ok"
