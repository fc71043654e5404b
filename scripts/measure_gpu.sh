#!/usr/bin/env bash
# measure_gpu.sh [OUTDIR] - the GPU measurements and real captures docs/gpu.md reports, in one
# go, on a machine with an NVIDIA GPU, PyTorch and JAX. Run from the repository root; builds
# ./build (or $BUILD) first when it has no hbm. Writes OUTDIR/results.txt (and prints it), and
# the real inputs it captured: OUTDIR/torch/*.pickle (PyTorch snapshots from program start,
# with the allocator's own counters beside them), OUTDIR/xla/ (XLA's dumps with its buffer
# assignments, compiled.memory_analysis(), a profile). Each step has its own time limit, so a
# hung step costs its limit and not the rest.
set -u
B=${BUILD:-build}
O=${1:-gpu-results}
PY=${PYTHON:-python3}
mkdir -p "$O/torch" "$O/xla"
step() { # step SECONDS TITLE COMMAND...: run with a limit, say how it ended
  local lim=$1 title=$2 t0=$SECONDS rc
  shift 2
  echo "== $title"
  timeout "$lim" "$@"
  rc=$?
  echo "-- $title: exit $rc, $((SECONDS - t0)) s"
  return $rc
}
{
  echo "== machine"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  date -u
  "$PY" -c 'import torch, jax; print("torch", torch.__version__, "jax", jax.__version__)'
  if [ ! -x "$B/hbm" ]; then
    echo "== build (log: $O/build.log)"
    step 240 "build" sh -c "cmake -S . -B '$B' -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build '$B' -j\$(nproc)" \
      >"$O/build.log" 2>&1 || tail -30 "$O/build.log"
  fi
  # HBM_CUDA_DRIVER unset: tests/cuda_test.h picks libcuda.so.1 when it has a device
  step 150 "tests against the real driver" sh -c "cd '$B' && env -u HBM_CUDA_DRIVER ctest -R 'cuda|torch_api|test_run' --output-on-failure"
  step 90 "PyTorch snapshot from program start (default settings)" \
    "$PY" examples/torch_snapshot_capture.py "$O/torch/step.pickle"
  step 90 "PyTorch snapshot from program start (expandable_segments:True)" \
    env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "$PY" examples/torch_snapshot_capture.py "$O/torch/step_es.pickle"
  step 150 "JAX: XLA's dumps, memory_analysis, a profile" \
    env XLA_FLAGS="--xla_dump_to=$O/xla/dump --xla_dump_hlo_as_text" "$PY" examples/jax_capture.py "$O/xla"
  step 90 "alloc+free latency" "$B"/bench_cuda
  step 90 "PyTorch training step: PyTorch's allocator" "$PY" examples/torch_train_bench.py torch
  for a in vmm cuda_async bfc; do
    step 90 "PyTorch training step: hbm $a" env HBM_ALLOCATOR=$a "$PY" examples/torch_train_bench.py hbm "$B"/libhbm.so
  done
  step 90 "hbm run on JAX (platform allocator): trace peak vs JAX's peak_bytes_in_use" \
    env XLA_PYTHON_CLIENT_ALLOCATOR=platform "$B"/hbm run --trace "$O/xla/jax-run.hbmt" -- "$PY" examples/jax_peak.py
  step 90 "hbm run on PyTorch with its own caching allocator (the cudaMalloc path)" \
    "$B"/hbm run --trace "$O/torch/torch-run.hbmt" -- "$PY" examples/torch_train_bench.py torch
} 2>&1 | tee "$O/results.txt"
