"""hbm.fleet: many ranks at once (docs/fleet.md).

    f = hbm.fleet(["rank0.pickle", "rank1.pickle", "snapshots/"])          # threads, in libhbm
    f = hbm.fleet(paths, engine="dask")                                     # a LocalCluster
    f = hbm.fleet(paths, engine="dask", client=Client("tcp://sched:8786"))  # your cluster
    f.worst, f.outliers, f.groups, f.as_dict(), print(f.report()), f.html("fleet.html")

engine="threads" reads the inputs on threads in the library (hbm_fleet_run, as `hbm view
FILES --jobs N`). engine="dask" maps the per-file summary (hbm_fleet_summary_string, a small
JSON document) over a dask.distributed cluster, each worker reading the files it is given
(they must see the same paths), and reduces the summaries here (hbm_fleet_from_summaries):
the result is the one the threads give. Only the summaries cross the network.
"""
import ctypes
import json
import os

from . import _errors, _lib


class FleetOptions(ctypes.Structure):
    """hbm_fleet_options (hbm/fleet.h)."""
    _fields_ = [("jobs", ctypes.c_int), ("margin", ctypes.c_double), ("group_tolerance", ctypes.c_double),
                ("top", ctypes.c_int), ("pages", ctypes.c_char_p), ("title", ctypes.c_char_p)]


TEXT, JSON, HTML = 0, 1, 2


def _fn(name):
    f = _lib.optional(name)
    if f is None:
        raise _errors.Error("this libhbm has no fleet view (%s is missing): rebuild it" % name)
    return f


def summarize(path):
    """The summary document of one input (a snapshot, a trace; its devices as ranks), as str.
    Raises hbm.Error when the input cannot be read."""
    return _lib.string(_fn("hbm_fleet_summary_string"), os.fsencode(path))  # the input read once


def _summary_or_error(path):
    """What a Dask worker returns: the summary, or a summary that names the error (the
    reduction shows that rank as unreadable, as the threads do)."""
    try:
        return summarize(path)
    except _errors.Error as e:
        return json.dumps({"hbm_summary": 1, "path": path, "error": e.message, "ranks": []})


def _inputs(paths):
    """Files of the inputs as the library expands them (src/api/fleet.c, expand_dir): a folder
    is its regular files by name, hidden ones skipped, F left out when F.summary.json is there."""
    out = []
    for p in [paths] if isinstance(paths, (str, os.PathLike)) else paths:
        p = os.fspath(p)
        if not os.path.isdir(p):
            out.append(p)
            continue
        names = sorted(n for n in os.listdir(p) if not n.startswith(".") and os.path.isfile(os.path.join(p, n)))
        have = set(names)
        sep = "" if p.endswith("/") else "/"
        out += [p + sep + n for n in names if n + ".summary.json" not in have]
    return out


class Fleet:
    """The fleet view of many ranks: figures, outliers, groups, the worst rank's diff."""

    def __init__(self, handle, lib):
        self._f, self._lib = handle, lib
        self._d = json.loads(self._format(JSON))
        self.ranks = self._d["ranks"]
        self.failed = [r for r in self.ranks if "error" in r]
        self.worst = self._d.get("worst")
        self.median = self._d.get("median")
        self.outliers = self._d.get("outliers", [])
        self.groups = self._d.get("groups", [])
        self.stats = self._d.get("stats", {})
        self.diff = self._d.get("diff")

    def _format(self, form):
        return _lib.text(_fn("hbm_fleet_format"), self._f, form, cap=1 << 20)

    def as_dict(self):
        """What `hbm view FILES --json` prints, as a dict."""
        return json.loads(self._format(JSON))

    def to_json(self):
        return self._format(JSON)

    def report(self):
        """The terminal table (100 columns)."""
        return self._format(TEXT)

    def html(self, path=None):
        """The self-contained page: written to path, or returned as str."""
        page = self._format(HTML)
        if path is None:
            return page
        tmp = "%s.tmp%d" % (path, os.getpid())
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(page)
        os.replace(tmp, path)
        return path

    def __del__(self):
        if getattr(self, "_f", None):
            _fn("hbm_fleet_free")(self._f)
            self._f = None

    def __repr__(self):
        return "<hbm.Fleet %d ranks, %d failed, worst %s>" % (len(self.ranks), len(self.failed), self.worst)


def _options(jobs, margin, group_tolerance, top):
    o = FleetOptions()
    _fn("hbm_fleet_options_default")(ctypes.byref(o))
    o.jobs, o.margin, o.group_tolerance, o.top = jobs, margin, group_tolerance, top
    return o


def fleet(paths, engine="threads", *, jobs=0, margin=0.10, group_tolerance=0.02, top=15, client=None, workers=2):
    """The fleet view of paths (files, folders, summaries).

    engine="threads": read on jobs threads in libhbm (0: the cores).
    engine="dask": the summaries computed on a dask.distributed cluster: client (a
    distributed.Client, such as one dask-jobqueue's SLURMCluster gives), or a LocalCluster of
    `workers` processes started here and closed after. Reduced here; equal to "threads".
    margin, group_tolerance: fractions (0.10 = 10 %)."""
    lib = _lib.get()
    o = _options(jobs, margin, group_tolerance, top)
    handle = ctypes.c_void_p()
    if engine == "threads":
        files = [os.fsencode(p) for p in ([paths] if isinstance(paths, (str, os.PathLike)) else paths)]
        arr = (ctypes.c_char_p * len(files))(*files)
        _lib.check(_fn("hbm_fleet_run")(arr, len(files), ctypes.byref(o), ctypes.byref(handle)))
        return Fleet(handle, lib)
    if engine != "dask":
        raise _errors.ConfigError("hbm.fleet: engine %r is neither 'threads' nor 'dask'" % (engine,))
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError as e:
        raise _errors.Error("hbm.fleet(engine='dask') needs dask.distributed (pip install 'dask[distributed]'): %s"
                            % e) from None
    files = _inputs(paths)
    if not files:
        raise _errors.ConfigError("hbm.fleet: no inputs")
    cluster = own = None
    if client is None:
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
        client = own = Client(cluster)
    try:
        docs = client.gather(client.map(_summary_or_error, files, pure=False))
    finally:
        if own is not None:
            own.close()
            cluster.close()
    raw = [d.encode() for d in docs]
    n = len(raw)
    arr = (ctypes.c_char_p * n)(*raw)
    lens = (ctypes.c_size_t * n)(*[len(d) for d in raw])
    names = (ctypes.c_char_p * n)(*[os.fsencode(p) for p in files])
    _lib.check(_fn("hbm_fleet_from_summaries")(arr, lens, names, n, ctypes.byref(o), ctypes.byref(handle)))
    return Fleet(handle, lib)
