#!/usr/bin/env python3
"""scripts/zoo_check.py - hbm plan against XLA on every module scripts/xla_zoo.py wrote.

  zoo_check.py ZOO_DIR [--hbm build/hbm] [--known tests/zoo_known_misses.txt] [--jobs J]
               [--json OUT]

Runs `hbm plan MODULE --json` (hbm reads the backend from the module) on each module of
ZOO_DIR/index.json and compares four figures with XLA's own:

  arguments, outputs, aliases   memory_analysis() (argument/output/alias_size_in_bytes).
                                On TPU these equal the buffer assignment's color-0
                                parameter, maybe-live-out and parameter+live-out
                                allocations; each module is checked, and a module where
                                they differ is counted ("memory_analysis != buffer
                                assignment").
  temp                          memory_analysis()'s temp_size_in_bytes. On TPU that is the
                                buffer assignment's color-0 (HBM) preallocated-temp
                                allocation rounded up to 16 KiB, or 0 when it holds only
                                tuple tables and loop scalars (docs/tpu.md, Rules); the
                                allocation itself is kept in --json as
                                buffer_assignment_temp. TPU modules are planned with
                                --device TPU-<gen>, whose rules differ by generation.

A module XLA:TPU refused for memory (oom.txt) is checked for hbm's verdict instead:
`hbm plan MODULE --device TPU-<gen>` must say it does not fit (exit 1); figure "fits".

Prints exact/total per target and figure, each miss (module, figure, hbm, XLA,
difference), and the speed: hbm's plan time (the whole process) against XLA's compile
time per module, medians and how many modules reach a tenth. Exit 1 on any miss on the
CPU, and on any TPU miss not in the known-misses file (lines `PATTERN FIGURE REASON`:
PATTERN an fnmatch pattern over TARGET/CASE, FIGURE a figure or *, '#' comments); known
entries that matched nothing are listed, so the file can be pruned. Exit 2 on bad input.
"""
import argparse
import concurrent.futures as cf
import fnmatch
import json
import os
import re
import statistics
import subprocess
import sys
import time

FIGURES = ("arguments", "outputs", "aliases", "temp")
OOM_REQUIRED = re.compile(r"required for HLO temporaries \(([\d.]+)G\)")
ALLOC = re.compile(r"^allocation \d+: size (\d+),(?: color (\d+),)?(.*):\s*$")


def buffer_assignment(path):
    """Color-0 sums of XLA's buffer-assignment dump: parameter, live-out, aliased, temp."""
    s = {"param": 0, "out": 0, "alias": 0, "temp": 0}
    with open(path) as f:
        for line in f:
            m = ALLOC.match(line)
            if not m or int(m.group(2) or 0) != 0:
                continue
            size, rest = int(m.group(1)), m.group(3)
            par, out = "parameter" in rest, "maybe-live-out" in rest
            if par:
                s["param"] += size
            if out:
                s["out"] += size
            if par and out:
                s["alias"] += size
            if "preallocated-temp" in rest:
                s["temp"] += size
    return s


def load_index(zoo):
    """ZOO/index.json; where a run was cut short, the xla.json of each module written."""
    path = os.path.join(zoo, "index.json")
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    mods = []
    for t in sorted(os.listdir(zoo)):
        td = os.path.join(zoo, t)
        for c in sorted(os.listdir(td)) if os.path.isdir(td) else ():
            x = os.path.join(td, c, "xla.json")
            if os.path.exists(x):
                with open(x) as f:
                    mods.append(json.load(f))
    if not mods:
        raise ValueError(f"{zoo}: no index.json and no module (scripts/xla_zoo.py --out {zoo} writes them)")
    return {"modules": mods, "not_compiled": [], "partial": True}


def load_known(path):
    known = []
    if not path or not os.path.exists(path):
        return known
    with open(path) as f:
        for no, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split(None, 2)
            if len(parts) < 3:
                raise ValueError(f"{path}:{no}: want PATTERN FIGURE REASON, got {line!r}")
            known.append({"pattern": parts[0], "figure": parts[1], "reason": parts[2], "used": 0})
    return known


def run_hbm(hbm, path, args):
    t0 = time.perf_counter()
    p = subprocess.run([hbm, "plan", path] + args, capture_output=True, text=True)
    return p, time.perf_counter() - t0


def check(job):
    hbm, zoo, rec = job
    d = os.path.join(zoo, rec["dir"])
    files = rec.get("files", {})
    res = {"module": rec["dir"], "target": rec["target"], "compile_s": rec.get("compile_s"), "figures": {}}
    if "hlo" not in files:
        res["error"] = "no HLO written"
        return res
    hlo = os.path.join(d, files["hlo"])
    if "oom" in files:
        gen = rec["target"][len("tpu-"):]
        p, dt = run_hbm(hbm, hlo, ["--device", f"TPU-{gen}"])
        res["plan_s"] = dt
        res["figures"]["fits"] = {"hbm": {0: "fits", 1: "does not fit"}.get(p.returncode, f"exit {p.returncode}"),
                                  "xla": "does not fit", "truth": "XLA's compile-time OOM"}
        # the memory XLA says the program needs, in its words (GiB, two decimals), against
        # hbm's peak so written
        with open(os.path.join(d, files["oom"])) as f:
            m = OOM_REQUIRED.search(f.read())
        pj, _ = run_hbm(hbm, hlo, ["--json"])
        if m and pj.returncode == 0:
            res["figures"]["oom_G"] = {"hbm": f"{json.loads(pj.stdout)['peak_bytes'] / 2**30:.2f}G",
                                       "xla": m.group(1) + "G", "truth": "XLA's OOM text"}
        return res
    # a TPU module is planned for its generation (the rules that differ between them, such
    # as the size of a tuple's table, follow the device)
    tpu = rec["target"].startswith("tpu")
    p, dt = run_hbm(hbm, hlo, ["--json"] + (["--device", "TPU-" + rec["target"][len("tpu-"):]] if tpu else []))
    res["plan_s"] = dt
    if p.returncode not in (0, 1) or not p.stdout.startswith("{"):
        res["error"] = f"hbm plan exit {p.returncode}: {(p.stderr or p.stdout).strip()[:300]}"
        return res
    j = json.loads(p.stdout)
    ma = rec["memory_analysis"]
    got = {"arguments": j["argument_size_in_bytes"], "outputs": j["output_size_in_bytes"],
           "aliases": j["alias_size_in_bytes"], "temp": j["temp_size_in_bytes"]}
    xla = {"arguments": ma["argument_size_in_bytes"], "outputs": ma["output_size_in_bytes"],
           "aliases": ma["alias_size_in_bytes"], "temp": ma["temp_size_in_bytes"]}
    truth = dict.fromkeys(FIGURES, "memory_analysis")
    if "buffer_assignment" in files and rec["target"].startswith("tpu"):
        ba = buffer_assignment(os.path.join(d, files["buffer_assignment"]))
        res["ma_vs_ba"] = [k for k, b in (("arguments", "param"), ("outputs", "out"), ("aliases", "alias"))
                           if xla[k] != ba[b]]
        # hbm's temp is memory_analysis()'s: the HBM temp allocation rounded up to 16 KiB, or 0
        # when it holds only tuple tables and loop scalars (docs/tpu.md, Rules); the
        # allocation as the buffer assignment sizes it is kept in the JSON (not compared)
        res["buffer_assignment_temp"] = ba["temp"]
    for k in FIGURES:
        res["figures"][k] = {"hbm": got[k], "xla": xla[k], "truth": truth[k]}
    return res


def human(n):
    return f"{n:,}" if isinstance(n, int) else str(n)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("zoo")
    ap.add_argument("--hbm", default=os.path.join(os.path.dirname(__file__), "..", "build", "hbm"))
    ap.add_argument("--known", help="known TPU misses (tests/zoo_known_misses.txt)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json", help="write every module's figures here")
    ap.add_argument("--quiet-known", action="store_true", help="do not list known misses one by one")
    a = ap.parse_args()
    try:
        index = load_index(a.zoo)
        known = load_known(a.known)
    except (OSError, ValueError) as e:
        print(f"zoo_check.py: {e}", file=sys.stderr)
        return 2
    if not os.access(a.hbm, os.X_OK):
        print(f"zoo_check.py: no hbm at {a.hbm}", file=sys.stderr)
        return 2
    mods = index["modules"]
    with cf.ThreadPoolExecutor(max(1, a.jobs)) as ex:
        results = list(ex.map(check, [(a.hbm, a.zoo, r) for r in mods]))
    print(f"zoo_check.py: {len(results)} modules in {a.zoo} (jax {index.get('jax')}, libtpu {index.get('libtpu')});"
          f" {len(index.get('not_compiled', []))} cases XLA did not compile (index.json says why)")
    targets = sorted({r["target"] for r in results})
    figs = list(FIGURES) + ["fits", "oom_G"]
    info = ("oom_G",)  # shown and counted, not required
    table = {t: {f: [0, 0] for f in figs} for t in targets}
    misses, errors = [], []
    for r in results:
        if "error" in r:
            errors.append(r)
            continue
        for f, v in r["figures"].items():
            c = table[r["target"]][f]
            c[1] += 1
            if v["hbm"] == v["xla"]:
                c[0] += 1
            elif f not in info:
                misses.append((r, f, v))
    print("truth: arguments, outputs, aliases, temp: memory_analysis() (TPU: planned with --device"
          " TPU-<gen>); fits: XLA:TPU's compile-time OOM; oom_G: the memory"
          " XLA:TPU's OOM text says the program needs, against hbm's peak in GiB (not required)")
    w = max([len(t) for t in targets] + [6])
    print(f"{'target':<{w}}  {'modules':>7}  " + "  ".join(f"{f:>11}" for f in figs))
    for t in targets:
        n = sum(1 for r in results if r["target"] == t)
        cells = [f"{c[0]}/{c[1]}" if c[1] else "-" for c in (table[t][f] for f in figs)]
        print(f"{t:<{w}}  {n:>7}  " + "  ".join(f"{c:>11}" for c in cells))
    # whole-module exactness: every required figure equal
    for t in targets:
        rs = [r for r in results if r["target"] == t and "error" not in r]
        ok = sum(1 for r in rs if all(v["hbm"] == v["xla"] for f, v in r["figures"].items() if f not in info))
        print(f"{t}: {ok}/{len(rs)} modules exact on every required figure")
    inconsistent = [r for r in results if r.get("ma_vs_ba")]
    if inconsistent:
        print(f"memory_analysis != buffer assignment on {len(inconsistent)} TPU modules:"
              + "".join(f"\n  {r['module']}: {', '.join(r['ma_vs_ba'])}" for r in inconsistent[:20]))
    failing = []
    listed = 0
    for r, f, v in misses:
        k = None
        if r["target"].startswith("tpu"):
            for e in known:
                if fnmatch.fnmatchcase(r["module"], e["pattern"]) and e["figure"] in (f, "*"):
                    k = e
                    break
        if k:
            k["used"] += 1
            listed += 1
        else:
            failing.append((r, f, v))
    print(f"misses: {len(misses)} ({listed} known, {len(failing)} not)")
    for r, f, v in misses:
        k = next((e for e in known if r["target"].startswith("tpu") and fnmatch.fnmatchcase(r["module"], e["pattern"])
                  and e["figure"] in (f, "*")), None)
        if k and a.quiet_known:
            continue
        diff = v["hbm"] - v["xla"] if isinstance(v["hbm"], int) else ""
        tail = f"  [known: {k['reason']}]" if k else ""
        print(f"  {r['module']}  {f}  hbm {human(v['hbm'])}  XLA {human(v['xla'])}"
              + (f"  diff {diff:+,}" if diff != "" else "") + tail)
    for r in errors:
        print(f"  {r['module']}  error: {r['error']}")
    if misses:
        # the misses grouped: program family (the case's first word), figure, hbm over or under
        groups = {}
        for r, f, v in misses:
            fam = r["module"].split("/", 1)[1].split("-", 1)[0]
            side = "-" if not isinstance(v["hbm"], int) else ("over" if v["hbm"] > v["xla"] else "under")
            g = groups.setdefault((r["target"].split("-")[0], fam, f, side), [])
            g.append(v["hbm"] - v["xla"] if isinstance(v["hbm"], int) else 0)
        print("misses by backend, family, figure (hbm over or under XLA): count, median and smallest |difference|")
        for (be, fam, f, side), ds in sorted(groups.items()):
            print(f"  {be:<4} {fam:<7} {f:<9} {side:<5} {len(ds):>4}  median {statistics.median(ds):+,.0f}"
                  f"  smallest {min(ds, key=abs):+,}")
    unused = [e for e in known if not e["used"]]
    if unused:
        print("known misses that matched nothing (remove them?): "
              + "; ".join(f"{e['pattern']} {e['figure']}" for e in unused))
    timed = [r for r in results if r.get("plan_s") is not None and r.get("compile_s")]
    if timed:
        ps = [r["plan_s"] for r in timed]
        cs = [r["compile_s"] for r in timed]
        ratio = [r["plan_s"] / r["compile_s"] for r in timed]
        tenth = sum(1 for x in ratio if x <= 0.1)
        print(f"speed: hbm plan median {statistics.median(ps) * 1e3:.1f} ms (max {max(ps) * 1e3:.1f} ms),"
              f" XLA compile median {statistics.median(cs) * 1e3:.1f} ms (max {max(cs):.2f} s);"
              f" hbm/XLA median {statistics.median(ratio):.4f}; {tenth}/{len(timed)} modules at <= a tenth")
        slow = sorted(timed, key=lambda r: -r["plan_s"] / r["compile_s"])[:5]
        for r in slow:
            if r["plan_s"] > 0.1 * r["compile_s"]:
                print(f"  over a tenth: {r['module']}  hbm {r['plan_s'] * 1e3:.1f} ms  XLA {r['compile_s'] * 1e3:.1f} ms")
    if a.json:
        tmp = a.json + ".tmp"
        with open(tmp, "w") as f:
            json.dump(results, f, indent=1)
        os.replace(tmp, a.json)
    bad = [x for x in failing]
    cpu_bad = sum(1 for r, _, _ in bad if r["target"] == "cpu")
    if bad or errors:
        print(f"zoo_check.py: FAIL: {len(bad)} misses not listed as known ({cpu_bad} on the CPU),"
              f" {len(errors)} modules hbm could not plan")
        return 1
    print("zoo_check.py: ok: every miss is listed as known" if misses else "zoo_check.py: ok: no misses")
    return 0


if __name__ == "__main__":
    sys.exit(main())
