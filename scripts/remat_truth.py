#!/usr/bin/env python3
"""scripts/remat_truth.py - XLA:TPU's real rematerialization pass beside `hbm fit --remat xla`.

Compiles a few real JAX training steps for a TPU topology without a TPU (libtpu's compiler),
sized a little above the chip's HBM so that XLA:TPU rematerializes before it gives up, three
ways each (every compile in a fresh process):

  default   the compiler as shipped (its rematerialization algorithm: "treewidth", not public)
  always    xla_tpu_rematerialization_algo=ALWAYS_REMAT (the public algorithm of
            xla/hlo/transforms/simplifiers/hlo_rematerialization.cc that hbm imitates)
  off       xla_jf_rematerialization_percent_shared_memory_limit=1000: the limit is far above
            the HBM, nothing is rematerialized; XLA then reports the program does not fit, and
            its optimized module is the one its pass would have worked on

and writes per case OUT/<case>/{default,always,off}.hlo (the *.after_optimizations.txt of the
dump), OUT/<case>/<mode>.json (memory_analysis() or XLA's error, the instructions XLA cloned
as NAME.remat, libtpu's log lines on rematerialization: its limit and its before/after), then
runs `hbm fit OFF.hlo --remat xla --capacity CAP --framework-limit 1 --json` and writes
OUT/summary.json and a table: per case the values each recomputes and the peak each reaches.

  remat_truth.py --hbm build/hbm [--out DIR] [--match PATTERN] [--percent P] [--modes M,...] [--list]

--percent P sets xla_jf_rematerialization_percent_shared_memory_limit for default/always (95
is the compiler's default): a small P makes a small program rematerialize (the test's case).
TPU compiles run under `unshare --net` with the variables docs/tpu.md names; the script
re-executes itself so, and refuses to run where it cannot.
"""
import argparse
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from xla_zoo import rerun_in_netns  # noqa: E402  TPU compiles run offline, as the zoo's do
MARK = "HBM_REMAT_TRUTH_NETNS"
TOPOLOGY = "v5e:1x1"
# what XLA:TPU's out-of-memory error names as the available HBM of one v5e chip
# ("exceeds available HBM (15.75G)"); the summary uses the figure each error prints
CAPACITY = "15.75GiB"
LOG_DIR = "/tmp/tpu_logs"  # libtpu's log folder: one file per process, named by its pid

# name: (kind, params). Sizes chosen so that the step needs about 105-130 % of 15.75 GiB.
CASES = {
    "mlp": ("mlp", dict(width=8192, depth=8, batch=106496)),
    "mlp_wide": ("mlp", dict(width=16384, depth=4, batch=81920)),
    "tfm": ("tfm", dict(d=2048, heads=16, seq=2048, batch=8, layers=6, scan=False)),
    "mlp_scan": ("mlp_scan", dict(width=8192, depth=8, batch=40960)),
    "tfm_scan": ("tfm", dict(d=2048, heads=16, seq=2048, batch=4, layers=6, scan=True)),
    # the test's case: small, made to rematerialize by a low --percent
    "small": ("mlp", dict(width=2048, depth=4, batch=32768)),
}
MODES = {
    "default": {},
    "always": {"xla_tpu_rematerialization_algo": "ALWAYS_REMAT"},
    "off": {"xla_jf_rematerialization_percent_shared_memory_limit": 1000,
            # the module as the pass receives it (scheduled, before memory space assignment)
            "xla_dump_hlo_pass_re": "rematerialization"},
}


def build(kind, p, dev):
    import jax
    import jax.numpy as jnp
    from jax.sharding import SingleDeviceSharding
    s = SingleDeviceSharding(dev)
    bf = jnp.bfloat16

    def sds(shape, dt=bf):
        return jax.ShapeDtypeStruct(tuple(shape), dt, sharding=s)

    if kind in ("mlp", "mlp_scan"):
        w, d, b = p["width"], p["depth"], p["batch"]
        x = sds((b, w))
        if kind == "mlp":
            params = [sds((w, w)) for _ in range(d)]
        else:
            params = sds((d, w, w))

        def loss(ps, x):
            if kind == "mlp":
                h = x
                for pm in ps:
                    h = jnp.tanh(h @ pm)
            else:
                h, _ = jax.lax.scan(lambda c, pm: (jnp.tanh(c @ pm), None), x, ps)
            return jnp.mean(h.astype(jnp.float32) ** 2)

        def step(ps, x):
            g = jax.grad(loss)(ps, x)
            return jax.tree.map(lambda a, ga: a - (0.01 * ga).astype(a.dtype), ps, g)

        return step, (params, x)
    # a pre-norm transformer, causal attention, MLP of 4 x d
    d, h, sq, b, L = p["d"], p["heads"], p["seq"], p["batch"], p["layers"]
    lay = {"wqkv": (d, 3 * d), "wo": (d, d), "w1": (d, 4 * d), "w2": (4 * d, d)}
    if p["scan"]:
        layers = {k: sds((L,) + v) for k, v in lay.items()}
    else:
        layers = [{k: sds(v) for k, v in lay.items()} for _ in range(L)]
    x0 = sds((b, sq, d))

    def norm(x):
        xf = x.astype(jnp.float32)
        return (xf * jax.lax.rsqrt(jnp.mean(xf * xf, -1, keepdims=True) + 1e-6)).astype(x.dtype)

    def block(x, lp):
        q, k, v = jnp.split(norm(x) @ lp["wqkv"], 3, -1)
        q, k, v = (t.reshape(b, sq, h, d // h) for t in (q, k, v))
        a = jnp.einsum("bqhd,bkhd->bhqk", q, k) / (d // h) ** 0.5
        mask = jnp.tril(jnp.ones((sq, sq), bool))
        a = jax.nn.softmax(jnp.where(mask, a.astype(jnp.float32), -1e9), -1).astype(bf)
        x = x + jnp.einsum("bhqk,bkhd->bqhd", a, v).reshape(b, sq, d) @ lp["wo"]
        return x + jax.nn.gelu(norm(x) @ lp["w1"]) @ lp["w2"]

    def loss(ps, x):
        if p["scan"]:
            x, _ = jax.lax.scan(lambda c, lp: (block(c, lp), None), x, ps)
        else:
            for lp in ps:
                x = block(x, lp)
        return jnp.mean(x.astype(jnp.float32) ** 2)

    def step(ps, x):
        g = jax.grad(loss)(ps, x)
        return jax.tree.map(lambda a, ga: a - (1e-3 * ga).astype(a.dtype), ps, g)

    return step, (layers, x0)


def compile_one(case, mode, out, percent):
    """In a fresh process: compile CASE under MODE, write OUT/<case>/<mode>.{hlo,json}."""
    import jax
    from jax.experimental import topologies
    kind, p = CASES[case]
    dev = topologies.get_topology_desc(platform="tpu", topology_name=TOPOLOGY).devices[0]
    fn, args = build(kind, p, dev)
    opts = dict(MODES[mode])
    if mode != "off" and percent is not None:
        opts["xla_jf_rematerialization_percent_shared_memory_limit"] = percent
    dump = tempfile.mkdtemp(prefix="hbm-remat-")
    rec = {"case": case, "mode": mode, "params": p, "kind": kind, "topology": TOPOLOGY,
           "compiler_options": opts}
    try:
        lowered = jax.jit(fn, donate_argnums=(0,)).lower(*args)
        t0 = time.perf_counter()
        try:
            c = lowered.compile(compiler_options={"xla_dump_to": dump, "xla_dump_hlo_as_text": True, **opts})
            ma = c.memory_analysis()
            rec["memory_analysis"] = {k: getattr(ma, k) for k in
                                      ("argument_size_in_bytes", "output_size_in_bytes",
                                       "alias_size_in_bytes", "temp_size_in_bytes")}
            m = rec["memory_analysis"]
            rec["need_bytes"] = (m["argument_size_in_bytes"] + m["output_size_in_bytes"]
                                 - m["alias_size_in_bytes"] + m["temp_size_in_bytes"])
        except Exception as e:  # XLA's out-of-memory error is part of the truth
            rec["error"] = f"{type(e).__name__}: {e}"
        rec["compile_s"] = round(time.perf_counter() - t0, 2)
        hits = sorted(f for f in os.listdir(dump) if f.endswith(".after_optimizations.txt"))
        d = os.path.join(out, case)
        os.makedirs(d, exist_ok=True)
        pre = sorted(f for f in os.listdir(dump) if f.endswith(".before_rematerialization_with_stats.txt"))
        if pre:  # the input of XLA:TPU's final rematerialization
            shutil.copyfile(os.path.join(dump, pre[-1]), os.path.join(d, mode + ".pre.hlo"))
        if hits:
            shutil.copyfile(os.path.join(dump, hits[-1]), os.path.join(d, mode + ".hlo"))
            with open(os.path.join(d, mode + ".hlo")) as f:
                text = f.read()
            rec["remat"] = cloned(text)
        with open(os.path.join(d, mode + ".json.tmp"), "w") as f:
            json.dump(rec, f, indent=1, sort_keys=True)
        os.replace(os.path.join(d, mode + ".json.tmp"), os.path.join(d, mode + ".json"))
    finally:
        shutil.rmtree(dump, ignore_errors=True)


def cloned(text):
    """Every instruction XLA recomputed: its clone is NAME.remat (NAME.remat2, ... again);
    gte.remat and bitcast.remat are the readers XLA adds for a clone, not values."""
    return sorted(set(re.findall(r"^\s*(?:ROOT )?%?([\w.\-]+?)\.remat\d* = ", text, re.M)) - {"gte", "bitcast"})


def tpu_log_lines(pid):
    """libtpu's lines on rematerialization for the process pid (its limit, before/after)."""
    lines = []
    try:
        names = [n for n in os.listdir(LOG_DIR) if n.endswith(f".{pid}") and ".INFO." in n]
    except OSError:
        return lines
    for n in names:
        with open(os.path.join(LOG_DIR, n), errors="replace") as f:
            for ln in f:
                if "rematerialization" in ln and "XLA::TPU" in ln:
                    lines.append(ln.split("] ", 1)[-1].strip())
    return lines


GIB = 1 << 30


def gib(b):
    return "-" if b is None else f"{b / GIB:.2f} GiB"


def parse_size(s):
    m = re.fullmatch(r"([0-9.]+)\s*([KMGT]?)(i?B)?", s.strip())
    if not m:
        raise ValueError(f"bad size {s!r}")
    return int(float(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}[m.group(2)])


def run_case(case, a):
    d = os.path.join(a.out, case)
    os.makedirs(d, exist_ok=True)
    res = {"case": case}
    for mode in a.modes.split(","):
        if a.reuse:  # the compiles of an earlier run: hbm's side again only
            try:
                with open(os.path.join(d, mode + ".json")) as f:
                    res[mode] = json.load(f)
                if "remat" in res[mode] and os.path.exists(os.path.join(d, mode + ".hlo")):
                    with open(os.path.join(d, mode + ".hlo")) as f:  # read again, by today's rule
                        res[mode]["remat"] = cloned(f.read())
                continue
            except (OSError, ValueError):
                pass
        cmd = [sys.executable, os.path.abspath(__file__), "--one", case, mode, "--out", a.out]
        if a.percent is not None:
            cmd += ["--percent", str(a.percent)]
        pr = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        log, _ = pr.communicate()
        try:
            with open(os.path.join(d, mode + ".json")) as f:
                rec = json.load(f)
        except (OSError, ValueError):
            res[mode] = {"error": "compile process failed: " + log[-2000:]}
            continue
        rec["tpu_log"] = tpu_log_lines(pr.pid)
        with open(os.path.join(d, mode + ".json"), "w") as f:
            json.dump(rec, f, indent=1, sort_keys=True)
        res[mode] = rec
    off = os.path.join(d, "off.pre.hlo")  # what XLA's pass received, else the module without it
    if not os.path.exists(off):
        off = os.path.join(d, "off.hlo")
    if a.hbm and os.path.exists(off):
        cap = a.capacity
        m = re.search(r"available HBM \(([0-9.]+[KMGT]?)\)", res.get("off", {}).get("error", ""))
        if cap is None:
            cap = m.group(1) + "iB" if m else CAPACITY
            if a.percent is not None:  # XLA's limit is P % of the HBM, hbm's baseline 95 % of cap
                cap = str(parse_size(cap) * a.percent // 95)
        cmd = [a.hbm, "fit", off, "--capacity", cap, "--framework-limit", "1", "--remat", "xla", "--json"]
        pr = subprocess.run(cmd, capture_output=True, text=True)
        res["hbm_cmd"] = " ".join(cmd)
        try:
            j = json.loads(pr.stdout)
        except ValueError:
            res["hbm_error"] = (pr.stderr or pr.stdout)[-2000:]
        else:
            res["hbm"] = {
                "module": os.path.basename(off),
                "capacity": cap,
                "tracker_before_bytes": j["xla_tracker_before_bytes"],
                "tracker_after_bytes": j["xla_tracker_after_bytes"],
                "before_bytes": j["bytes_before"],
                "xla_limit_bytes": j["xla_limit_bytes"],
                "baseline": sorted(c["instruction"] for c in j["changes"] if c.get("xla_chosen") and c["kind"] == "remat"),
                "baseline_peak_bytes": j["xla"]["peak_bytes"],
                "baseline_message": j["xla"].get("xla_message", ""),
                "hbm": sorted(c["instruction"] for c in j["changes"] if c.get("chosen") and c["kind"] == "remat"),
                "hbm_peak_bytes": j["hbm"]["peak_bytes"],
            }
    with open(os.path.join(d, "result.json"), "w") as f:
        json.dump(res, f, indent=1, sort_keys=True)
    return res


def table(results):
    rows = ["| case | need, no remat | XLA:TPU default: recomputes, peak | ALWAYS_REMAT: recomputes, peak "
            "| hbm --remat xla: recomputes, peak | match | XLA's tracker (log) | hbm's tracker |",
            "|---|---|---|---|---|---|---|---|"]
    for r in results:
        h = r.get("hbm", {})

        def cell(m):
            x = r.get(m, {})
            if "remat" not in x and "error" in x:
                return "error"
            return f"{', '.join(x.get('remat', [])) or 'nothing'}; {gib(x.get('need_bytes'))}" + \
                (" (does not fit)" if "error" in x else "")
        base = h.get("baseline")
        ref = r.get("always", r.get("default", {}))  # the public algorithm's, else the default's
        match = "-" if base is None or "remat" not in ref else ("yes" if base == ref["remat"] else "no")
        logs = [ln for ln in ref.get("tpu_log", []) if "reduction" in ln]
        xla_red = logs[-1].split("reduction:", 1)[1].strip() if logs else "-"
        rows.append(f"| {r['case']} | {gib(h.get('before_bytes'))} | {cell('default')} | {cell('always')} | "
                    f"{', '.join(base or []) or 'nothing'}; {gib(h.get('baseline_peak_bytes'))} | {match} | "
                    f"{xla_red} | {gib(h.get('tracker_before_bytes'))} => {gib(h.get('tracker_after_bytes'))} |")
    return "\n".join(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="remat-truth", help="output folder (default remat-truth)")
    ap.add_argument("--hbm", help="the hbm binary (build/hbm); without it only the compiles run")
    ap.add_argument("--match", help="only the cases whose name matches this fnmatch pattern")
    ap.add_argument("--capacity", help="hbm's --capacity (default: what XLA's error names, else 15.75GiB)")
    ap.add_argument("--percent", type=int, help="xla_jf_rematerialization_percent_shared_memory_limit")
    ap.add_argument("--modes", default=",".join(MODES), help="the compiles to run (default all: default,always,off)")
    ap.add_argument("--reuse", action="store_true", help="take the compiles OUT holds; run hbm again")
    ap.add_argument("--list", action="store_true", help="print the cases and exit")
    ap.add_argument("--one", nargs=2, metavar=("CASE", "MODE"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    a.out = os.path.abspath(a.out)
    for m in a.modes.split(","):
        if m not in MODES:
            ap.error(f"unknown mode {m!r} (modes: {', '.join(MODES)})")
    if a.one:
        if os.environ.get(MARK) != "1":
            print("remat_truth.py: --one runs only inside the script's network namespace", file=sys.stderr)
            return 2
        import logging
        logging.getLogger("jax").setLevel(logging.ERROR)
        compile_one(a.one[0], a.one[1], a.out, a.percent)
        return 0
    names = [c for c in CASES if (fnmatch.fnmatchcase(c, a.match) if a.match else c != "small")]
    if a.list:
        print("\n".join(names))
        return 0
    if not names:
        ap.error(f"no case matches {a.match!r} (cases: {', '.join(CASES)})")
    if os.environ.get(MARK) != "1":
        return rerun_in_netns(__file__, MARK, "remat_truth.py: `unshare --net` does not work here; TPU compiles"
                                              " are refused without a private network namespace")
    os.makedirs(a.out, exist_ok=True)
    results = [run_case(c, a) for c in names]
    with open(os.path.join(a.out, "summary.json.tmp"), "w") as f:
        json.dump(results, f, indent=1, sort_keys=True)
    os.replace(os.path.join(a.out, "summary.json.tmp"), os.path.join(a.out, "summary.json"))
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
