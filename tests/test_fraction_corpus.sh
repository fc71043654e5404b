#!/bin/bash
# test_fraction_corpus.sh - issue 37: "on the shared corpus ... every advised fraction is checked
# against the need", the way a user acts on it. For every XLA:GPU module of the shared corpus, at
# capacities where JAX's 75 % does not hold it (need / .80, need / .97, need / .995), take the
# setting `hbm plan --json` advises; set that fraction (--framework-limit) and plan again: the
# verdict must be "fits", with the need held 0.43 % under XLA's limit too (what JAX 0.11 gave on
# an H200, docs/gpu.md). Where no fraction is advised, .99 must not hold it so.
. "$(dirname "$0")/lib.sh" "$@"
need_data hlo/xladumps
need python3
python3 - "$HBM" "$DATA/hlo/xladumps" <<'PY'
import glob, json, re, subprocess, sys
hbm, d = sys.argv[1], sys.argv[2]
def plan(f, *a):
    r = subprocess.run([hbm, "plan", f, "--backend", "gpu", "--json", *a], capture_output=True, text=True)
    return json.loads(r.stdout) if r.returncode in (0, 1) and r.stdout else None
mods = sorted(glob.glob(d + "/*.hlo"))
n = advised = none = bad = 0
for f in mods:
    j = plan(f)
    if not j or j["peak_bytes"] < (64 << 20):   # the small ones: the same rule, thousands of times
        continue
    need = j["peak_bytes"]
    for share in (0.80, 0.97, 0.995):
        cap = int(need / share)
        j = plan(f, "--capacity", str(cap))
        if not j or j.get("verdict") != "fits_physically_only":
            continue
        n += 1
        m = re.match(r"XLA_PYTHON_CLIENT_MEM_FRACTION=(\.\d\d) ", j.get("setting", ""))
        if m:
            advised += 1
            k = plan(f, "--capacity", str(cap), "--framework-limit", m.group(1))
            lim = k and k.get("framework_limit_bytes", 0)
            if not k or k.get("verdict") != "fits" or lim - int(lim * 0.0043) < need:
                bad += 1
                print(f"FAIL: {f} at {cap} B: {m.group(1)} advised, then {k and k.get('verdict')} ({lim} B)")
        else:
            none += 1
            k = plan(f, "--capacity", str(cap), "--framework-limit", ".99")
            lim = k and k.get("framework_limit_bytes", 0)
            if not k or lim - int(lim * 0.0043) >= need:
                bad += 1
                print(f"FAIL: {f} at {cap} B: no fraction advised, yet .99 gives {lim} B for {need} B")
print(f"{len(mods)} modules; {n} cases over JAX's 75 %: {advised} fractions advised, each fits when set;"
      f" {none} with none, .99 short each time; {bad} wrong")
sys.exit(1 if bad or not n else 0)
PY
