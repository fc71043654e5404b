"""hbm as PyTorch's CUDA allocator: the three lines a user adds (marked below).

Run:  HBM_ALLOCATOR=vmm python examples/torch_pluggable.py [path/to/libhbm.so]
The allocator is configured from the environment (HBM_ALLOCATOR=vmm|cuda_async|platform|bfc,
HBM_LIMIT=20GiB, XLA_PYTHON_CLIENT_MEM_FRACTION=.8, ...; see `hbm config --help`). When an
allocation fails, hbm prints its OOM report to stderr and PyTorch raises OutOfMemoryError.
"""
import sys

import torch

lib = sys.argv[1] if len(sys.argv) > 1 else "libhbm.so"
# --- the three lines -------------------------------------------------------------------
alloc = torch.cuda.memory.CUDAPluggableAllocator(lib, "hbm_torch_malloc", "hbm_torch_free")
torch.cuda.memory.change_current_allocator(alloc)
# (before the first CUDA tensor is created)
# ----------------------------------------------------------------------------------------

x = torch.randn(4096, 4096, device="cuda")
y = x @ x
torch.cuda.synchronize()
print("ok:", y.shape, "allocated through hbm")
