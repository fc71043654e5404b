"""Real JAX inputs for hbm plan / view / fit, with JAX's own figures to check them against:
run under XLA_FLAGS="--xla_dump_to=DIR --xla_dump_hlo_as_text" (XLA writes every module's
*after_optimizations.txt and *buffer-assignment.txt there), it compiles a few jitted
functions, writes each one's compiled.memory_analysis() to DIR/memory_analysis.csv, and a
profile of one run (jax.profiler.trace: DIR/profile/**/*.xplane.pb, what XProf reads).

  XLA_FLAGS="--xla_dump_to=d --xla_dump_hlo_as_text" python examples/jax_capture.py d"""
import csv, os, sys

import jax, jax.numpy as jnp

out = sys.argv[1]

def mlp(ws, x):
    for w in ws:
        x = jax.nn.gelu(x @ w)
    return (x * x).mean()

def train_step(ws, x):
    loss, g = jax.value_and_grad(mlp)(ws, x)
    return loss, [w - 1e-3 * gw for w, gw in zip(ws, g)]

def attention(q, k, v):
    s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / jnp.sqrt(q.shape[-1])
    return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), v)

key = jax.random.PRNGKey(0)
ws = [jax.random.normal(jax.random.fold_in(key, i), (4096, 4096)) for i in range(8)]
x = jax.random.normal(key, (8192, 4096))
q = jax.random.normal(key, (8, 16, 2048, 128), dtype=jnp.bfloat16)
cases = [("train_step", jax.jit(train_step), (ws, x)),
         ("train_step_donated", jax.jit(train_step, donate_argnums=0), None),
         ("attention", jax.jit(attention), (q, q, q)),
         ("grad_remat", jax.jit(jax.grad(jax.checkpoint(mlp))), (ws, x))]
rows = []
for name, f, args in cases:
    if args is None:
        args = ([w + 0 for w in ws], x)
    c = f.lower(*args).compile()
    m = c.memory_analysis()
    rows.append([name, m.argument_size_in_bytes, m.output_size_in_bytes, m.temp_size_in_bytes,
                 m.alias_size_in_bytes, m.generated_code_size_in_bytes])
    r = c(*args)
    jax.block_until_ready(r)
with open(os.path.join(out, "memory_analysis.csv"), "w", newline="") as fh:
    w = csv.writer(fh)
    w.writerow(["name", "argument_size_in_bytes", "output_size_in_bytes", "temp_size_in_bytes",
                "alias_size_in_bytes", "generated_code_size_in_bytes"])
    w.writerows(rows)
step = jax.jit(train_step)
with jax.profiler.trace(os.path.join(out, "profile")):
    jax.block_until_ready(step(ws, x))
print("jax", jax.__version__, jax.devices()[0].device_kind, "peak_bytes_in_use",
      jax.devices()[0].memory_stats()["peak_bytes_in_use"])
