"""hbm.load: traces and PyTorch memory snapshots, their figures, replay, export and views."""
import ctypes
import json
import os
import pickle
import threading
import weakref

from . import _errors, _lib
from ._html import iframe

TEXT, JSON, HTML = 0, 1, 2  # hbm_view_kind


def _unsupported(what):
    return _errors.Error("this libhbm has no %s" % what, "HBM_ERR_UNSUPPORTED", -9, "unsupported")


class Trace:
    """A loaded trace (see hbm.load). Figures are those of `hbm view --json`."""

    def __init__(self, handle):
        lib = _lib.get()
        self._lib, self._t = lib, handle
        self._lock = threading.RLock()
        self._finalize = weakref.finalize(self, lib.hbm_trace_free, handle)
        info = json.loads(self._call(lib.hbm_trace_info_format))
        self.name, self.source = info["name"], info["source"]
        self.device = info["device"] or None
        self.capacity_bytes = info["capacity_bytes"] or None
        self.events = info["events"]
        self.truncated_at = info["truncated_at"] or None
        self._view = json.loads(self.to_json())
        v = self._view
        self.peak_bytes_in_use = v["peak_bytes_in_use"]
        self.peak_bytes_reserved = v["peak_bytes_reserved"]
        self.allocs, self.frees, self.ooms = v["allocs"], v["frees"], v["ooms"]
        if "devices" in v:
            self.devices = v["devices"]
        else:  # a library that reads one device per trace: that device's figures
            self.devices = [{"device": self.device, "capacity_bytes": self.capacity_bytes,
                             "peak_bytes_in_use": self.peak_bytes_in_use,
                             "peak_bytes_reserved": self.peak_bytes_reserved,
                             "allocs": self.allocs, "frees": self.frees, "ooms": self.ooms}]

    def _call(self, fn, *args, cap=1 << 16):
        with self._lock:
            return _lib.text(fn, self._t, *args, cap=cap)

    def _string(self, fn, *args):
        with self._lock:
            return _lib.string(fn, self._t, *args)

    def to_json(self, top=15):
        """`hbm view --json`."""
        return self._string(self._lib.hbm_view_string, JSON, top, None)

    def as_dict(self, top=15):
        return json.loads(self.to_json(top))

    def report(self, top=15):
        """`hbm view`'s terminal text."""
        return self._string(self._lib.hbm_view_string, TEXT, top, None)

    def top(self, n=15):
        """The n largest buffers live at the peak (dicts, as `hbm view --json` lists them)."""
        return json.loads(self.to_json(n))["top"]

    def replay(self, *configs, device=None):
        """Replay against allocator configurations ("allocator=bfc,fraction=0.9"; none:
        bfc and platform) on device (a name or sim:SIZE; default the trace's capacity, else
        sim:80GiB). Returns the result rows of `hbm replay --json`."""
        arr = (ctypes.c_char_p * max(len(configs), 1))(*[_lib.cstr(c) for c in configs])
        # the rows alone: no twin of the torch row, no packing (neither is returned), in a
        # string of the size they need, so that the replay runs once
        rows = _lib.optional("hbm_replay_rows_string")
        if rows is not None:
            out = self._string(rows, _lib.cstr(device), arr, len(configs))
        else:  # a libhbm without it: the whole replay, once
            out = self._string(self._lib.hbm_replay_string, _lib.cstr(device), arr, len(configs), 1)
        return json.loads(out)["results"]

    def suggest(self, device=None):
        """`hbm replay --suggest --json`: the smallest setting change that avoids the OOM."""
        fn = _lib.optional("hbm_replay_suggest_string")
        if fn is None:
            raise _unsupported("replay suggestion (hbm replay --suggest): hbm_replay_suggest_string is missing")
        return json.loads(self._string(fn, _lib.cstr(device)))  # the search once, in a string of its size

    def export(self, format, path):
        """`hbm export --format FORMAT -o PATH` (perfetto, pprof, torch, minimalloc); the file
        is written whole or not at all."""
        with self._lock:
            _lib.check(self._lib.hbm_export_file(self._t, _lib.cstr(format), _lib.cstr(path)))

    def html(self, path=None, title=None):
        """`hbm view --html PATH` (written whole); without a path, the page as a str."""
        if path is None:
            return self._string(self._lib.hbm_view_string, HTML, -1, _lib.cstr(title))
        with self._lock:
            _lib.check(self._lib.hbm_view_file(self._t, HTML, -1, _lib.cstr(title), _lib.cstr(path)))
        return None

    def _repr_html_(self):
        return iframe(self.html())

    def __repr__(self):
        return "<hbm.Trace %s (%s): %d events, peak_bytes_in_use=%d peak_bytes_reserved=%d ooms=%d>" % (
            self.name, self.source, self.events, self.peak_bytes_in_use, self.peak_bytes_reserved, self.ooms)


def load(x, *, name=None):
    """Load a trace: a path (any format `hbm view` reads), bytes of one, or a snapshot dict
    as torch.cuda.memory._snapshot() returns it (plain data; pickled for the library)."""
    lib = _lib.get()
    h = ctypes.c_void_p()
    if isinstance(x, Trace):
        return x
    if isinstance(x, dict):
        data = pickle.dumps(x, protocol=4)
        _lib.check(lib.hbm_trace_load_mem(data, len(data), _lib.cstr(name or "<snapshot>"), ctypes.byref(h)))
    elif isinstance(x, (bytes, bytearray, memoryview)):
        data = bytes(x)
        _lib.check(lib.hbm_trace_load_mem(data, len(data), _lib.cstr(name or "<bytes>"), ctypes.byref(h)))
    elif isinstance(x, (str, os.PathLike)):
        _lib.check(lib.hbm_trace_load(_lib.cstr(x), ctypes.byref(h)))
    else:
        raise TypeError("hbm.load: expected a path, bytes or a snapshot dict, got %s" % type(x).__name__)
    return Trace(h)


def diff(a, b):
    """`hbm diff A B --json`: a and b are Traces or anything hbm.load takes."""
    fn = _lib.optional("hbm_diff_string")
    if fn is None:
        raise _unsupported("diff (hbm diff): hbm_diff_string is missing")
    ta, tb = load(a), load(b)
    first, second = sorted((ta, tb), key=id)
    with first._lock, second._lock:
        return json.loads(_lib.string(fn, ta._t, tb._t, 1))
