"""A JAX program for `hbm run`: its peak device memory as JAX reports it, to compare with
the peak of hbm's trace.

  XLA_PYTHON_CLIENT_ALLOCATOR=platform hbm run --trace jax.hbmt -- python examples/jax_peak.py
With the platform allocator every buffer is its own cuMemAlloc, so the two peaks should agree
up to JAX's own bookkeeping (the summary line of hbm run prints the trace's peak)."""
import jax, jax.numpy as jnp

@jax.jit
def mlp(ws, x):
    for w in ws:
        x = jax.nn.gelu(x @ w)
    return x.sum()

key = jax.random.PRNGKey(0)
ws = [jax.random.normal(jax.random.fold_in(key, i), (4096, 4096)) for i in range(8)]
x = jax.random.normal(key, (8192, 4096))
g = jax.jit(jax.grad(mlp))(ws, x)
jax.block_until_ready(g)
stats = jax.devices()[0].memory_stats()  # None with the platform allocator (jax 0.11)
print("jax peak_bytes_in_use:", stats["peak_bytes_in_use"] if stats else "not kept by this allocator")
