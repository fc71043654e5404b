"""Record a PyTorch memory snapshot from program start: the training step of
torch_train_bench.py (an 8-layer transformer, AdamW), with the allocator's history on before
the first CUDA allocation, so every segment_alloc in it is a decision of PyTorch's caching
allocator. Writes SNAP (torch.cuda.memory._dump_snapshot) and SNAP.stats.json (the
allocator's own counters at the end: torch.cuda.memory_stats()), to check hbm view's peaks and
hbm replay's twin against what PyTorch did.

  python examples/torch_snapshot_capture.py step.pickle [steps]
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python examples/torch_snapshot_capture.py es.pickle"""
import json, sys

import torch

out = sys.argv[1]
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
torch.cuda.memory._record_memory_history(max_entries=1000000)
torch.manual_seed(0)
layer = torch.nn.TransformerEncoderLayer(d_model=1024, nhead=16, dim_feedforward=4096, batch_first=True)
model = torch.nn.TransformerEncoder(layer, num_layers=8).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
x = torch.randn(16, 512, 1024, device="cuda")
for _ in range(steps):
    opt.zero_grad(set_to_none=True)
    loss = model(x).float().pow(2).mean()
    loss.backward()
    opt.step()
torch.cuda.synchronize()
del loss
torch.cuda.empty_cache()  # one recorded empty_cache() for the twin to replay
torch.cuda.memory._dump_snapshot(out)
st = torch.cuda.memory_stats()
keep = {k: v for k, v in st.items() if k.startswith(("allocated_bytes.all.", "reserved_bytes.all.",
        "num_alloc_retries", "num_ooms", "segment.all.", "allocation.all."))}
with open(out + ".stats.json", "w") as f:
    json.dump({"torch": torch.__version__, "device": torch.cuda.get_device_name(0),
               "conf": torch.cuda.memory._get_current_allocator_settings()
               if hasattr(torch.cuda.memory, "_get_current_allocator_settings") else None,
               "stats": keep}, f, indent=1, sort_keys=True)
print(out, "peak allocated", st["allocated_bytes.all.peak"], "peak reserved", st["reserved_bytes.all.peak"])
