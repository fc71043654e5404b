#!/usr/bin/env python3
"""bench_fleet_dask.py FILE... - what engine="dask" costs against engine="threads" on the
same files: a LocalCluster of W worker processes (W = 2, or $WORKERS) started and closed
(per worker), the map of the per-file summaries and the reduction (per GB read), and the
bytes of summary that cross to the caller (per file). Files: real-shaped snapshots, such as
`HBM_BENCH_KEEP=1 build/bench_fleet 4 100` keeps. Needs hbm (PYTHONPATH=python,
HBM_LIBRARY=build/libhbm.so) and dask.distributed."""
import os
import sys
import time

import hbm
from hbm import _fleet
from dask.distributed import Client, LocalCluster

def main():  # (a LocalCluster spawns its workers: nothing may run at import)
    files = sys.argv[1:]
    if not files:
        sys.exit(__doc__)
    workers = int(os.environ.get("WORKERS", "2"))
    gb = sum(os.path.getsize(f) for f in files) / 1e9
    hbm.fleet(files, jobs=workers)  # the page cache
    t = time.perf_counter()
    threads = hbm.fleet(files, jobs=workers)
    t_threads = time.perf_counter() - t
    t = time.perf_counter()
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
    client = Client(cluster)
    t_start = time.perf_counter() - t
    client.run(lambda: __import__("hbm")._lib.get() and None)  # each worker loads libhbm once
    t = time.perf_counter()
    dask = hbm.fleet(files, engine="dask", client=client)
    t_map = time.perf_counter() - t
    summary_bytes = sum(len(client.submit(_fleet.summarize, f, pure=False).result()) for f in files)
    t = time.perf_counter()
    client.close()
    cluster.close()
    t_close = time.perf_counter() - t
    assert dask.as_dict() == threads.as_dict()
    print("bench_fleet_dask: %d files, %.2f GB, %d workers (%d cores online)" % (len(files), gb, workers, os.cpu_count()))
    print("  threads engine (%d threads)        %7.2f s  %7.2f s/GB" % (workers, t_threads, t_threads / gb))
    print("  dask: map + reduce                 %7.2f s  %7.2f s/GB  (%+.2f s/GB over threads)" % (
        t_map, t_map / gb, (t_map - t_threads) / gb))
    print("  dask: LocalCluster start + close   %7.2f s  %7.2f s per worker" % (t_start + t_close, (t_start + t_close) / workers))
    print("  summaries to the caller            %7.1f KB  %7.1f KB per file" % (summary_bytes / 1e3, summary_bytes / 1e3 / len(files)))
    print("  results equal: yes")


if __name__ == "__main__":
    main()
