"""hbm.jax against real JAX: XLA:CPU compiles, XLA:TPU compiles without a TPU (libtpu), and
checkpoint policies tried on a Flax + optax training step (run by tests/test_python.sh).

Skips, saying why, without JAX (or flax/optax for the policy test). The TPU tests also need
libtpu and TPU_SKIP_MDS_QUERY=1 (set by the harness, which runs pytest inside `unshare --net`
so that libtpu's metadata-server lookup cannot leave the machine).
"""
import importlib.util
import os
import sys

import pytest

# several processes on one machine may load libtpu: its lock file would refuse all but one
os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")

import hbm  # noqa: E402

jax = pytest.importorskip("jax", reason="JAX is not installed (pip install jax)")
import jax.numpy as jnp  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

HAVE_LIBTPU = importlib.util.find_spec("libtpu") is not None
tpu = pytest.mark.skipif(
    not HAVE_LIBTPU or os.environ.get("TPU_SKIP_MDS_QUERY") != "1",
    reason="XLA:TPU compiles need libtpu and TPU_SKIP_MDS_QUERY=1 inside `unshare --net` (libtpu %s)"
    % ("installed" if HAVE_LIBTPU else "not installed"))

if jax.default_backend() != "cpu":
    pytest.skip("these tests compare with XLA:CPU; JAX's default backend here is %s" % jax.default_backend(),
                allow_module_level=True)


def mlp(x, w1, w2):
    h = jnp.tanh(x @ w1)
    return (h @ w2).sum(0), h.mean()


def mlp_args():
    return (jax.ShapeDtypeStruct((96, 128), jnp.float32), jax.ShapeDtypeStruct((128, 200), jnp.float32),
            jax.ShapeDtypeStruct((200, 72), jnp.float32))


def memory_analysis(compiled):
    ma = compiled.memory_analysis()
    return {k: getattr(ma, k) for k in ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
                                        "temp_size_in_bytes")}


def need(ma):
    return ma["argument_size_in_bytes"] + ma["output_size_in_bytes"] - ma["alias_size_in_bytes"] \
        + ma["temp_size_in_bytes"]


# --- plan on the CPU -------------------------------------------------------------------------------

def test_plan_cpu_equals_memory_analysis():
    p = hbm.jax.plan(mlp, *mlp_args())
    ma = memory_analysis(jax.jit(mlp).lower(*mlp_args()).compile())  # XLA's figures, compiled apart
    assert ma["temp_size_in_bytes"] > 0  # a module with a temp heap, not only parameters
    for k, v in ma.items():
        assert getattr(p, k) == v, k
        assert p.memory_analysis[k] == v
    assert p.peak_bytes >= need(ma)
    # XLA's buffer assignment, dumped by the compile, beside hbm's: the same to the buffer
    assert p.xla is not None and p.xla["comparison"]["same"], p.xla and p.xla["comparison"]
    assert p.xla["xla"]["temp_size_in_bytes"] == p.temp_size_in_bytes
    assert p.same_as_memory_analysis
    text = str(p)
    assert "hbm's own plan: the same figures and the same buffers" in text
    assert "temp_size_in_bytes                 hbm = XLA" in text
    assert "generated_code_size_in_bytes" in text and "hbm does not predict code size" in text
    assert repr(p).startswith("<hbm.jax.Plan mlp, XLA:CPU")
    page = p._repr_html_()
    assert "<table>" in page and "memory_analysis()" in page and "<iframe" in page
    assert isinstance(p, hbm.Plan) and p.flops and p.flops > 0


def test_plan_cpu_donation_and_verdict():
    def step(w, g):
        return w - 0.1 * g, (g * g).sum()
    args = (jax.ShapeDtypeStruct((512, 256), jnp.float32),) * 2
    p = hbm.jax.plan(step, *args, donate_argnums=0, capacity="1MiB", framework_limit=1)
    ma = memory_analysis(jax.jit(step, donate_argnums=0).lower(*args).compile())
    assert ma["alias_size_in_bytes"] == 512 * 256 * 4
    assert {k: getattr(p, k) for k in ma} == ma
    assert p.fits is False and p.capacity_bytes == 1 << 20  # 1 MiB arguments alone: does not fit
    assert "DOES NOT FIT" in str(p)


def test_fit_of_a_step_without_policies():
    f = hbm.jax.fit(mlp, *mlp_args(), capacity="160KiB", framework_limit=1)
    assert isinstance(f, hbm.Fit) and f.bytes_before == hbm.jax.plan(mlp, *mlp_args()).peak_bytes
    assert f.memory_analysis["argument_size_in_bytes"] == (96 * 128 + 128 * 200 + 200 * 72) * 4
    assert str(f).startswith("hbm.jax.fit of mlp: XLA:CPU")


# --- errors ---------------------------------------------------------------------------------------

def test_jax_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "jax", None)
    with pytest.raises(hbm.MissingDependency) as e:
        hbm.jax.plan(mlp, 1)
    assert isinstance(e.value, ImportError) and e.value.package == "jax" and "pip install jax" in str(e.value)


def test_libtpu_missing(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "libtpu" else real(name, *a))
    with pytest.raises(hbm.MissingDependency) as e:
        hbm.jax.plan(mlp, *mlp_args(), device="TPU-v5e")
    assert e.value.package == "libtpu" and "pip install libtpu" in str(e.value) and "TPU-v5e" in str(e.value)


def test_mesh_larger_than_the_cpu_backend():
    with pytest.raises(hbm.TopologyError) as e:
        hbm.jax.plan(mlp, *mlp_args(), mesh={"data": 64})
    assert "needs 64 devices" in str(e.value) and "jax_num_cpu_devices" in str(e.value)


def test_plan_without_a_dumped_assignment(monkeypatch):
    # a compile that left no *after_optimizations.hlo.pb (a compile cache hit, an older
    # JAX): hbm plans compiled.as_text() and says XLA's assignment is not available
    monkeypatch.setattr(hbm.jax.glob, "glob", lambda pattern: [])
    p = hbm.jax.plan(mlp, *mlp_args())
    assert p.xla is None and "dumped no optimized module" in p.buffer_assignment_note
    assert "XLA's buffer assignment: not available (XLA:CPU dumped no optimized module" in str(p)
    assert p.same_as_memory_analysis  # memory_analysis() is still compared, and agrees
    assert p.temp_size_in_bytes == p.memory_analysis["temp_size_in_bytes"] > 0


def test_plan_on_a_jax_mesh_of_the_cpu():
    mesh = jax.sharding.Mesh(jax.devices()[:1], ("data",))
    p = hbm.jax.plan(mlp, *mlp_args(), mesh=mesh, in_shardings=(P("data"), P(), P()))
    assert p.where == "XLA:CPU" and p.xla is not None and p.xla["comparison"]["same"]


def test_bad_arguments():
    with pytest.raises(hbm.Error, match="nope"):
        hbm.jax.plan(mlp, *mlp_args(), device="nope")
    with pytest.raises(ValueError, match="device= or capacity="):
        hbm.jax.fit(mlp, *mlp_args())
    with pytest.raises(ValueError, match="mesh"):
        hbm.jax.plan(mlp, *mlp_args(), mesh={"data": 0})
    with pytest.raises(ValueError, match="no policy 'nope'"):
        hbm.jax.fit(lambda policy: mlp, *mlp_args(), capacity="1GiB", policies=["nope"])


@tpu
def test_unknown_topology():
    with pytest.raises(hbm.TopologyError) as e:
        hbm.jax.plan(mlp, *mlp_args(), device="v5e:3x3")
    assert "v5e:3x3" in str(e.value)
    with pytest.raises(hbm.TopologyError, match="v9:2x2"):
        hbm.jax.plan(mlp, *mlp_args(), device="v9:2x2")


@tpu
def test_mesh_larger_than_the_topology():
    with pytest.raises(hbm.TopologyError) as e:
        hbm.jax.plan(mlp, *mlp_args(), device="v5e:2x2", mesh={"data": 8})
    assert "needs 8 devices" in str(e.value) and "v5e:2x2 has 4" in str(e.value)


# --- XLA:TPU without a TPU ------------------------------------------------------------------------

@tpu
def test_plan_sharded_on_a_tpu_topology():
    p = hbm.jax.plan(mlp, *mlp_args(), device="TPU-v5e", mesh={"data": 4}, in_shardings=(P("data"), P(), P()))
    assert p.topology == "v5e:2x2" and "XLA:TPU v5e:2x2 (4 devices" in p.where
    assert p.argument_size_in_bytes == p.memory_analysis["argument_size_in_bytes"]
    # hbm's TPU sizing rules are not yet exact on every figure: each row says which way it differs
    for key, mine, xla, line in p.agreement:
        if mine is not None:
            assert line.startswith("hbm = XLA") == (mine == xla), (key, mine, xla, line)
            assert mine == getattr(p, key) and xla == p.memory_analysis[key]
    assert p.capacity_bytes == 16128 << 20 and p.fits  # hbm's TPU-v5e, per chip
    assert p.xla is not None  # XLA:TPU's buffer assignment, dumped by the compile
    assert "XLA's own buffer assignment" in str(p) and "temp_size_in_bytes" in str(p)
    # the same slice named as JAX names it, x replicated: its shard is the whole f32[96,128], 4x
    # the f32[24,128] above (tiles of (8,128) f32 pad neither)
    q = hbm.jax.plan(mlp, *mlp_args(), device="v5e:2x2", mesh={"data": 4})
    assert q.topology == "v5e:2x2"
    assert q.memory_analysis["argument_size_in_bytes"] - p.memory_analysis["argument_size_in_bytes"] == 72 * 128 * 4
    assert q.argument_size_in_bytes == q.memory_analysis["argument_size_in_bytes"]
    # the sharding carried by an argument (a NamedSharding on a one-CPU mesh; an AbstractMesh
    # given as mesh=) is rebuilt on the TPU's devices: the same split as in_shardings gave
    from jax.sharding import AbstractMesh, NamedSharding
    cpu = jax.sharding.Mesh(jax.devices()[:1], ("data",))
    x, w1, w2 = mlp_args()
    x = jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=NamedSharding(cpu, P("data")))
    r = hbm.jax.plan(mlp, x, w1, w2, device="TPU-v5e", mesh=AbstractMesh((4,), ("data",)))
    assert r.topology == "v5e:2x2"
    assert r.memory_analysis["argument_size_in_bytes"] == p.memory_analysis["argument_size_in_bytes"]


# --- checkpoint policies tried for real -----------------------------------------------------------

def flax_step_maker(vocab=64, d=32, layers=3, heads=2, optimizer="adam"):
    """make_step(policy): a small Flax transformer (a scan over layers, each rematerialized
    under the policy; causal attention, RMSNorm, an MLP whose up projection is named
    "mlp_up" by checkpoint_name) trained with optax; returns (make_step, args)."""
    nn = pytest.importorskip("flax.linen", reason="flax is not installed")
    optax = pytest.importorskip("optax", reason="optax is not installed")
    from jax.ad_checkpoint import checkpoint_name

    class Block(nn.Module):
        @nn.compact
        def __call__(self, x, _):
            b, t, _ = x.shape
            q, k, v = jnp.split(nn.Dense(3 * d, use_bias=False)(nn.RMSNorm()(x)).reshape(b, t, 3 * heads, -1), 3, 2)
            s = jnp.einsum("bqhc,bkhc->bhqk", q, k) / jnp.sqrt(q.shape[-1])
            s = jnp.where(jnp.tril(jnp.ones((t, t), bool)), s, -1e9)
            a = jnp.einsum("bhqk,bkhc->bqhc", jax.nn.softmax(s, -1), v).reshape(b, t, d)
            x = x + nn.Dense(d, use_bias=False)(a)
            h = checkpoint_name(nn.Dense(4 * d, use_bias=False)(nn.RMSNorm()(x)), "mlp_up")
            return x + nn.Dense(d, use_bias=False)(jax.nn.gelu(h)), None

    class Model(nn.Module):
        policy: object

        @nn.compact
        def __call__(self, tok):
            x = nn.Embed(vocab, d)(tok)
            layer = nn.scan(nn.remat(Block, policy=self.policy, prevent_cse=False), variable_axes={"params": 0},
                            split_rngs={"params": True}, length=layers)
            x, _ = layer()(x, None)
            return nn.Dense(vocab, use_bias=False)(nn.RMSNorm()(x))

    tok = jax.ShapeDtypeStruct((8, 64), jnp.int32)
    opt = getattr(optax, optimizer)(1e-3)
    params = jax.eval_shape(lambda: Model(None).init(jax.random.PRNGKey(0), jnp.zeros((8, 64), jnp.int32)))
    state = jax.eval_shape(opt.init, params)

    def make_step(policy):
        model = Model(policy)

        def step(params, state, tok):
            def loss(p):
                logits = model.apply(p, tok)
                return optax.softmax_cross_entropy_with_integer_labels(logits[:, :-1], tok[:, 1:]).mean()
            value, grads = jax.value_and_grad(loss)(params)
            updates, state = opt.update(grads, state, params)
            return optax.apply_updates(params, updates), state, value
        return jax.jit(step, donate_argnums=(0, 1))
    return make_step, (params, state, tok)


def test_fit_policies_flax_transformer_on_the_cpu():
    make_step, args = flax_step_maker()
    loose = hbm.jax.fit(make_step, *args, capacity="1GiB", framework_limit=1)
    assert all(r["fits"] for r in loose.rows)
    # judged again, without compiling, against one byte under what saving everything needs
    everything = loose["everything_saveable"]["plan"]
    capacity = everything.peak_bytes - 1
    t = loose.against(capacity=capacity, framework_limit=1)
    assert [r["flops"] for r in sorted(t.rows, key=lambda r: r["name"])] == [
        r["flops"] for r in sorted(loose.rows, key=lambda r: r["name"])]
    names = [r["name"] for r in t.rows]
    for expected in ("everything_saveable", "nothing_saveable", "dots_saveable", "dots_with_no_batch_dims_saveable",
                     "save_only_these_names('mlp_up')"):
        assert expected in names
    assert t.checkpoint_names == ["mlp_up"]
    assert t.usable_bytes == capacity
    assert t["everything_saveable"]["fits"] is False and t["everything_saveable"]["extra_flops"] == 0
    assert t["everything_saveable"]["peak_bytes"] == everything.peak_bytes
    for r in t.rows:  # each row is hbm's plan of that compile, its verdict against the usable bytes
        assert r["error"] is None, r
        assert r["fits"] == (r["peak_bytes"] <= capacity)
        assert r["xla_temp_bytes"] == r["plan"].memory_analysis["temp_size_in_bytes"]
    assert t["nothing_saveable"]["extra_flops"] > 0  # recomputation costs FLOPs, as XLA counts them
    best = t.best
    assert best is t.rows[0] and best["fits"] and best["name"] != "everything_saveable"
    assert all(best["extra_flops"] <= r["extra_flops"] for r in t.rows if r["fits"])
    # the chosen policy fits when compiled again, by XLA's own figures
    again = make_step(t.policy).lower(*args).compile()
    assert need(memory_analysis(again)) <= capacity
    text = str(t)
    assert text.startswith("hbm.jax.fit: %d checkpoint policies of make_step on XLA:CPU" % len(t.rows))
    assert "cheapest that fits: " + best["name"] in text
    assert "<table>" in t._repr_html_() and t.as_dict()["best"] == best["name"]
    # against one byte, nothing fits: the table says by how much the least peak is over
    none = loose.against(capacity=1, framework_limit=1)
    least = min(r["peak_bytes"] for r in none.rows)
    assert none.best is None and none.policy is None and not any(r["fits"] for r in none.rows)
    assert str(none).splitlines()[-1].startswith("no policy fits: the least peak is %s (" % hbm.jax._human(least))


@tpu
def test_fit_policies_on_a_tpu_topology():
    make_step, args = flax_step_maker(layers=2)
    cp = jax.checkpoint_policies
    offload = "offload_dot_with_no_batch_dims('device', 'pinned_host')"
    t = hbm.jax.fit(make_step, *args, device="v5e:1x1",
                    policies={"everything_saveable": cp.everything_saveable,
                              "nothing_saveable": cp.nothing_saveable,
                              offload: cp.offload_dot_with_no_batch_dims("device", "pinned_host")})
    assert [r["error"] for r in t.rows] == [None] * 3
    assert "XLA:TPU v5e:1x1" in str(t) and t.usable_bytes == 16128 << 20
    assert t.best is not None and t.best["fits"]
    assert t["nothing_saveable"]["flops"] > t["everything_saveable"]["flops"]
    # the offloaded residuals live in host memory, as hbm and XLA:TPU both count them
    p = t[offload]["plan"]
    assert p.host_temp_size_in_bytes > 0
    assert p.host_temp_size_in_bytes == p.memory_analysis["host_temp_size_in_bytes"]


def test_cpu_policies_leave_offload_out():
    make_step, args = flax_step_maker(layers=1)
    where = hbm.jax._Where(None, None)
    assert "pinned_host" in where.memory_kinds()  # the CPU has one, but it is the same RAM
    names = [n for n, _ in hbm.jax._standard_policies(jax, make_step, where, args)[0]]
    assert names == ["everything_saveable", "nothing_saveable", "dots_saveable", "dots_with_no_batch_dims_saveable",
                     "save_only_these_names('mlp_up')"]
