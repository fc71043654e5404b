# examples/fit_scan.py: a scanned training step and its forward pass, compiled for hbm fit
# (docs/fit.md, tests/test_fit_jaxterms.sh): JAX_PLATFORMS=cpu python fit_scan.py OUTDIR (jax
# 0.10.2, CPU) writes fit_scan_train.hlo and fit_scan_forward.hlo; the ones here have this
# file's path written "fit_scan.py".
import sys
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def layer(x, w):
    h = checkpoint_name(x @ w, "mlp_out")
    return jnp.tanh(h), None


def loss(params, batch):
    body = jax.checkpoint(layer, policy=jax.checkpoint_policies.save_only_these_names("mlp_out"))
    y, _ = jax.lax.scan(body, batch["x"], params["w"])
    return jnp.sum(y * y)


def train_step(params, batch):
    g = jax.grad(loss)(params, batch)
    return jax.tree.map(lambda a, b: a - 0.1 * b, params, g)


def forward(params, batch):
    y, _ = jax.lax.scan(layer, batch["x"], params["w"])
    return y


if __name__ == "__main__":
    out = sys.argv[1]
    p = {"w": jnp.zeros((6, 256, 256))}
    b = {"x": jnp.zeros((64, 256))}
    for name, f in (("fit_scan_train", train_step), ("fit_scan_forward", forward)):
        text = jax.jit(f).lower(p, b).compile().as_text()
        with open(f"{out}/{name}.hlo", "w") as fh:
            fh.write(text)
