"""Step time and peak reserved memory of a small transformer training step, with PyTorch's
own caching allocator or with hbm as the pluggable allocator (run once each; the pluggable
allocator must be set before CUDA is first used, so one process cannot do both).

  python examples/torch_train_bench.py torch
  HBM_ALLOCATOR=vmm python examples/torch_train_bench.py hbm build/libhbm.so
Prints: mode, median step ms, peak reserved bytes (torch: max_memory_reserved; hbm: the
allocator's peak_bytes_reserved from hbm_stats via ctypes)."""
import ctypes, statistics, sys, time

import torch

mode = sys.argv[1]
lib = None
if mode == "hbm":
    path = sys.argv[2] if len(sys.argv) > 2 else "libhbm.so"
    torch.cuda.memory.change_current_allocator(
        torch.cuda.memory.CUDAPluggableAllocator(path, "hbm_torch_malloc", "hbm_torch_free"))
    lib = ctypes.CDLL(path)

torch.manual_seed(0)
layer = torch.nn.TransformerEncoderLayer(d_model=1024, nhead=16, dim_feedforward=4096, batch_first=True)
model = torch.nn.TransformerEncoder(layer, num_layers=8).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
x = torch.randn(16, 512, 1024, device="cuda")

def step():
    opt.zero_grad(set_to_none=True)
    loss = model(x).float().pow(2).mean()
    loss.backward()
    opt.step()

for _ in range(5):
    step()
torch.cuda.synchronize()
times = []
for _ in range(30):
    t0 = time.perf_counter()
    step()
    torch.cuda.synchronize()
    times.append((time.perf_counter() - t0) * 1e3)

if mode == "hbm":
    class Stats(ctypes.Structure):  # hbm_stats, version 1 (hbm/alloc.h)
        _fields_ = [("version", ctypes.c_uint32), ("reserved_", ctypes.c_uint32)] + [
            (n, ctypes.c_uint64) for n in (
                "num_allocs num_frees num_ooms bytes_in_use peak_bytes_in_use largest_alloc_size bytes_limit "
                "bytes_reserved peak_bytes_reserved largest_free_block_bytes pool_bytes peak_pool_bytes "
                "num_regions device_allocs device_frees").split()]
    lib.hbm_torch_allocator.restype = ctypes.c_void_p
    st = Stats()
    lib.hbm_stats_get(ctypes.c_void_p(lib.hbm_torch_allocator(0)), ctypes.byref(st))
    peak = st.peak_bytes_reserved
else:
    peak = torch.cuda.max_memory_reserved()
print(f"{mode}: median step {statistics.median(times):.2f} ms, peak reserved {peak} bytes")
