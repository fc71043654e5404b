"""hbm.torch: libhbm as PyTorch's CUDA allocator, and hbm's report when PyTorch runs out of
memory. PyTorch is imported only when called."""
import os
import pickle
import tempfile

from . import _lib


def _torch():
    try:
        import torch
    except ImportError as e:
        raise ImportError("hbm.torch needs PyTorch, which is not installed: pip install torch") from e
    return torch


_installed = False


def use_hbm_allocator(config=None):
    """Make libhbm PyTorch's CUDA allocator (before the first CUDA allocation), through
    torch.cuda.memory.CUDAPluggableAllocator(libhbm.so, "hbm_torch_malloc", "hbm_torch_free")
    and change_current_allocator. config: an hbm configuration string
    ("allocator=vmm,limit=20GiB"); None reads the environment (HBM_*, XLA_*, TF_*).
    Returns the CUDAPluggableAllocator."""
    global _installed
    torch = _torch()
    lib = _lib.get()
    _lib.check(lib.hbm_torch_configure(_lib.cstr(config)))
    alloc = torch.cuda.memory.CUDAPluggableAllocator(_lib.path(), "hbm_torch_malloc", "hbm_torch_free")
    torch.cuda.memory.change_current_allocator(alloc)
    _installed = True
    return alloc


def _write_whole(path, data):
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=d, prefix=os.path.basename(path) + ".")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def dump_on_oom(path, record_history=True):
    """On a CUDA out-of-memory error, write what explains it.

    Under PyTorch's own allocator: the memory snapshot (torch.cuda.memory._snapshot(),
    pickled) to path and hbm's report of it to path + ".txt" (`hbm view`'s text), from
    PyTorch's OOM observer; record_history turns on
    torch.cuda.memory._record_memory_history() so the snapshot has the allocations.
    Under hbm's allocator (use_hbm_allocator): hbm's OOM report to path + ".txt"."""
    torch = _torch()
    lib = _lib.get()
    report = os.fspath(path) + ".txt"
    if _installed:
        _lib.check(lib.hbm_torch_oom_report_file(_lib.cstr(report)))
        return
    if record_history:
        torch.cuda.memory._record_memory_history()

    def observer(device, alloc, device_alloc, device_free):
        from ._trace import load
        snapshot = torch.cuda.memory._snapshot()
        _write_whole(os.fspath(path), pickle.dumps(snapshot, protocol=4))
        t = load(snapshot, name=os.fspath(path))
        with t._lock:
            _lib.check(lib.hbm_view_file(t._t, 0, 15, None, _lib.cstr(report)))

    torch._C._cuda_attach_out_of_memory_observer(observer)
