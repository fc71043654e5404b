#!/usr/bin/env bash
# test_cli.sh HBM SHARED_DATA - the hbm tool's front door: help, version, config, errors.
set -u
. "$(dirname "$0")/lib.sh" "$@"
hbm=$HBM
fails=0
check() { # check NAME WANT_RC WANT_TEXT -- CMD...
  local name="$1" want_rc="$2" want="$3"; shift 4
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ "$rc" != "$want_rc" ]; then echo "FAIL $name: exit $rc, want $want_rc"; echo "$out"; fails=$((fails+1)); return; fi
  if ! grep -qF -- "$want" <<<"$out"; then echo "FAIL $name: output lacks '$want'"; echo "$out"; fails=$((fails+1)); return; fi
  echo "ok   $name"
}
check help 0 "Usage: hbm COMMAND" -- "$hbm" --help
check version 0 "hbm 0.1.0" -- "$hbm" --version
check no-args 2 "Usage: hbm COMMAND" -- "$hbm"
check unknown 2 "unknown command 'frobnicate'" -- "$hbm" frobnicate
check config 0 "fraction                     0.75    default" -- "$hbm" config
check config-env 0 "fraction                     0.6     XLA_PYTHON_CLIENT_MEM_FRACTION" -- \
  env XLA_PYTHON_CLIENT_MEM_FRACTION=.6 "$hbm" config
check config-json 0 '"preallocate": {"value": "false", "source": "XLA_PYTHON_CLIENT_PREALLOCATE"}' -- \
  env XLA_PYTHON_CLIENT_PREALLOCATE=false "$hbm" config --json
check config-bad 2 "HBM_PREALLOCATE='maybe' is not valid: expected true or false" -- \
  env HBM_PREALLOCATE=maybe "$hbm" config
check config-bad-fraction 2 "XLA_PYTHON_CLIENT_MEM_FRACTION='half' is not valid" -- \
  env XLA_PYTHON_CLIENT_MEM_FRACTION=half "$hbm" config
# JAX's own rule: only 0, false, False turn preallocation off; a note says so
check config-jax-no 0 "XLA_PYTHON_CLIENT_PREALLOCATE='no' means preallocate=true" -- \
  env XLA_PYTHON_CLIENT_PREALLOCATE=no "$hbm" config
check config-jax-space 0 "fraction                     0.5     XLA_PYTHON_CLIENT_MEM_FRACTION" -- \
  env "XLA_PYTHON_CLIENT_MEM_FRACTION=0.5 " "$hbm" config
check config-tf 0 "allocator                    platform TF_GPU_ALLOCATOR" -- env TF_GPU_ALLOCATOR=cuda_malloc "$hbm" config
check config-both 2 "are both set" -- \
  env XLA_PYTHON_CLIENT_MEM_FRACTION=.5 XLA_CLIENT_MEM_FRACTION=.6 "$hbm" config
check config-string 0 "allocator                    platform config" -- "$hbm" config --config allocator=platform
check config-help 0 "XLA_PYTHON_CLIENT_MEM_FRACTION" -- "$hbm" config --help
check config-badarg 2 "hbm config: unknown option '--frob'" -- "$hbm" config --frob
demo=$("$hbm" demo 2>&1); rc=$?
for want in "RESOURCE_EXHAUSTED: Out of memory while trying to allocate" "Diagnosis: framework limit." \
            "Try: XLA_PYTHON_CLIENT_MEM_FRACTION=.76" "The step completed" \
            "preallocated temp allocation:  335.59GiB" "DOES NOT FIT" "FITS: needs 492.26MiB"; do
  if [ "$rc" != 0 ] || ! grep -qF -- "$want" <<<"$demo"; then echo "FAIL demo: rc $rc, lacks '$want'"; fails=$((fails+1)); fi
done
# the demo: device names, advice checked by running the step, the environment honoured
check demo-name 0 "The step completed" -- "$hbm" demo --device h100
check demo-small 1 "No setting makes this step fit sim:40GiB" -- "$hbm" demo --device sim:40GiB
check demo-badenv 2 "XLA_PYTHON_CLIENT_MEM_FRACTION='abc' is not valid" -- \
  env XLA_PYTHON_CLIENT_MEM_FRACTION=abc "$hbm" demo
check demo-baddev 2 "hbm demo: --device: expected sim:SIZE (e.g. sim:80GiB) or a device name: device 'nosuch' is not known" -- \
  "$hbm" demo --device nosuch
tdir=$T
HBM_TRACE="$tdir/demo.hbmt" "$hbm" demo >/dev/null 2>&1
if [ -s "$tdir/demo.hbmt" ]; then echo "ok   demo-trace"; else echo "FAIL demo-trace: HBM_TRACE ignored"; fails=$((fails+1)); fi

# ---- one argument parser, one wording, the same exit statuses in every command ----------
src=${HBM_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
hlo="$src/examples/svd_fixed.hlo"
# only NAME RC LINE -- CMD...: exit RC, and stdout+stderr are LINE and the usage hint, nothing
# else (a bad argument is found before any work: no table, no partial output)
only() {
  local name="$1" want_rc="$2" want="$3"; shift 4
  local out rc cmd
  out=$("$@" 2>&1); rc=$?
  cmd=$(sed -n "s/^hbm \([a-z]*\): .*/\1/p" <<<"$want")
  if [ "$rc" != "$want_rc" ]; then echo "FAIL $name: exit $rc, want $want_rc"; echo "$out"; fails=$((fails+1)); return; fi
  if [ "$out" != "$want"$'\n'"Try 'hbm $cmd --help'." ]; then
    echo "FAIL $name: want exactly '$want' and the hint, got:"; echo "$out"; fails=$((fails+1)); return
  fi
  echo "ok   $name"
}
# a flag without its value, in every command
for cv in "config --config" "demo --device" "run --trace" "replay --allocators" "export --format" "view --top" \
          "diff --top" "plan --device" "devices --width" "pack --capacity"; do
  set -- $cv
  only "needs-value-$1" 2 "hbm $1: $2 needs a value" -- "$hbm" $1 $2
done
# ... also when the next word is another option
only needs-value-next 2 "hbm export: --format needs a value" -- "$hbm" export "$hlo" --format -o -
only needs-value-help 2 "hbm view: --title needs a value" -- "$hbm" view "$hlo" --title --help
check value-dash 0 "Memory Viewer" -- "$hbm" view "$hlo" --title -x
# an unknown option, in every command (also in the --name=value form)
for c in config demo run replay export view diff plan devices pack; do
  only "unknown-$c" 2 "hbm $c: unknown option '--frob'" -- "$hbm" $c --frob
  only "unknown-eq-$c" 2 "hbm $c: unknown option '--frob'" -- "$hbm" $c --frob=1
done
only unknown-short 2 "hbm view: unknown option '-x'" -- "$hbm" view "$hlo" -x
# a bad number names the option, the value and what is accepted
only bad-int-view 2 "hbm view: --top 'x': expected a whole number from 0 to 100000" -- "$hbm" view "$hlo" --top x
only bad-int-diff 2 "hbm diff: --top '-1': expected a whole number from 0 to 1000000" -- "$hbm" diff "$hlo" "$hlo" --top -1
only bad-int-replay 2 "hbm replay: --device-index '5000': expected a whole number from 0 to 4096" -- \
  "$hbm" replay "$hlo" --device-index 5000
only bad-int-export 2 "hbm export: --device-index '1x': expected a whole number from 0 to 4096" -- \
  "$hbm" export "$hlo" --format perfetto -o - --device-index 1x
only bad-int-plan 2 "hbm plan: --top '-1': expected a whole number from 0 to 1000000" -- "$hbm" plan "$hlo" --top -1
only bad-int-eq 2 "hbm view: --top '': expected a whole number from 0 to 100000" -- "$hbm" view "$hlo" --top=
only bad-real-replay 2 "hbm replay: --fraction '2': too large: at most 1" -- "$hbm" replay "$hlo" --fraction 2
only bad-real-plan 2 "hbm plan: --framework-limit 'nan': expected a number in (0, 1]" -- \
  "$hbm" plan "$hlo" --framework-limit nan
only bad-timeout-pack 2 "hbm pack: --timeout '0': expected seconds > 0" -- "$hbm" pack x.csv --timeout 0
only bad-width-devices 2 "hbm devices: --width '5': expected columns: 0 (no limit) or 40 to 100000" -- "$hbm" devices --width 5
only bad-width-plan 2 "hbm plan: --width 'x': expected columns: 0 (no limit) or 40 to 100000" -- "$hbm" plan "$hlo" --width x
only bad-pow2-plan 2 "hbm plan: --alignment '3': expected a power of two from 1 to 1.00GiB (bytes: 256, 4KiB, ...)" -- \
  "$hbm" plan "$hlo" --alignment 3
# sizes: the size parser of --capacity everywhere
size_msg="expected a size > 0: bytes, or 80GiB (x 2^30), 40GB (x 10^9)"
only bad-size-pack 2 "hbm pack: --capacity 'lots': $size_msg" -- "$hbm" pack x.csv --capacity lots
only bad-size-plan 2 "hbm plan: --capacity '0': $size_msg" -- "$hbm" plan "$hlo" --capacity 0
only bad-size-run 2 "hbm run: --limit '12XB': $size_msg" -- "$hbm" run --limit 12XB -- true
# values the library judges: the option, then its message naming the value
only bad-algo 2 "hbm pack: --algorithm: unknown packing algorithm 'magic' (greedy, best, exact, xla, xla-spatial, xla-temporal)" -- \
  "$hbm" pack x.csv --algorithm magic
only bad-backend 2 "hbm plan: --backend: backend 'x': expected gpu, cpu, tpu or auto" -- "$hbm" plan "$hlo" --backend x
only bad-format 2 "hbm export: --format 'svg': expected perfetto, pprof, torch or minimalloc" -- \
  "$hbm" export "$hlo" --format svg -o -
only plan-baddev 2 "hbm plan: --device: device 'nope' is not known; 'hbm devices' lists them (e.g. H100-80GB, A100-40GB, V100-16GB, TPU-v5e); or give --capacity SIZE" -- \
  "$hbm" plan "$hlo" --device nope
# flags take no value; positional arguments
only flag-value 2 "hbm config: --json takes no value (got '--json=1')" -- "$hbm" config --json=1
only extra-arg 2 "hbm config: unexpected argument 'foo': hbm config takes none" -- "$hbm" config foo
only two-files 2 "hbm plan: unexpected argument 'b': hbm plan takes FILE|DUMPDIR" -- "$hbm" plan a b
only missing-b 2 "hbm diff: missing B" -- "$hbm" diff "$hlo"
only missing-ab 2 "hbm diff: missing A and B" -- "$hbm" diff
only missing-trace 2 "hbm replay: missing TRACE" -- "$hbm" replay --json
only missing-cmd 2 "hbm run: missing COMMAND" -- "$hbm" run --quiet
only missing-format 2 "hbm export: missing --format F" -- "$hbm" export "$hlo" -o -
only missing-output 2 "hbm export: missing --output OUT" -- "$hbm" export "$hlo" --format perfetto
# --name=value is the same as --name value; '--' ends the options
check eq-form 0 '"peak_heap_bytes": 516172852' -- "$hbm" view "$hlo" --json --top=1
check eq-form-export 0 "id,lower,upper,size" -- "$hbm" export "$hlo" --format=minimalloc --output=-
check dashdash 2 "cannot open --json" -- "$hbm" view -- --json
# replay: a bad device, allocator list or configuration is found before the trace is read
# (exit 2, one message, no table), in the wording of the other commands
only replay-sim0 2 "hbm replay: --device: device 'sim:0': capacity must be > 0" -- "$hbm" replay "$hlo" --device sim:0
only replay-dev 2 "hbm replay: --device: expected sim:SIZE (e.g. sim:80GiB) or a device name: device 'tpu9' is not known; 'hbm devices' lists them (e.g. H100-80GB, A100-40GB, V100-16GB, TPU-v5e)" -- \
  "$hbm" replay "$hlo" --device tpu9
only replay-alloc 2 "hbm replay: --allocators: allocator='foo' is not valid: expected default, bfc, platform, cuda_async, vmm or torch" -- \
  "$hbm" replay "$hlo" --allocators bfc,foo
only replay-alloc-empty 2 "hbm replay: --allocators '': no allocator named (e.g. bfc,platform,cuda_async,vmm,torch)" -- \
  "$hbm" replay "$hlo" --allocators ''
only replay-alloc-setting 2 "hbm replay: --allocators 'bfc,fraction=.5': expected allocator names (settings go in --config)" -- \
  "$hbm" replay "$hlo" --allocators bfc,fraction=.5
only replay-config 2 "hbm replay: --config 'bogus=1': unknown config key 'bogus' (accepted: allocator, policy, preallocate, fraction, limit, initial_region, release_on_oom, async_prealloc, report_top, trace, trace_backtrace, expandable_segments, max_split_size_mb, max_non_split_rounding_mb, roundup_power2_divisions, garbage_collection_threshold)" -- \
  "$hbm" replay "$hlo" --config allocator=bfc --config bogus=1
only replay-config-value 2 "hbm replay: --config 'allocator=bfc,fraction=7': fraction='7' is not valid: expected a number in (0, 1], e.g. .6" -- \
  "$hbm" replay "$hlo" --config allocator=bfc,fraction=7
# ... and before a missing trace is noticed: the arguments first
only replay-args-first 2 "hbm replay: --device: device 'sim:0': capacity must be > 0" -- "$hbm" replay /nonexistent --device sim:0
# exit 1 is a negative verdict, 0 success, in replay as in plan and pack
check replay-oom 1 "first OOM" -- "$hbm" replay "$src/examples/svd_oom.hlo" --device v100-16gb --allocators platform
check replay-ok 0 "platform,fraction=.9" -- "$hbm" replay "$hlo" --device h100 --allocators platform --fraction=.9
check plan-verdict 1 "DOES NOT FIT" -- "$hbm" plan "$src/examples/svd_oom.hlo" --device=V100-16GB
# every command's --help: exit status stated, and every option it lists is one the parser
# knows (asked without its value: "needs a value", never "unknown option")
for c in config demo run replay export view diff plan devices pack; do
  h=$("$hbm" $c --help); rc=$?
  if [ "$rc" != 0 ] || ! grep -q "^Exit status: " <<<"$h" || ! grep -q "^Usage: hbm $c" <<<"$h"; then
    echo "FAIL help-$c: exit $rc, or no usage or exit status"; fails=$((fails+1)); continue
  fi
  opts=$(sed -n '/^Options:/,/^$/p' <<<"$h" | grep -o '^  \(-[a-z], \)\?--[a-z-]*' | sed 's/.* //; s/^ *//')
  usage=$(sed -n '1,/^$/p' <<<"$h" | grep -o '\[--[a-z-]*' | tr -d '[' | sort -u)
  [ -n "$opts" ] || { echo "FAIL help-$c: no options listed"; fails=$((fails+1)); continue; }
  bad=0
  for o in $usage; do grep -qx -- "$o" <<<"$opts" || { echo "FAIL help-$c: $o in the usage, not in Options"; bad=1; }; done
  long=$(awk 'length($0) > 100' <<<"$h" | head -1)
  [ -z "$long" ] || { echo "FAIL help-$c: a line over 100 columns: $long"; bad=1; }
  for o in $opts; do
    [ "$o" = --help ] && continue
    out=$("$hbm" $c $o 2>&1 </dev/null)
    if grep -q "unknown option" <<<"$out"; then echo "FAIL help-$c: $o listed but refused: $out"; bad=1; fi
  done
  if [ "$bad" = 0 ]; then echo "ok   help-$c ($(wc -w <<<"$opts") options)"; else fails=$((fails+1)); fi
done
[ "$fails" = 0 ] || { echo "$fails failures"; exit 1; }
