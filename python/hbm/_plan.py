"""hbm.plan: XLA's buffer assignment for an HLO module, as JAX's memory_analysis() names it."""
import ctypes
import json
import os
import threading
import weakref

from . import _errors, _lib
from ._html import iframe

# memory_analysis()'s attribute names; those the library's JSON lacks read as None
_MEMORY_ANALYSIS = (
    "argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes", "temp_size_in_bytes",
    "generated_code_size_in_bytes", "host_argument_size_in_bytes", "host_output_size_in_bytes",
    "host_alias_size_in_bytes", "host_temp_size_in_bytes", "host_generated_code_size_in_bytes",
)


def _source(x):
    """(text bytes or None, path or None, name for messages) of what plan() accepts."""
    if hasattr(x, "as_text") and not isinstance(x, (str, bytes)):
        if hasattr(x, "compile") and callable(x.compile):  # a jax.stages.Lowered
            x = x.compile()
        text = x.as_text()
        if not isinstance(text, (str, bytes)):
            raise TypeError("%s.as_text() returned %s, expected HLO text" % (type(x).__name__, type(text).__name__))
        return (text.encode() if isinstance(text, str) else text), None, "<%s.as_text()>" % type(x).__name__
    if isinstance(x, os.PathLike):
        return None, os.fspath(x), None
    if isinstance(x, (bytes, bytearray, memoryview)):
        return bytes(x), None, "<bytes>"
    if isinstance(x, str):
        if "\n" in x or x.lstrip().startswith("HloModule"):
            return x.encode(), None, "<string>"
        return None, x, None
    raise TypeError("hbm.plan: expected HLO text, a path or an object with .as_text(), got %s" % type(x).__name__)


def _free(lib, plan, module):
    lib.hbm_plan_free(plan)
    lib.hbm_hlo_module_free(module)


class Plan:
    """What XLA's buffer assignment allocates for one module (see hbm.plan)."""

    def __init__(self, module, plan, target, top):
        lib = _lib.get()
        self._lib, self._p, self._target, self._top = lib, plan, target, top
        self._lock = threading.Lock()  # the plan's timeline is built on first use
        self._finalize = weakref.finalize(self, _free, lib, plan, module)
        self._json = self.to_json()
        self._d = json.loads(self._json)
        for k in _MEMORY_ANALYSIS:
            setattr(self, k, self._d.get(k))
        self.module = self._d.get("module")
        self.peak_bytes = self._d["peak_bytes"]
        self.peak_buffers = self._d["peak_buffers"]
        self.constant_size_in_bytes = self._d.get("constant_size_in_bytes")
        self.total_allocation_bytes = self._d.get("total_allocation_bytes")
        self.capacity_bytes = self._d.get("capacity_bytes")
        self.framework_limit_bytes = self._d.get("framework_limit_bytes")
        self.verdict = self._d.get("verdict")
        # True: XLA had not scheduled the module, the figures are hbm's estimate over its
        # post order; None from a library that does not say
        self.estimate = self._d.get("estimate")
        self.fits = None if self.verdict is None else self.verdict == "fits"
        # XLA's own buffer assignment, when the input was a protobuf that carries one (an
        # XProf profile, *.hlo_proto.pb): {"xla": {...}, "comparison": {...}}; else None
        self.xla = None
        if lib.hbm_plan_xla_same(plan) >= 0:
            self.xla = json.loads(_lib.text(lib.hbm_plan_xla_format, plan, top, 1))

    def _call(self, fn, *args):
        with self._lock:
            return _lib.text(fn, self._p, *args)

    def _string(self, fn, *args):
        with self._lock:
            return _lib.string(fn, self._p, *args)

    def to_json(self):
        """`hbm plan --json`: the memory_analysis() keys, peak_bytes, peak_buffers, verdict."""
        return self._call(self._lib.hbm_plan_json_format, self._top, ctypes.byref(self._target))

    def as_dict(self):
        """to_json() parsed."""
        return json.loads(self._json)

    def report(self, top=None):
        """`hbm plan`'s text: XLA's OOM-debugging block, hbm's explanation, the verdict
        (and XLA's own figures beside hbm's for a protobuf input that carries them)."""
        top = self._top if top is None else top
        text = self._call(self._lib.hbm_plan_text_format, top, ctypes.byref(self._target))
        if self.xla is not None:
            text += "\n" + self._call(self._lib.hbm_plan_xla_format, top, 0)
        return text

    @property
    def explanation(self):
        """hbm's explanation: what the executable needs, where the peak is, who owns it and,
        with a device, the verdict (the part of report() after XLA's block)."""
        return self._call(self._lib.hbm_plan_explain_format, min(self._top, 8), ctypes.byref(self._target))

    def memory_viewer(self, json_=False, top=15):
        """`hbm view M.hlo` (or with json_=True, `hbm view M.hlo --json` parsed): XProf's
        Memory Viewer of the plan, one heap per memory space."""
        fn = _lib.optional("hbm_plan_view_string")
        if fn is None:
            raise _errors.Error("this libhbm has no memory viewer (hbm_plan_view_string)", "HBM_ERR_UNSUPPORTED", -9,
                                "unsupported")
        text = self._string(fn, 1 if json_ else 0, top)  # the viewer's model built once
        return json.loads(text) if json_ else text

    def html(self, title=None):
        """XProf's Memory Viewer of the plan as one self-contained page (`hbm plan --html`)."""
        return self._string(self._lib.hbm_plan_html_string, _lib.cstr(title))

    def _repr_html_(self):
        return iframe(self.html())

    def __repr__(self):
        return "<hbm.Plan %s: peak_bytes=%d temp_size_in_bytes=%d fits=%s>" % (
            self.module, self.peak_bytes, self.temp_size_in_bytes, self.fits)


def open_module(text, path, name, which):
    """The module of HLO text or of XLA's protobuf (bytes or a path, found by content):
    the one `which` names, default the largest. The caller frees it."""
    lib = _lib.get()
    check = _lib.check
    module = ctypes.c_void_p()
    if text is not None and lib.hbm_proto_sniff(text, len(text)):
        f = ctypes.c_void_p()
        check(lib.hbm_proto_open_mem(text, len(text), name.encode(), ctypes.byref(f)))
        try:
            i = ctypes.c_size_t(0)
            if which is not None:
                check(lib.hbm_proto_find(f, _lib.cstr(which), ctypes.byref(i)))
            check(lib.hbm_proto_load(f, i, ctypes.byref(module)))
        finally:
            lib.hbm_proto_close(f)
    elif text is not None:
        check(lib.hbm_hlo_parse(text, len(text), name.encode(), ctypes.byref(module)))
    else:
        check(lib.hbm_hlo_open(_lib.cstr(path), _lib.cstr(which), ctypes.byref(module)))
    return module


def plan(x, *, device=None, capacity=None, framework_limit=None, backend=None, top=15, module=None, _cls=None):
    """Plan x (HLO text, a path, or an object with .as_text(): a JAX Compiled; a Lowered
    is compiled first; or XLA's protobuf, found by content: an XProf profile LOGDIR or
    *.xplane.pb, *.hlo_proto.pb, *.hlo.pb, as a path or bytes, whose module `module` names,
    default the largest) as XLA's GPU buffer assignment. device: a name `hbm devices` lists;
    capacity: bytes or a size string ("80GiB"); framework_limit: the share of the device
    the framework lets XLA use (default: the device's, 0.75 for a capacity). Returns a Plan."""
    text, path, name = _source(x)
    lib = _lib.get()
    check = _lib.check
    opts = _lib.PlanOptions()
    check(lib.hbm_plan_backend_options(_lib.cstr(backend), ctypes.byref(opts)))
    target = _lib.PlanTarget()
    check(lib.hbm_plan_target_resolve(_lib.cstr(device), _lib.cstr(capacity),
                                      float(framework_limit or 0), ctypes.byref(target)))
    module = open_module(text, path, name, module)
    p = ctypes.c_void_p()
    status = lib.hbm_plan_run(module, ctypes.byref(opts), ctypes.byref(p))
    if status:
        lib.hbm_hlo_module_free(module)
        check(status)
    return (_cls or Plan)(module, p, target, top)
