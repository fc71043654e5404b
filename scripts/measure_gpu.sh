#!/usr/bin/env bash
# measure_gpu.sh - the GPU measurements docs/gpu.md owes, in one go, on a machine with an
# NVIDIA GPU, PyTorch and JAX. Run from the repository root after `make build`.
# Writes everything to gpu-results.txt (and prints it).
set -u
B=${BUILD:-build}
out=gpu-results.txt
{
  echo "== machine"; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; date -u
  echo "== tests against the real driver (HBM_CUDA_DRIVER unset: cuda_test.h picks libcuda.so.1)"
  (cd "$B" && env -u HBM_CUDA_DRIVER ctest -R 'cuda|torch' --output-on-failure)
  echo "== alloc+free latency"
  "$B"/bench_cuda
  echo "== PyTorch training step: PyTorch's allocator vs hbm (vmm, cuda_async)"
  python examples/torch_train_bench.py torch
  HBM_ALLOCATOR=vmm python examples/torch_train_bench.py hbm "$B"/libhbm.so
  HBM_ALLOCATOR=cuda_async python examples/torch_train_bench.py hbm "$B"/libhbm.so
  echo "== hbm run on JAX (platform allocator): trace peak vs JAX's peak_bytes_in_use"
  XLA_PYTHON_CLIENT_ALLOCATOR=platform "$B"/hbm run --trace jax-trace.csv -- python examples/jax_peak.py
  echo "== hbm run on PyTorch with its own caching allocator (the cudaMalloc path)"
  "$B"/hbm run --trace torch-trace.csv -- python examples/torch_train_bench.py torch
} 2>&1 | tee "$out"
