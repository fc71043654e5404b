"""hbm.fit: what change makes an XLA module fit, each verified by planning the changed module."""
import ctypes
import json
import weakref

from . import _lib
from ._plan import _source, open_module


def _free(lib, result, module):
    lib.hbm_fit_free(result)
    lib.hbm_hlo_module_free(module)


class Fit:
    """The result of hbm.fit: both sets (hbm's search and XLA's algorithm), every candidate
    change, and the changed module as HLO text (see `hbm fit`)."""

    def __init__(self, module, result):
        lib = _lib.get()
        self._lib, self._r = lib, result
        self._finalize = weakref.finalize(self, _free, lib, result, module)
        self._d = json.loads(self.to_json())
        self.module = self._d["module"]
        self.target_bytes = self._d["target_bytes"]
        self.bytes_before = self._d["bytes_before"]
        self.bytes_after = self._d["bytes_after"]
        self.fits = self._d["fits"]
        self.recompute_flops = self._d["recompute_flops"]
        self.setting = self._d["setting"]
        self.hbm = self._d["hbm"]
        self.xla = self._d["xla"]
        self.changes = self._d["changes"]

    def to_json(self):
        """`hbm fit --json`."""
        return _lib.text(self._lib.hbm_fit_json_format, self._r)

    def as_dict(self):
        return json.loads(self.to_json())

    def report(self, top=12):
        """`hbm fit`'s text (lines of at most 100 columns)."""
        return _lib.text(self._lib.hbm_fit_text_format, self._r, top)

    def hlo(self):
        """The changed module (`hbm fit --emit`): scheduled HLO text, what was planned."""
        return _lib.text(self._lib.hbm_fit_emit_format, self._r)

    def __repr__(self):
        return "<hbm.Fit %s: %d -> %d bytes, target %d, fits=%s>" % (
            self.module, self.bytes_before, self.bytes_after, self.target_bytes, self.fits)


def fit(x, *, device=None, capacity=None, framework_limit=None, backend=None, remat="hbm", offload=True,
        donate=True, timeout=2.0, module=None, _cls=None):
    """What makes x (HLO text, a path, or an object with .as_text(); XLA's protobuf as
    hbm.plan reads it, `module` naming one of a profile's, default the largest) fit a device (a name
    `hbm devices` lists) or capacity (bytes or "80GiB") under framework_limit (default: the
    device's, 0.75 for a capacity; 1 = none). remat: "hbm" (the least-cost search), "xla"
    (XLA's HloRematerialization, the baseline) or "none". Returns a Fit."""
    if device is None and capacity is None:
        raise ValueError("hbm.fit: give device= or capacity=")
    text, path, name = _source(x)
    lib = _lib.get()
    check = _lib.check
    opts = _lib.FitOptions()
    lib.hbm_fit_options_default(ctypes.byref(opts))
    check(lib.hbm_plan_backend_options(_lib.cstr(backend), ctypes.byref(opts.plan)))
    target = _lib.PlanTarget()
    check(lib.hbm_plan_target_resolve(_lib.cstr(device), _lib.cstr(capacity),
                                      float(framework_limit or 0), ctypes.byref(target)))
    who = ctypes.c_int()
    check(lib.hbm_fit_remat_parse(_lib.cstr(remat), ctypes.byref(who)))
    device_b = _lib.cstr(device)
    opts.capacity, opts.fraction, opts.device = target.capacity, target.fraction, device_b
    opts.remat, opts.no_offload, opts.no_donate = who.value, int(not offload), int(not donate)
    opts.timeout_s = float(timeout)
    module = open_module(text, path, name, module)
    r = ctypes.c_void_p()
    status = lib.hbm_fit_run(module, ctypes.byref(opts), ctypes.byref(r))
    if status:
        lib.hbm_hlo_module_free(module)
        check(status)
    return (_cls or Fit)(module, r)
