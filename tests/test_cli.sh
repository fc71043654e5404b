#!/usr/bin/env bash
# test_cli.sh HBM SHARED_DATA - the hbm tool's front door: help, version, config, errors.
set -u
hbm="$1"
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
check config 0 "fraction         0.75         default" -- "$hbm" config
check config-env 0 "fraction         0.6          XLA_PYTHON_CLIENT_MEM_FRACTION" -- \
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
check config-jax-space 0 "fraction         0.5          XLA_PYTHON_CLIENT_MEM_FRACTION" -- \
  env "XLA_PYTHON_CLIENT_MEM_FRACTION=0.5 " "$hbm" config
check config-tf 0 "allocator        platform     TF_GPU_ALLOCATOR" -- env TF_GPU_ALLOCATOR=cuda_malloc "$hbm" config
check config-both 2 "are both set" -- \
  env XLA_PYTHON_CLIENT_MEM_FRACTION=.5 XLA_CLIENT_MEM_FRACTION=.6 "$hbm" config
check config-string 0 "allocator        platform     config" -- "$hbm" config --config allocator=platform
check config-help 0 "XLA_PYTHON_CLIENT_MEM_FRACTION" -- "$hbm" config --help
check config-badarg 2 "unknown argument '--frob'" -- "$hbm" config --frob
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
check demo-baddev 2 "--device 'nosuch'" -- "$hbm" demo --device nosuch
tdir=$(mktemp -d); trap 'rm -rf "$tdir"' EXIT
HBM_TRACE="$tdir/demo.hbmt" "$hbm" demo >/dev/null 2>&1
if [ -s "$tdir/demo.hbmt" ]; then echo "ok   demo-trace"; else echo "FAIL demo-trace: HBM_TRACE ignored"; fails=$((fails+1)); fi
[ "$fails" = 0 ] || { echo "$fails failures"; exit 1; }
