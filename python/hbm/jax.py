"""hbm.jax: plan a JAX function without running it. JAX is imported only when called."""
from ._plan import plan as _plan


def _jax():
    try:
        import jax
    except ImportError as e:
        raise ImportError("hbm.jax needs JAX, which is not installed: pip install jax "
                          "(for NVIDIA GPUs: pip install 'jax[cuda12]')") from e
    return jax


def plan(fn, *args, device=None, capacity=None, framework_limit=None, **kwargs):
    """jax.jit(fn).lower(*args, **kwargs).compile(), then hbm.plan of the compiled module.
    device / capacity / framework_limit judge it as hbm.plan does."""
    jax = _jax()
    compiled = jax.jit(fn).lower(*args, **kwargs).compile()
    return _plan(compiled, device=device, capacity=capacity, framework_limit=framework_limit)
