"""hbm.fleet: the threads engine (libhbm) against the CLI, and engine="dask" on a LocalCluster
of two worker processes against the threads (run by tests/test_python.sh, or by hand with
HBM_LIBRARY, HBM_CLI, HBM_SOURCE_DIR and HBM_SHARED_DATA set)."""
import json
import os
import shutil
import subprocess
import sys

import pytest

import hbm

SRC = os.environ.get("HBM_SOURCE_DIR") or os.path.join(os.path.dirname(__file__), "..", "..")
SHARED = os.environ.get("HBM_SHARED_DATA") or os.path.join(SRC, "..", "shared", "data")
CLI = os.environ.get("HBM_CLI") or os.path.join(SRC, "build", "hbm")
SNAPSHOTS = os.path.join(SHARED, "snapshots")


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    d = tmp_path_factory.mktemp("ranks")
    subprocess.run([sys.executable, os.path.join(SRC, "tests", "fleet_gen.py"), str(d)], check=True)
    expect = json.load(open(d / "expect.json"))
    os.unlink(d / "expect.json")
    with open(d / "rank99.json", "w") as f:  # one input no reader takes
        f.write("not a trace")
    return d, expect


def test_fleet_threads_equals_cli(ranks):
    d, expect = ranks
    f = hbm.fleet([str(d)], jobs=2)
    out = subprocess.run([CLI, "view", str(d), "--json"], capture_output=True, text=True)
    assert out.returncode == 2  # one input could not be read
    assert f.as_dict() == json.loads(out.stdout)
    assert os.path.basename(f.worst) == expect["outlier"]
    assert [os.path.basename(n) for n in f.outliers] == [expect["outlier"]]
    assert len(f.groups) == 4
    assert len(f.failed) == 1 and f.failed[0]["name"].endswith("rank99.json")
    assert "planted.py:42" in f.report()


def test_fleet_dask_equals_threads(ranks):
    pytest.importorskip("dask.distributed", reason="dask.distributed is not installed (pip install 'dask[distributed]')")
    d, _ = ranks
    threads = hbm.fleet(str(d), engine="threads")
    dask = hbm.fleet(str(d), engine="dask", workers=2)
    assert dask.as_dict() == threads.as_dict()
    assert len(dask.failed) == 1  # the unreadable rank is named by the worker's error


def test_fleet_dask_shared_snapshots():
    pytest.importorskip("dask.distributed", reason="dask.distributed is not installed (pip install 'dask[distributed]')")
    if not os.path.isdir(SNAPSHOTS):
        pytest.skip("shared data not found at %s" % SNAPSHOTS)
    files = sorted(os.path.join(SNAPSHOTS, n) for n in os.listdir(SNAPSHOTS) if n.endswith(".pickle"))
    from dask.distributed import Client, LocalCluster
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as c, Client(c) as cl:
        dask = hbm.fleet(files, engine="dask", client=cl, top=100000)
    threads = hbm.fleet(files, jobs=2, top=100000)
    assert dask.as_dict() == threads.as_dict()
    assert not threads.failed and len(threads.ranks) > len(files)  # a snapshot with several devices


def test_summarize_roundtrip(ranks, tmp_path):
    d, _ = ranks
    src = sorted(p for p in os.listdir(d) if p.startswith("rank0"))
    for p in src:
        (tmp_path / (p + ".summary.json")).write_text(hbm.summarize(str(d / p)))
    a = hbm.fleet([str(d / p) for p in src]).as_dict()
    b = hbm.fleet([str(tmp_path / (p + ".summary.json")) for p in src]).as_dict()
    assert a == b
    with pytest.raises(hbm.Error):
        hbm.summarize(str(d / "rank99.json"))
