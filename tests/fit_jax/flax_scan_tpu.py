# tests/fit_jax/flax_scan_tpu.py: a Flax model scanned over 8 layers (nn.scan of nn.remat with
# dots_with_no_batch_dims_saveable) and its gradient, compiled by XLA:TPU for a v5e:1x1 topology
# without a TPU (jax 0.10.2, libtpu 0.0.52):
#   unshare --net env TPU_SKIP_MDS_QUERY=1 python flax_scan_tpu.py OUT.hlo
# flax_scan_tpu.hlo is its output, with this file's path written "flax_scan_tpu.py".
import sys, jax, jax.numpy as jnp
from jax.experimental import topologies
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
import flax.linen as nn

class MLP(nn.Module):
    @nn.compact
    def __call__(self, x, _):
        h = nn.Dense(1024, name="wi")(x)
        h = jax.nn.gelu(h)
        return nn.Dense(256, name="wo")(h), None

class Model(nn.Module):
    @nn.compact
    def __call__(self, x):
        body = nn.remat(MLP, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable, prevent_cse=False)
        y, _ = nn.scan(body, variable_axes={"params": 0}, split_rngs={"params": True}, length=8)(name="layers")(x, None)
        return y

topo = topologies.get_topology_desc(platform="tpu", topology_name="v5e:1x1")
mesh = Mesh(topo.devices[:1], ("d",))
m = Model()
x = jnp.zeros((16, 512, 256))
params = jax.eval_shape(m.init, jax.random.PRNGKey(0), x)
def loss(p, x): return jnp.sum(m.apply(p, x) ** 2)
def step(p, x):
    g = jax.grad(loss)(p, x)
    return jax.tree.map(lambda a, b: a - 0.1 * b, p, g)
s = NamedSharding(mesh, P())
args = (jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s), params), jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s))
c = jax.jit(step).lower(*args).compile()
open(sys.argv[1], "w").write(c.as_text())
print(c.memory_analysis())
