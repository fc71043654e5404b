#!/usr/bin/env bash
# test_zoo.sh HBM SHARED_DATA - hbm plan against XLA's own figures on a fixed sample of the
# zoo (scripts/xla_zoo.py --sample): real JAX programs compiled by XLA:TPU (deviceless,
# v4, v5e, v5p, v6e) and XLA:CPU, compared by scripts/zoo_check.py. Fails on any CPU miss
# and on any TPU miss that tests/zoo_known_misses.txt does not list. The sample is
# compiled once into build-py/zoo-cache (HBM_ZOO_CACHE; keyed by the script, the options
# and the pinned versions of python/requirements-test.txt) and reused by every build. Skips without the project's
# Python environment (build-py/venv, HBM_VENV: `scripts/deps.sh test` makes it). TPU
# compiles run without network (unshare --net); where that is impossible only the CPU
# sample runs, said so. HBM_ZOO_SAMPLE: cases per target (default 3).
set -eu
. "$(dirname "$0")/lib.sh" "$@"
venv=${HBM_VENV:-$SRC/build-py/venv}
py=$venv/bin/python
[ -x "$py" ] || skip "no project Python environment at $venv (scripts/deps.sh test makes it)"
"$py" -c 'import jax' 2>/dev/null || skip "$py has no jax (scripts/deps.sh test installs python/requirements-test.txt)"
only=()
if ! "$py" -c 'import libtpu' 2>/dev/null; then
  echo "note: no libtpu in $venv: the CPU sample only"
  only=(--only cpu)
elif ! unshare --net true 2>/dev/null; then
  echo "note: no private network namespace (unshare --net needs root or user namespaces): the CPU sample only"
  only=(--only cpu)
fi
# the cache depends on the generator and the pinned versions, not on this build of hbm: one
# for every build folder (the ASan pass reuses what the fast pass compiled)
cache=${HBM_ZOO_CACHE:-$(dirname "$venv")/zoo-cache/sample}
# the sample: compiled once, then reused while the script, options and versions stay
nice "$py" "$SRC/scripts/xla_zoo.py" --reuse --out "$cache" --sample "${HBM_ZOO_SAMPLE:-3}" \
  ${only[@]+"${only[@]}"} --jobs 2 >"$T/gen.log" 2>&1 ||
  { grep -v '^WARNING: All log\|^I0000\|^W0000\|^E0000' "$T/gen.log" | tail -20; fail "scripts/xla_zoo.py failed"; }
grep '^xla_zoo.py: .*\(modules\|reused\)' "$T/gen.log" || true
[ -e "$cache/index.json" ] || fail "scripts/xla_zoo.py wrote no $cache/index.json"
"$py" "$SRC/scripts/zoo_check.py" "$cache" --hbm "$HBM" --known "$SRC/tests/zoo_known_misses.txt" ||
  fail "hbm and XLA differ on modules tests/zoo_known_misses.txt does not list (above)"
# the comparison can fail: a module whose recorded figure is off by one byte is a miss
fake=$T/fake
mkdir -p "$fake"
"$py" - "$cache" "$fake" <<'PY'
import json, os, shutil, sys
src, dst = sys.argv[1:]
idx = json.load(open(os.path.join(src, "index.json")))
m = next(r for r in idx["modules"] if r["target"] == "cpu" and "memory_analysis" in r)
shutil.copytree(os.path.join(src, m["dir"]), os.path.join(dst, m["dir"]))
m["memory_analysis"]["argument_size_in_bytes"] += 1
idx["modules"] = [m]
json.dump(idx, open(os.path.join(dst, "index.json"), "w"))
PY
if "$py" "$SRC/scripts/zoo_check.py" "$fake" --hbm "$HBM" >"$T/fake.log" 2>&1; then
  cat "$T/fake.log"
  fail "zoo_check.py passed a module whose XLA figure was changed by one byte"
fi
grep -q 'arguments  hbm' "$T/fake.log" || { cat "$T/fake.log"; fail "zoo_check.py did not list the changed figure"; }
# no private network namespace: the generator refuses to compile for TPU (exit 2, saying why)
mkdir "$T/nons"
printf '#!/bin/sh\nexit 1\n' >"$T/nons/unshare"
chmod +x "$T/nons/unshare"
rc=0
env -u HBM_ZOO_NETNS PATH="$T/nons:$PATH" "$py" "$SRC/scripts/xla_zoo.py" --only tpu --sample 1 \
  --out "$T/refused" >"$T/refused.log" 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -q 'TPU compiles are refused without a private network namespace' "$T/refused.log" ||
  { cat "$T/refused.log"; fail "xla_zoo.py without unshare --net: exit $rc, want 2 and a refusal"; }
[ ! -e "$T/refused" ] || fail "xla_zoo.py wrote $T/refused although it refused"
echo "ok: the zoo sample, a changed figure caught, TPU refused without a network namespace"
