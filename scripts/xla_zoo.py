#!/usr/bin/env python3
"""scripts/xla_zoo.py - XLA's own truth for hbm plan: compiles a zoo of real JAX programs
(training steps in plain JAX and in Flax+optax, scan over layers, every jax.checkpoint
policy, host offload, donation, data/FSDP/tensor parallel sharding over 1-8 devices,
bf16/f32/int8/fp8, shapes that exercise TPU tiling, Pallas kernels, programs a little over
a TPU's HBM) for TPU topologies (deviceless: libtpu's compiler, no TPU needed) and for the
CPU, and writes per module:

  OUT/<target>/<case>/module.hlo.txt           XLA's optimized, scheduled HLO
                                               (*.after_optimizations.txt of its dump)
  OUT/<target>/<case>/buffer-assignment.txt    *.after_optimizations-buffer-assignment.txt
  OUT/<target>/<case>/memory-usage-report.txt  *memory-usage-report.txt, where XLA writes it
  OUT/<target>/<case>/xla.json                 memory_analysis(), compile seconds, the case
  OUT/<target>/<case>/oom.txt                  XLA's error text, whole, when it does not fit
  OUT/index.json                               every case: its target, files, or its error

<target> is cpu or tpu-<generation> (v4, v5e, v5p, v6e). Run it with the project's Python
(build-py/venv, made by `scripts/deps.sh test`). Every TPU compile runs with no network:
the script re-executes itself under `unshare --net` with TPU_SKIP_MDS_QUERY=1 and the
variables docs/tpu.md names, and refuses TPU targets where it cannot (--only cpu still
works).

  xla_zoo.py [--out DIR] [--only tpu|cpu] [--generations v4,v5e,...] [--sample N]
             [--match 'TARGET/CASE-PATTERN'] [--jobs J] [--list]

--sample N keeps N cases per target, chosen by a fixed hash of their names (the same
sample every run). Cases whose program the installed JAX or compiler does not take (an
fp8 dot on a generation without it, Pallas on the CPU) are listed in index.json with the
error, not written as modules.
"""
import argparse
import fnmatch
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

# the environment that keeps libtpu from asking any server (docs/tpu.md): without the
# worker and accelerator names libtpu prints warnings and fills them with its own text
NO_NET_ENV = {
    "TPU_SKIP_MDS_QUERY": "1",
    # several compiling processes (--jobs, other users): no TPU is opened, so the lock of
    # /tmp/libtpu_lockfile that keeps two processes off one TPU is not needed
    "ALLOW_MULTIPLE_LIBTPU_LOAD": "1",
    "TPU_WORKER_HOSTNAMES": "localhost",
    "TPU_WORKER_ID": "0",
    "TPU_ACCELERATOR_TYPE": "v5litepod-4",
    "JAX_PLATFORMS": "cpu",  # the CPU backend; TPU topologies are described, not opened
    "GRPC_VERBOSITY": "ERROR",
    "TF_CPP_MIN_LOG_LEVEL": "3",
}
MARK = "HBM_ZOO_NETNS"

# topology per generation and device count (a mesh of n devices uses the first n)
TOPOLOGIES = {
    "v4": ["v4:2x2x1"],
    "v5e": ["v5e:1x1", "v5e:2x2", "v5e:2x4"],
    "v5p": ["v5p:2x2x1", "v5p:2x2x2"],
    "v6e": ["v6e:1x1", "v6e:2x2", "v6e:2x4"],
}
GENERATIONS = list(TOPOLOGIES)
FAMILY_ORDER = ["tile", "dot", "pallas", "oom", "mlp", "flax", "tfm"]
# public HBM per chip (GiB), only to aim the out-of-memory cases a little over it; the
# figure that counts is the one XLA's error prints
HBM_GIB = {"v4": 32, "v5e": 16, "v5p": 95, "v6e": 32}


# ---- the cases ---------------------------------------------------------------------------
def cases():
    """Every case, as (name, params): a deterministic list."""
    out = []

    def add(name, **p):
        out.append((name, p))

    # MLP training steps, plain JAX: per size, a few of the shardings
    sizes = {(128, 2, 64): (("none", 1), ("dp", 2), ("tp", 4), ("fsdp", 8)),
             (1000, 3, 96): (("none", 1), ("dp", 4), ("fsdp", 4), ("tp", 8)),
             (4096, 2, 512): (("none", 1), ("dp", 8), ("tp", 4))}
    for dt in ("f32", "bf16"):
        for (width, depth, batch), shards in sizes.items():
            for shard, n in shards:
                for donate in (False, True):
                    if donate and (width != 1000 or shard not in ("none", "fsdp")):
                        continue
                    add(f"mlp-{dt}-w{width}-d{depth}-b{batch}-{shard}{n}{'-donate' if donate else ''}",
                        family="mlp", dtype=dt, width=width, depth=depth, batch=batch, shard=shard,
                        n=n, donate=donate)
    # transformer training steps, plain JAX, scan over layers or a Python loop
    for dt in ("bf16", "f32"):
        for d, heads, seq, layers in ((256, 4, 128, 4), (200, 5, 100, 3)):
            for scan, shard, n in ((True, "none", 1), (True, "dp", 4), (True, "fsdp", 8), (True, "tp", 4),
                                   (False, "none", 1)):
                add(f"tfm-{dt}-d{d}-h{heads}-s{seq}-l{layers}-{'scan' if scan else 'loop'}-{shard}{n}",
                    family="tfm", dtype=dt, d=d, heads=heads, seq=seq, layers=layers, scan=scan,
                    shard=shard, n=n, policy=None, donate=shard == "fsdp")
    # jax.checkpoint under each policy (scan over layers), offload policies included
    policies = ["nothing_saveable", "everything_saveable", "dots_saveable", "checkpoint_dots",
                "dots_with_no_batch_dims_saveable", "checkpoint_dots_with_no_batch_dims",
                "save_only_these_names", "save_any_names_but_these", "save_anything_except_these_names",
                "save_from_both_policies", "save_and_offload_only_these_names",
                "offload_dot_with_no_batch_dims"]
    for pol in policies:
        for dt, shard, n in (("bf16", "dp", 4), ("f32", "none", 1)):
            add(f"remat-{pol}-{dt}-{shard}{n}", family="tfm", dtype=dt, d=256, heads=4, seq=128,
                layers=4, scan=True, shard=shard, n=n, policy=pol, donate=False)
    # Flax + optax: each optimizer and model under one of four placements, and Adam under all
    configs = (("f32", "none", 1), ("bf16", "dp", 4), ("f32", "fsdp", 4), ("bf16", "dp", 8))
    flax_cases = [(o, m, configs[(i * 2 + j) % 4]) for i, o in enumerate(("adam", "adamw", "sgd", "adafactor"))
                  for j, m in enumerate(("mlp", "tfm"))]
    flax_cases += [("adam", "mlp", c) for c in configs if c != configs[0]]
    for opt, model, (dt, shard, n) in flax_cases:
        add(f"flax-{model}-{opt}-{dt}-{shard}{n}", family="flax", model=model, opt=opt,
            dtype=dt, shard=shard, n=n, donate=shard != "none")
    # shapes and dtypes that exercise tiling
    shapes = [(7,), (1000,), (1024,), (4097,), (129, 257), (8, 128), (1, 4096), (65536, 3),
              (2, 100003), (3, 5, 7), (16, 33, 130), (512, 1, 1)]
    for shp in shapes:
        for dt in ("f32", "bf16", "int8", "fp8"):
            add(f"tile-{dt}-{'x'.join(map(str, shp))}", family="tile", dtype=dt, shape=shp, n=1)
    for shp in ((7,), (129, 257), (2, 3, 4, 5)):
        for dt in ("s32", "pred"):
            add(f"tile-{dt}-{'x'.join(map(str, shp))}", family="tile", dtype=dt, shape=shp, n=1)
    for m, k, nn in ((128, 128, 128), (100, 300, 70), (1, 4096, 4096), (4096, 7, 33)):
        for dt in ("bf16", "int8", "fp8") + (("f32",) if m in (100, 4096) else ()):
            add(f"dot-{dt}-{m}x{k}x{nn}", family="dot", dtype=dt, m=m, k=k, nn=nn, n=1)
    # Pallas kernels (TPU)
    for kind in ("add", "matmul"):
        for dt in ("f32", "bf16"):
            add(f"pallas-{kind}-{dt}", family="pallas", kind=kind, dtype=dt, n=1, tpu_only=True)
    # a little over the chip's HBM: arguments, or a temporary
    for kind in ("args", "args_near", "temp", "temp_near"):
        add(f"oom-{kind}", family="oom", kind=kind, n=1, tpu_only=True)
    return out


def stable_rank(name):
    return hashlib.sha256(name.encode()).hexdigest()


# ---- building one program ----------------------------------------------------------------
def dtype_of(jnp, name):
    return {"f32": jnp.float32, "bf16": jnp.bfloat16, "int8": jnp.int8, "s32": jnp.int32,
            "pred": jnp.bool_, "fp8": jnp.float8_e4m3fn}[name]


def build(p, devices):
    """(fn, args, jit kwargs) for the case p on devices (a list of n)."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    n = p["n"]
    mesh = Mesh(np.array(devices[:n]), ("d",))
    shard = p.get("shard", "none")

    def sds(shape, dt, spec=P()):
        return jax.ShapeDtypeStruct(tuple(shape), dt, sharding=NamedSharding(mesh, spec))

    def wspec(shape):
        # a weight's sharding: FSDP splits its first dimension, TP its last
        if shard == "fsdp" and shape[0] % n == 0:
            return P("d", *([None] * (len(shape) - 1)))
        if shard == "tp" and shape[-1] % n == 0 and len(shape) >= 2:
            return P(*([None] * (len(shape) - 1)), "d")
        return P()

    def bspec(shape):
        if shard in ("dp", "fsdp") and shape[0] % n == 0:
            return P("d", *([None] * (len(shape) - 1)))
        return P()

    fam = p["family"]
    if fam == "mlp":
        dt = dtype_of(jnp, p["dtype"])
        w, depth, b = p["width"], p["depth"], p["batch"]
        dims = [w] * (depth + 1)
        params = [(sds((dims[i], dims[i + 1]), dt, wspec((dims[i], dims[i + 1]))),
                   sds((dims[i + 1],), dt)) for i in range(depth)]
        x = sds((b, w), dt, bspec((b, w)))
        y = sds((b, w), dt, bspec((b, w)))

        def loss(params, x, y):
            h = x
            for i, (wm, bv) in enumerate(params):
                h = h @ wm + bv
                if i < len(params) - 1:
                    h = jax.nn.gelu(h)
            return jnp.mean((h.astype(jnp.float32) - y.astype(jnp.float32)) ** 2)

        def step(params, x, y):
            l, g = jax.value_and_grad(loss)(params, x, y)
            return jax.tree.map(lambda a, ga: a - (0.01 * ga).astype(a.dtype), params, g), l

        return step, (params, x, y), {"donate_argnums": (0,)} if p["donate"] else {}

    if fam == "tfm":
        return build_tfm(p, sds, wspec, bspec, jax, jnp, P)

    if fam == "flax":
        return build_flax(p, sds, wspec, bspec, jax, jnp, P)

    if fam == "tile":
        dt = dtype_of(jnp, p["dtype"])
        shp = p["shape"]
        x = sds(shp, dt)
        y = sds(shp, dt)

        def f(x, y):
            if dt == jnp.bool_:
                z = jnp.logical_xor(x, y)
                return z, jnp.any(z, axis=-1), jnp.flip(z, 0)
            a = x.astype(jnp.float32) * 2 + y.astype(jnp.float32)
            r = jnp.sum(a, axis=-1)
            t = jnp.flip(a, 0) if a.ndim == 1 else jnp.swapaxes(a, -1, -2)
            c = jnp.concatenate([x, y], axis=0)
            return a.astype(dt), r, t.astype(dt), c

        return f, (x, y), {}

    if fam == "dot":
        dt = dtype_of(jnp, p["dtype"])
        a = sds((p["m"], p["k"]), dt)
        b = sds((p["k"], p["nn"]), dt)
        acc = jnp.int32 if dt == jnp.int8 else jnp.float32

        def f(a, b):
            return jnp.dot(a, b, preferred_element_type=acc)

        return f, (a, b), {}

    if fam == "pallas":
        from jax.experimental import pallas as pl
        dt = dtype_of(jnp, p["dtype"])
        if p["kind"] == "add":
            def kern(x_ref, y_ref, o_ref):
                o_ref[...] = x_ref[...] + y_ref[...]
            shape = (1024, 512)

            def f(x, y):
                return pl.pallas_call(
                    kern, out_shape=jax.ShapeDtypeStruct(shape, dt), grid=(4,),
                    in_specs=[pl.BlockSpec((256, 512), lambda i: (i, 0))] * 2,
                    out_specs=pl.BlockSpec((256, 512), lambda i: (i, 0)))(x, y)

            return f, (sds(shape, dt), sds(shape, dt)), {}

        def kern(x_ref, y_ref, o_ref):
            o_ref[...] = jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32).astype(o_ref.dtype)

        def f(x, y):
            return pl.pallas_call(
                kern, out_shape=jax.ShapeDtypeStruct((512, 512), dt), grid=(2, 2),
                in_specs=[pl.BlockSpec((256, 512), lambda i, j: (i, 0)),
                          pl.BlockSpec((512, 256), lambda i, j: (0, j))],
                out_specs=pl.BlockSpec((256, 256), lambda i, j: (i, j)))(x, y)

        return f, (sds((512, 512), dt), sds((512, 512), dt)), {}

    if fam == "oom":
        gib = HBM_GIB[p["generation"]]
        if p["kind"].startswith("args"):
            # an f32 vector of 0.6 (0.52) of the HBM, and its double: 1.2 (1.04) of it live
            x = sds((int(gib * (0.6 if p["kind"] == "args" else 0.52) * 2**30) // 4,), jnp.float32)
            return (lambda x: x * 2), (x,), {}
        # a matmul whose product is a temporary that a sort must keep (with the sort's
        # own copies about 3 times the product: 3.3 or 1.1 of the HBM)
        m = int((gib * (1.1 if p["kind"] == "temp" else 0.37) * 2**30 / 2) ** 0.5) // 128 * 128
        a = sds((m, 256), jnp.bfloat16)

        def f(a):
            return jnp.sort(a @ a.T, axis=-1)[:, :8]

        return f, (a,), {}
    raise ValueError(f"unknown family {fam}")


def build_tfm(p, sds, wspec, bspec, jax, jnp, P):
    from jax.ad_checkpoint import checkpoint_name
    dt = dtype_of(jnp, p["dtype"])
    d, h, s, L = p["d"], p["heads"], p["seq"], p["layers"]
    n = p["n"]
    batch = 8 if n <= 4 else 16
    vocab = 1000
    ff = 4 * d
    lay = {"wqkv": (d, 3 * d), "wo": (d, d), "w1": (d, ff), "w2": (ff, d), "g": (d,)}
    if p["scan"]:
        layers = {k: sds((L,) + v, dt, P(None, *wspec(v)) if len(v) > 1 else P())
                  for k, v in lay.items()}
    else:
        layers = [{k: sds(v, dt, wspec(v) if len(v) > 1 else P()) for k, v in lay.items()} for _ in range(L)]
    params = {"emb": sds((vocab, d), dt, wspec((vocab, d))), "layers": layers,
              "out": sds((d, vocab), dt, wspec((d, vocab)))}
    tok = sds((batch, s), jnp.int32, bspec((batch, s)))

    def norm(x, g):
        xf = x.astype(jnp.float32)
        return (xf * jax.lax.rsqrt(jnp.mean(xf * xf, -1, keepdims=True) + 1e-6)).astype(x.dtype) * g

    def block(x, lp):
        y = norm(x, lp["g"])
        qkv = checkpoint_name(y @ lp["wqkv"], "qkv")
        q, k, v = jnp.split(qkv, 3, -1)
        q = q.reshape(batch, s, h, d // h)
        k = k.reshape(batch, s, h, d // h)
        v = v.reshape(batch, s, h, d // h)
        a = jnp.einsum("bqhd,bkhd->bhqk", q, k) / (d // h) ** 0.5
        mask = jnp.tril(jnp.ones((s, s), bool))
        a = jax.nn.softmax(jnp.where(mask, a.astype(jnp.float32), -1e9), -1).astype(dt)
        o = jnp.einsum("bhqk,bkhd->bqhd", a, v).reshape(batch, s, d)
        x = x + checkpoint_name(o @ lp["wo"], "attn_out")
        y = norm(x, lp["g"])
        hdn = checkpoint_name(jax.nn.gelu(y @ lp["w1"]), "mlp_hidden")
        return x + hdn @ lp["w2"]

    pol = p["policy"]
    if pol is not None:
        cp = jax.checkpoint_policies
        if pol == "save_only_these_names":
            policy = cp.save_only_these_names("qkv", "attn_out")
        elif pol in ("save_any_names_but_these", "save_anything_except_these_names"):
            policy = getattr(cp, pol)("mlp_hidden")
        elif pol == "save_from_both_policies":
            policy = cp.save_from_both_policies(cp.dots_with_no_batch_dims_saveable,
                                                cp.save_only_these_names("attn_out"))
        elif pol == "save_and_offload_only_these_names":
            policy = cp.save_and_offload_only_these_names(
                names_which_can_be_saved=["attn_out"], names_which_can_be_offloaded=["qkv", "mlp_hidden"],
                offload_src="device", offload_dst="pinned_host")
        elif pol == "offload_dot_with_no_batch_dims":
            policy = cp.offload_dot_with_no_batch_dims("device", "pinned_host")
        else:
            policy = getattr(cp, pol)
        block = jax.checkpoint(block, policy=policy)

    def loss(params, tok):
        x = params["emb"][tok]
        if p["scan"]:
            x, _ = jax.lax.scan(lambda c, lp: (block(c, lp), None), x, params["layers"])
        else:
            for lp in params["layers"]:
                x = block(x, lp)
        logits = (x @ params["out"]).astype(jnp.float32)
        lse = jax.nn.logsumexp(logits, -1)
        tgt = jnp.take_along_axis(logits, tok[..., None], -1)[..., 0]
        return jnp.mean(lse - tgt)

    def step(params, tok):
        l, g = jax.value_and_grad(loss)(params, tok)
        return jax.tree.map(lambda a, ga: a - (1e-3 * ga).astype(a.dtype), params, g), l

    return step, (params, tok), {"donate_argnums": (0,)} if p["donate"] else {}


def build_flax(p, sds, wspec, bspec, jax, jnp, P):
    import flax.linen as nn
    import optax
    dt = dtype_of(jnp, p["dtype"])
    n = p["n"]
    batch = 32
    if p["model"] == "mlp":
        class Model(nn.Module):
            @nn.compact
            def __call__(self, x):
                for w in (512, 384, 10):
                    x = nn.Dense(w, dtype=dt, param_dtype=dt)(x)
                    if w != 10:
                        x = nn.relu(x)
                return x
        xin = jax.ShapeDtypeStruct((batch, 784), dt)
    else:
        class Block(nn.Module):
            @nn.compact
            def __call__(self, x):
                y = nn.LayerNorm(dtype=dt, param_dtype=dt)(x)
                y = nn.MultiHeadDotProductAttention(num_heads=4, dtype=dt, param_dtype=dt)(y, y)
                x = x + y
                y = nn.LayerNorm(dtype=dt, param_dtype=dt)(x)
                y = nn.Dense(512, dtype=dt, param_dtype=dt)(y)
                return x + nn.Dense(128, dtype=dt, param_dtype=dt)(nn.gelu(y))

        class Model(nn.Module):
            @nn.compact
            def __call__(self, x):
                x = nn.Dense(128, dtype=dt, param_dtype=dt)(x)
                for _ in range(2):
                    x = Block()(x)
                return nn.Dense(10, dtype=dt, param_dtype=dt)(x.mean(1))
        xin = jax.ShapeDtypeStruct((batch, 64, 32), dt)
    model = Model()
    opt = {"adam": optax.adam(1e-3), "adamw": optax.adamw(1e-3), "sgd": optax.sgd(1e-2, momentum=0.9),
           "adafactor": optax.adafactor(1e-3)}[p["opt"]]
    shapes = jax.eval_shape(lambda: model.init(jax.random.key(0), jnp.zeros(xin.shape, xin.dtype)))
    ostate = jax.eval_shape(opt.init, shapes)

    def place(t):
        return jax.tree.map(lambda a: sds(a.shape, a.dtype, wspec(a.shape) if a.ndim > 1 else P()), t)

    params = place(shapes)
    state = place(ostate)
    x = sds(xin.shape, xin.dtype, bspec(xin.shape))
    y = sds((batch,), jnp.int32, bspec((batch,)))

    def step(params, state, x, y):
        def loss(pr):
            logits = model.apply(pr, x).astype(jnp.float32)
            return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()
        l, g = jax.value_and_grad(loss)(params)
        upd, state = opt.update(g, state, params)
        return optax.apply_updates(params, upd), state, l

    return step, (params, state, x, y), {"donate_argnums": (0, 1)} if p["donate"] else {}


# ---- compiling one case ------------------------------------------------------------------
_topos = {}


def devices_for(target, n):
    import jax
    if target == "cpu":
        return jax.devices("cpu")
    from jax.experimental import topologies
    gen = target[len("tpu-"):]
    for name in TOPOLOGIES[gen]:
        if name not in _topos:
            _topos[name] = topologies.get_topology_desc(platform="tpu", topology_name=name).devices
        if len(_topos[name]) >= n:
            return _topos[name]
    raise ValueError(f"no {gen} topology with {n} devices")


def topology_for(target, n):
    if target == "cpu":
        return "cpu"
    for name in TOPOLOGIES[target[4:]]:
        if len(_topos.get(name, ())) >= n:
            return name
    return "?"


def pick(dump, suffix):
    hits = sorted(f for f in os.listdir(dump) if f.endswith(suffix))
    # one jit gives one module; where XLA dumped more, the last (highest module id)
    return os.path.join(dump, hits[-1]) if hits else None


def write_whole(path, data):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(data)
    os.replace(tmp, path)


def compile_case(job):
    target, name, p, out = job
    import jax
    p = dict(p)
    if target.startswith("tpu-"):
        p["generation"] = target[4:]
    rec = {"target": target, "case": name, "params": p}
    dump = tempfile.mkdtemp(prefix="hbm-zoo-")
    try:
        devices = devices_for(target, p["n"])
        rec["topology"] = topology_for(target, p["n"])
        fn, args, kw = build(p, devices)
        lowered = jax.jit(fn, **kw).lower(*args)
        t0 = time.perf_counter()
        err = None
        try:
            compiled = lowered.compile(compiler_options={"xla_dump_to": dump, "xla_dump_hlo_as_text": True})
        except Exception as e:  # XLA's error: an out-of-memory is truth, anything else a failure
            compiled, err = None, f"{type(e).__name__}: {e}"
        rec["compile_s"] = time.perf_counter() - t0
        oom = err is not None and ("RESOURCE_EXHAUSTED" in err or "memory" in err.lower())
        if err is not None and not oom:
            rec["error"] = err
            return rec
        d = os.path.join(out, target, name)
        os.makedirs(d, exist_ok=True)
        files = {}
        hlo = pick(dump, ".after_optimizations.txt")
        if hlo:
            shutil.copyfile(hlo, os.path.join(d, "module.hlo.txt"))
            files["hlo"] = "module.hlo.txt"
        elif compiled is not None:
            write_whole(os.path.join(d, "module.hlo.txt"), compiled.as_text())
            files["hlo"] = "module.hlo.txt"
        for suffix, fname, key in ((".after_optimizations-buffer-assignment.txt", "buffer-assignment.txt", "buffer_assignment"),
                                   ("memory-usage-report.txt", "memory-usage-report.txt", "memory_usage_report")):
            f = pick(dump, suffix)
            if f:
                shutil.copyfile(f, os.path.join(d, fname))
                files[key] = fname
        if oom:
            write_whole(os.path.join(d, "oom.txt"), err + "\n")
            files["oom"] = "oom.txt"
        else:
            ma = compiled.memory_analysis()
            rec["memory_analysis"] = {k: getattr(ma, k) for k in dir(ma)
                                      if not k.startswith("_") and isinstance(getattr(ma, k), int)}
        rec["files"] = files
        rec["dir"] = f"{target}/{name}"
        write_whole(os.path.join(d, "xla.json"), json.dumps(rec, indent=1, sort_keys=True) + "\n")
        return rec
    except Exception as e:  # the program could not be built or lowered for this target
        rec["error"] = f"{type(e).__name__}: {e}"
        return rec
    finally:
        shutil.rmtree(dump, ignore_errors=True)


def init_worker():
    import jax
    jax.config.update("jax_num_cpu_devices", 8)
    import logging
    logging.getLogger("jax").setLevel(logging.ERROR)


# ---- main --------------------------------------------------------------------------------
def cache_key(a):
    """What the corpus depends on: this script, the pinned versions, the options."""
    h = hashlib.sha256()
    here = os.path.dirname(os.path.abspath(__file__))
    for f in (os.path.abspath(__file__), os.path.join(here, "..", "python", "requirements-test.txt")):
        try:
            with open(f, "rb") as fh:
                h.update(fh.read())
        except OSError:
            h.update(f.encode())
    h.update(repr((a.only, a.generations, a.sample, a.match)).encode())
    return h.hexdigest()[:16]


def rerun_in_netns(script, mark, refusal):
    """Run script again with this process's arguments in a private network namespace
    (`unshare --net`, loopback only), NO_NET_ENV and mark=1 in its environment: its exit
    status; 2, with refusal printed, where `unshare --net` does not work here."""
    try:
        ok = subprocess.run(["unshare", "--net", "true"], capture_output=True).returncode == 0
    except OSError:
        ok = False
    if not ok:
        print(refusal, file=sys.stderr)
        return 2
    env = dict(os.environ, **NO_NET_ENV, **{mark: "1"})
    return subprocess.run(["unshare", "--net", sys.executable, os.path.abspath(script)] + sys.argv[1:],
                          env=env).returncode


def in_netns():
    return os.environ.get(MARK) == "1"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="zoo-out", help="output folder (default zoo-out)")
    ap.add_argument("--only", choices=("tpu", "cpu"), help="one backend")
    ap.add_argument("--generations", default=",".join(GENERATIONS), help="TPU generations (default all)")
    ap.add_argument("--sample", type=int, default=0, help="N cases per target, a fixed choice")
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--match", help="only the cases whose TARGET/CASE matches this fnmatch pattern")
    ap.add_argument("--reuse", action="store_true",
                    help="do nothing when OUT/index.json was written by this script, these options and"
                         " the same pinned versions (python/requirements-test.txt)")
    ap.add_argument("--list", action="store_true", help="print the cases and exit")
    a = ap.parse_args()
    gens = [g for g in a.generations.split(",") if g]
    for g in gens:
        if g not in TOPOLOGIES:
            ap.error(f"unknown TPU generation {g!r} (known: {', '.join(GENERATIONS)})")
    targets = []
    if a.only != "cpu":
        targets += [f"tpu-{g}" for g in gens]
    if a.only != "tpu":
        targets.append("cpu")
    jobs = []
    for t in targets:
        cs = [(nm, p) for nm, p in cases() if not (t == "cpu" and p.get("tpu_only"))]
        if a.sample:
            cs = sorted(cs, key=lambda c: stable_rank(t + "/" + c[0]))[:a.sample]
        jobs += [(t, nm, p, os.path.abspath(a.out)) for nm, p in cs
                 if not a.match or fnmatch.fnmatchcase(f"{t}/{nm}", a.match)]
    # cheap cases first, each case on every target in turn: a run cut short has some of all
    jobs.sort(key=lambda j: (FAMILY_ORDER.index(j[2]["family"]), j[1], j[0]))
    if a.list:
        for t, nm, _, _ in jobs:
            print(f"{t}/{nm}")
        return 0
    key = cache_key(a)
    if a.reuse and not a.list:
        try:
            with open(os.path.join(a.out, "index.json")) as f:
                if json.load(f).get("key") == key:
                    print(f"xla_zoo.py: {a.out} is up to date (key {key}), reused", file=sys.stderr)
                    return 0
        except (OSError, ValueError):
            pass
    if any(t != "cpu" for t in targets) and not in_netns():
        return rerun_in_netns(__file__, MARK,
                              "xla_zoo.py: `unshare --net` does not work here (root, or user namespaces, needed);"
                              " TPU compiles are refused without a private network namespace (--only cpu works)")
    for k, v in NO_NET_ENV.items():
        os.environ.setdefault(k, v)
    import multiprocessing as mp
    os.makedirs(a.out, exist_ok=True)
    t0 = time.time()
    recs = []
    ctx = mp.get_context("spawn")
    pool = ctx.Pool(a.jobs, initializer=init_worker, maxtasksperchild=40)
    try:
        for i, r in enumerate(pool.imap_unordered(compile_case, jobs, chunksize=1)):
            recs.append(r)
            if "error" in r:
                print(f"xla_zoo.py: {r['target']}/{r['case']}: not compiled: {r['error'].splitlines()[0][:200]}",
                      file=sys.stderr)
            if (i + 1) % 25 == 0:
                print(f"xla_zoo.py: {i + 1}/{len(jobs)} ({time.time() - t0:.0f} s)", file=sys.stderr)
        pool.close()  # the workers exit on their own (terminate() would have them print stacks)
    except BaseException:
        pool.terminate()
        raise
    pool.join()
    recs.sort(key=lambda r: (r["target"], r["case"]))
    import jax
    import jaxlib
    try:
        from importlib.metadata import version
        libtpu = version("libtpu")
    except Exception:
        libtpu = None
    index = {"key": key, "jax": jax.__version__, "jaxlib": jaxlib.__version__, "libtpu": libtpu,
             "sample": a.sample, "modules": [r for r in recs if "dir" in r],
             "not_compiled": [r for r in recs if "dir" not in r]}
    write_whole(os.path.join(a.out, "index.json"), json.dumps(index, indent=1, sort_keys=True) + "\n")
    per = {}
    for r in index["modules"]:
        per[r["target"]] = per.get(r["target"], 0) + 1
    print(f"xla_zoo.py: {len(index['modules'])} modules ("
          + ", ".join(f"{t} {c}" for t, c in sorted(per.items())) + f"), {len(index['not_compiled'])} not compiled,"
          f" {time.time() - t0:.0f} s, into {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
