"""hbm: accelerator memory, explained, from Python.

A thin layer over libhbm.so (ctypes): every figure and text comes from the library, the
same code the `hbm` command runs.

    import hbm
    p = hbm.plan(compiled)             # a jax Compiled, HLO text or a path
    p.temp_size_in_bytes, p.fits, p.peak_buffers
    f = hbm.fit(compiled, device="A100-40GB")   # what change makes it fit, verified
    t = hbm.load(torch.cuda.memory._snapshot())
    t.peak_bytes_in_use, t.replay("allocator=bfc", device="h100")

Every failure raises hbm.Error (ParseError, ConfigError, OutOfMemory); nothing prints.
"""
from . import _lib
from ._errors import ConfigError, Error, LibraryNotFound, MissingDependency, OutOfMemory, ParseError, TopologyError
from ._fit import Fit, fit
from ._plan import Plan, plan
from ._trace import Trace, diff, load
from ._fleet import Fleet, fleet, summarize
from . import jax, torch  # noqa: E402  (neither imports its framework until called)

__all__ = ["plan", "Plan", "fit", "Fit", "load", "Trace", "diff", "fleet", "Fleet", "summarize", "Error",
           "ParseError", "ConfigError", "OutOfMemory", "LibraryNotFound", "MissingDependency", "TopologyError",
           "library_path", "jax", "torch"]


def library_path():
    """The libhbm.so this package uses."""
    return _lib.path()


def __getattr__(name):
    if name == "__version__":  # the library's version, read when asked
        return _lib.get().hbm_version().decode()
    raise AttributeError("module 'hbm' has no attribute %r" % name)
