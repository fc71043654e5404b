"""Finding and binding libhbm.so (ctypes, standard library only).

The library is looked for, in order: the file named by $HBM_LIBRARY (and only it when the
variable is set), libhbm.so next to this package (`pip install ./python` builds and bundles
it), the build folder when this package is in a source tree (python/hbm/../../build), then
the system's loader (ldconfig's cache, LD_LIBRARY_PATH). LibraryNotFound names only those
that apply to this copy.
"""
import ctypes
import ctypes.util
import os
import threading

from . import _errors

_here = os.path.dirname(os.path.abspath(__file__))
_lock = threading.Lock()
_lib = None
_path = None

c_char_p = ctypes.c_char_p
c_void_p = ctypes.c_void_p
c_size_t = ctypes.c_size_t
c_int = ctypes.c_int
c_uint64 = ctypes.c_uint64
c_double = ctypes.c_double


class PlanOptions(ctypes.Structure):
    """hbm_plan_options (hbm/plan.h)."""
    _fields_ = [("alignment", c_uint64), ("pointer_size", ctypes.c_uint), ("backend", ctypes.c_int),
                ("tuple_align", ctypes.c_uint), ("heap", ctypes.c_uint)]


class PlanTarget(ctypes.Structure):
    """hbm_plan_target (hbm/json_api.h)."""
    _fields_ = [("capacity", c_uint64), ("fraction", c_double), ("device_name", ctypes.c_char * 64)]


class FitOptions(ctypes.Structure):
    """hbm_fit_options (hbm/fit.h)."""
    _fields_ = [("plan", PlanOptions), ("target_bytes", c_uint64), ("capacity", c_uint64), ("fraction", c_double),
                ("device", c_char_p), ("timeout_s", c_double), ("remat", c_int), ("no_offload", c_int),
                ("no_donate", c_int), ("no_remat", c_int)]


P = ctypes.POINTER
# name: (restype, argtypes); every hbm_status is a c_int
_SIGNATURES = {
    "hbm_version": (c_char_p, []),
    "hbm_status_name": (c_char_p, [c_int]),
    "hbm_status_str": (c_char_p, [c_int]),
    "hbm_last_error": (c_char_p, []),
    "hbm_clear_error": (None, []),
    "hbm_last_error_location": (c_int, [c_char_p, c_size_t, P(c_int), P(c_int)]),
    "hbm_hlo_parse": (c_int, [c_char_p, c_size_t, c_char_p, P(c_void_p)]),
    "hbm_hlo_parse_file": (c_int, [c_char_p, P(c_void_p)]),
    "hbm_hlo_module_free": (None, [c_void_p]),
    "hbm_hlo_open": (c_int, [c_char_p, c_char_p, P(c_void_p)]),
    "hbm_proto_sniff": (c_int, [c_char_p, c_size_t]),
    "hbm_proto_open_mem": (c_int, [c_char_p, c_size_t, c_char_p, P(c_void_p)]),
    "hbm_proto_find": (c_int, [c_void_p, c_char_p, P(c_size_t)]),
    "hbm_proto_load": (c_int, [c_void_p, c_size_t, P(c_void_p)]),
    "hbm_proto_close": (None, [c_void_p]),
    "hbm_plan_xla_same": (c_int, [c_void_p]),
    "hbm_plan_xla_format": (c_int, [c_void_p, c_size_t, c_int, c_char_p, c_size_t, P(c_size_t)]),
    "hbm_plan_backend_options": (c_int, [c_char_p, P(PlanOptions)]),
    "hbm_plan_target_resolve": (c_int, [c_char_p, c_char_p, c_double, P(PlanTarget)]),
    "hbm_plan_run": (c_int, [c_void_p, P(PlanOptions), P(c_void_p)]),
    "hbm_plan_free": (None, [c_void_p]),
    "hbm_fit_options_default": (None, [P(FitOptions)]),
    "hbm_fit_remat_parse": (c_int, [c_char_p, P(c_int)]),
    "hbm_fit_run": (c_int, [c_void_p, P(FitOptions), P(c_void_p)]),
    "hbm_fit_free": (None, [c_void_p]),
    "hbm_fit_text_format": (c_int, [c_void_p, c_size_t, c_char_p, c_size_t, P(c_size_t)]),
    "hbm_fit_json_format": (c_int, [c_void_p, c_char_p, c_size_t, P(c_size_t)]),
    "hbm_fit_emit_format": (c_int, [c_void_p, c_char_p, c_size_t, P(c_size_t)]),
    "hbm_plan_json_format": (c_int, [c_void_p, c_size_t, P(PlanTarget), c_char_p, c_size_t, P(c_size_t)]),
    "hbm_plan_text_format": (c_int, [c_void_p, c_size_t, P(PlanTarget), c_char_p, c_size_t, P(c_size_t)]),
    "hbm_plan_explain_format": (c_int, [c_void_p, c_size_t, P(PlanTarget), c_char_p, c_size_t, P(c_size_t)]),
    "hbm_plan_html_string": (c_int, [c_void_p, c_char_p, P(c_void_p), P(c_size_t)]),
    "hbm_trace_load": (c_int, [c_char_p, P(c_void_p)]),
    "hbm_trace_load_mem": (c_int, [c_char_p, c_size_t, c_char_p, P(c_void_p)]),
    "hbm_trace_free": (None, [c_void_p]),
    "hbm_trace_info_format": (c_int, [c_void_p, c_char_p, c_size_t, P(c_size_t)]),
    "hbm_view_string": (c_int, [c_void_p, c_int, c_int, c_char_p, P(c_void_p), P(c_size_t)]),
    "hbm_view_file": (c_int, [c_void_p, c_int, c_int, c_char_p, c_char_p]),
    "hbm_export_file": (c_int, [c_void_p, c_char_p, c_char_p]),
    "hbm_replay_string": (c_int, [c_void_p, c_char_p, P(c_char_p), c_size_t, c_int, P(c_void_p), P(c_size_t)]),
    # the outputs that run an engine come in strings of their own size, computed once, freed
    # here (issue 40)
    "hbm_string_free": (None, [c_void_p]),
    "hbm_torch_configure": (c_int, [c_char_p]),
    "hbm_torch_oom_report_file": (c_int, [c_char_p]),
}

# Entry points other parts of the library may add later; bound when present (see optional()).
_OPTIONAL = {
    # hbm diff A B --json (issue 13)
    "hbm_diff_string": (c_int, [c_void_p, c_void_p, c_int, P(c_void_p), P(c_size_t)]),
    # hbm replay TRACE --suggest --json (issue 14)
    "hbm_replay_suggest_string": (c_int, [c_void_p, c_char_p, P(c_void_p), P(c_size_t)]),
    # hbm view M.hlo [--json]: XProf's Memory Viewer of a plan (issue 23)
    "hbm_plan_view_string": (c_int, [c_void_p, c_int, c_int, P(c_void_p), P(c_size_t)]),
    # hbm.replay's rows without the twin and the packing it does not return (issues 27, 40)
    "hbm_replay_rows_string": (c_int, [c_void_p, c_char_p, P(c_char_p), c_size_t, P(c_void_p), P(c_size_t)]),
    # the fleet view of many ranks (issue 39); hbm_fleet_options is a struct (python/hbm/_fleet.py)
    "hbm_fleet_options_default": (None, [c_void_p]),
    "hbm_fleet_run": (c_int, [P(c_char_p), c_size_t, c_void_p, P(c_void_p)]),
    "hbm_fleet_from_summaries": (c_int, [P(c_char_p), P(c_size_t), P(c_char_p), c_size_t, c_void_p, P(c_void_p)]),
    "hbm_fleet_free": (None, [c_void_p]),
    "hbm_fleet_format": (c_int, [c_void_p, c_int, c_char_p, c_size_t, P(c_size_t)]),
    "hbm_fleet_summary_string": (c_int, [c_char_p, P(c_void_p), P(c_size_t)]),
}


def _candidates():
    env = os.environ.get("HBM_LIBRARY")
    if env:
        return [("$HBM_LIBRARY", env)]
    found = ctypes.util.find_library("hbm")
    places = [("next to the package", os.path.join(_here, "libhbm.so"))]
    tree = os.path.normpath(os.path.join(_here, "..", ".."))
    if os.path.exists(os.path.join(tree, "CMakeLists.txt")):  # a source tree (not an installed copy)
        places.append(("the build folder", os.path.join(tree, "build", "libhbm.so")))
    return places + [("the system", found or "libhbm.so")]


def _bind(lib, name, sig):
    f = getattr(lib, name)
    f.restype, f.argtypes = sig
    return f


def get():
    """The loaded library (loaded and bound on first use)."""
    global _lib, _path
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        for where, path in _candidates():
            if os.sep in path and not os.path.exists(path):
                tried.append("%s (%s): no such file" % (path, where))
                continue
            try:
                lib = ctypes.CDLL(path)
            except OSError as e:
                tried.append("%s (%s): %s" % (path, where, e))
                continue
            missing = [n for n in _SIGNATURES if not hasattr(lib, n)]
            if missing:
                tried.append("%s (%s): too old, lacks %s" % (path, where, ", ".join(missing[:3])))
                continue
            for n, sig in _SIGNATURES.items():
                _bind(lib, n, sig)
            for n, sig in _OPTIONAL.items():
                if hasattr(lib, n):
                    _bind(lib, n, sig)
            _path = getattr(lib, "_name", path)
            if os.sep in path:
                _path = os.path.abspath(path)
            _lib = lib
            return lib
        raise _errors.LibraryNotFound(
            "libhbm.so not found or not usable; looked in:\n  " + "\n  ".join(tried)
            + "\nInstall with `pip install ./python` from the hbm source tree (it builds and bundles the"
            " library), or build it with `make` and set HBM_LIBRARY to its path.")


def path():
    """The path the library was loaded from (what PyTorch's pluggable allocator dlopens)."""
    get()
    return _path


def optional(name):
    """An optional entry point, or None when this libhbm does not have it."""
    lib = get()
    return getattr(lib, name) if name in _OPTIONAL and hasattr(lib, name) else None


def check(status):
    """Raise the hbm.Error subclass for a failed call, with the calling thread's message."""
    if status == 0:
        return
    lib = _lib
    name = lib.hbm_status_name(status).decode()
    message = lib.hbm_last_error().decode("utf-8", "replace")
    file = ctypes.create_string_buffer(1024)
    line, column = c_int(0), c_int(0)
    where = None
    if lib.hbm_last_error_location(file, len(file), ctypes.byref(line), ctypes.byref(column)):
        where = (file.value.decode("utf-8", "replace"), line.value, column.value or None)
    raise _errors.from_status(status, name, lib.hbm_status_str(status).decode(), message, where)


def string(fn, *args):
    """Call an hbm_*_string function (the output in a string of its own size, computed
    once) and return it as str."""
    out, n = c_void_p(), c_size_t(0)
    check(fn(*args, ctypes.byref(out), ctypes.byref(n)))
    try:
        return ctypes.string_at(out.value, n.value).decode("utf-8", "replace")
    finally:
        _lib.hbm_string_free(out)


def text(fn, *args, cap=1 << 16):
    """Call a *_format function (snprintf rules: it renders a result already computed) and
    return its whole output as str; an output longer than cap renders again, whole."""
    n = c_size_t(0)
    while True:
        buf = ctypes.create_string_buffer(cap)
        check(fn(*args, buf, cap, ctypes.byref(n)))
        if n.value < cap:
            return ctypes.string_at(buf, n.value).decode("utf-8", "replace")  # not .raw: all of cap
        cap = n.value + 1


def cstr(s):
    """str / os.PathLike / None -> bytes for a const char * argument."""
    if s is None:
        return None
    if isinstance(s, bytes):
        return s
    return os.fsencode(s) if isinstance(s, os.PathLike) else str(s).encode()
