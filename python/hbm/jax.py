"""hbm.jax: plan and fit JAX functions without running them. JAX is imported only when called.

    p = hbm.jax.plan(step, params, batch)                          # XLA:CPU (JAX's default backend)
    p = hbm.jax.plan(step, *specs, device="TPU-v5e", mesh={"data": 4})   # XLA:TPU, no TPU needed
    print(p)              # hbm's plan, XLA's buffer assignment and memory_analysis() beside it
    t = hbm.jax.fit(make_step, *specs, device="TPU-v5e")         # make_step(policy) -> the step
    print(t)              # one row per checkpoint policy, the cheapest that fits first

Each function is compiled as `jax.jit(fn, **jit_options).lower(*args).compile()`; the
compile also dumps XLA's optimized module with its buffer assignment (`xla_dump_to` passed
as a compile option of that compile only, so XLA_FLAGS is neither read nor changed), and
hbm plans that module: the same instructions `compiled.as_text()` prints.
"""
import ctypes
import glob
import html as _html
import importlib.util
import inspect
import os
import shutil
import tempfile
import time

from . import _errors, _lib
from ._fit import Fit
from ._fit import fit as _fit_module
from ._html import iframe
from ._plan import Plan
from ._plan import plan as _plan_module

# memory_analysis()'s figures hbm predicts, each beside hbm's own; then the ones it does not
_COMPARED = (
    ("argument_size_in_bytes", "argument_size_in_bytes"),
    ("output_size_in_bytes", "output_size_in_bytes"),
    ("alias_size_in_bytes", "alias_size_in_bytes"),
    ("temp_size_in_bytes", "temp_size_in_bytes"),
    ("host_argument_size_in_bytes", "host_argument_size_in_bytes"),
    ("host_output_size_in_bytes", "host_output_size_in_bytes"),
    ("host_alias_size_in_bytes", "host_alias_size_in_bytes"),
    ("host_temp_size_in_bytes", "host_temp_size_in_bytes"),
)
_NOT_PREDICTED = ("generated_code_size_in_bytes", "host_generated_code_size_in_bytes")

# TPU slices tried, smallest first, for a mesh of n devices (JAX's topology names; a v4
# chip shows two devices, the others one)
_SLICES_2D = ("1x1", "2x1", "2x2", "2x4", "4x4", "4x8", "8x8", "8x16", "16x16")
_SLICES_3D = ("1x1x1", "2x1x1", "2x2x1", "2x2x2", "2x2x4", "2x4x4", "4x4x4", "4x4x8", "4x8x8", "8x8x8")
_TPU_SLICES = {"v4": _SLICES_3D, "v5p": _SLICES_3D, "v5e": _SLICES_2D, "v6e": _SLICES_2D}


def _jax():
    try:
        import jax
    except ImportError as e:
        raise _errors.MissingDependency(
            "hbm.jax needs JAX, which is not installed: pip install jax "
            "(for NVIDIA GPUs: pip install 'jax[cuda12]')", "jax") from e
    return jax


def _need_libtpu(what):
    if importlib.util.find_spec("libtpu") is None:
        raise _errors.MissingDependency(
            "hbm.jax: compiling for %s needs libtpu (XLA:TPU's compiler), which is not installed: "
            "pip install libtpu (no TPU is needed to compile)" % what, "libtpu")


def _human(n):
    if n is None:
        return "-"
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= scale:
            return "%.1f%s" % (n / scale, unit)
    return "%dB" % n


def _flops(n):
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= scale:
            return "%+.2f %sFLOP" % (n / scale, unit)
    return "%+.0f FLOP" % n


# --- where to compile -------------------------------------------------------------------------

class _Target:
    """What a device name means here: the hbm device that judges the plan, and for a TPU
    the generation (and the slice, when the name was a topology name)."""

    def __init__(self, device):
        self.device, self.hbm_device, self.tpu, self.slice = device, device, None, None
        if device is None:
            return
        name = str(device)
        if ":" in name:  # a JAX topology name, "v5e:2x2"
            self.tpu, self.slice = name.split(":", 1)[0].lower(), name
            self.hbm_device = "TPU-" + self.tpu
            try:
                self._resolve(self.hbm_device)
            except _errors.Error:
                self.hbm_device = None  # a TPU hbm lists no capacity for: planned without a device
            return
        resolved = self._resolve(name)
        if resolved.upper().startswith("TPU-"):
            self.tpu = resolved[4:].lower()

    @staticmethod
    def _resolve(name):
        lib = _lib.get()
        t = _lib.PlanTarget()
        _lib.check(lib.hbm_plan_target_resolve(_lib.cstr(name), None, 0.0, ctypes.byref(t)))
        return t.device_name.decode()


def _mesh_shape(mesh):
    """(axis names, sizes) of a mesh given as {"data": 4}, [("data", 4)], a jax Mesh or an
    AbstractMesh (its devices are not used: the mesh is rebuilt where it is compiled)."""
    if mesh is None:
        return None
    if not isinstance(mesh, (dict, list, tuple)) and hasattr(mesh, "axis_names") and hasattr(mesh, "axis_sizes"):
        return tuple(mesh.axis_names), tuple(int(n) for n in mesh.axis_sizes)
    items = list(mesh.items()) if isinstance(mesh, dict) else list(mesh)
    names, sizes = tuple(str(k) for k, _ in items), tuple(int(v) for _, v in items)
    if not names or any(s < 1 for s in sizes):
        raise ValueError("hbm.jax: a mesh is {axis name: size > 0, ...}, got %r" % (mesh,))
    return names, sizes


def _count(shape):
    n = 1
    for s in shape[1]:
        n *= s
    return n


def _tpu_topology(target, n):
    """(topology name, its devices) of the smallest slice of the target's TPU with n devices."""
    from jax.experimental import topologies
    names = [target.slice] if target.slice else ["%s:%s" % (target.tpu, s) for s in _TPU_SLICES.get(target.tpu, ())]
    if not names:
        raise _errors.TopologyError("hbm.jax: no TPU slices known for %r (give a JAX topology name such as "
                                    "\"v5e:2x2\" as device=)" % target.device)
    last = None
    for name in names:
        try:
            topo = topologies.get_topology_desc(platform="tpu", topology_name=name)
        except Exception as e:  # noqa: BLE001  (JAX raises its runtime error type)
            text = str(e)
            if "libtpu_lockfile" in text:
                raise _errors.Error("hbm.jax: libtpu is in use by another process (%s); set "
                                    "ALLOW_MULTIPLE_LIBTPU_LOAD=1 to compile beside it" % text.strip()) from e
            if target.slice:
                raise _errors.TopologyError("hbm.jax: JAX does not know the TPU topology %r: %s"
                                            % (name, text.strip())) from e
            continue
        last = (name, len(topo.devices))
        if len(topo.devices) >= n:
            return name, list(topo.devices)[:n]
    if last is None:
        raise _errors.TopologyError("hbm.jax: JAX knows none of the TPU topologies %s" % ", ".join(names))
    raise _errors.TopologyError("hbm.jax: the mesh needs %d devices; TPU topology %s has %d" % (n, last[0], last[1]))


class _Where:
    """The devices, mesh and platform one plan or fit compiles for."""

    def __init__(self, device, mesh):
        jax = _jax()
        self.target = _Target(device)
        self.shape = _mesh_shape(mesh)
        n = _count(self.shape) if self.shape else 1
        self.topology = None
        if self.target.tpu:
            _need_libtpu("TPU %s" % (self.target.slice or self.target.device))
            self.topology, devices = _tpu_topology(self.target, n)
            self.platform = "tpu"
        else:
            devices = jax.devices()
            self.platform = devices[0].platform
            if n > len(devices):
                raise _errors.TopologyError(
                    "hbm.jax: the mesh %s needs %d devices; JAX's %s backend has %d (for the CPU: "
                    "jax.config.update('jax_num_cpu_devices', %d) before JAX starts)"
                    % (dict(zip(*self.shape)), n, self.platform, len(devices), n))
            devices = devices[:n]
        self.devices = devices
        self.mesh = None
        if self.shape or self.topology:
            import numpy as np
            names, sizes = self.shape or (("x",), (1,))
            self.mesh = jax.sharding.Mesh(np.array(devices, dtype=object).reshape(sizes), names)

    def describe(self):
        if self.topology:
            return "XLA:TPU %s (%d device%s, compiled without a TPU)" % (
                self.topology, len(self.devices), "" if len(self.devices) == 1 else "s")
        return "XLA:%s" % self.platform.upper()

    def memory_kinds(self):
        try:
            return {m.kind for m in self.devices[0].addressable_memories()}
        except Exception:  # noqa: BLE001  (a backend without memories)
            return set()

    def args(self, args, replicate=True):
        """args as ShapeDtypeStructs on this mesh (shardings kept: a NamedSharding's or a
        PartitionSpec's spec; none: replicated, or left to in_shardings when not
        replicate), or as given without a mesh."""
        if self.mesh is None:
            return args
        jax = _jax()
        from jax.sharding import NamedSharding, PartitionSpec

        def one(a):
            if not (hasattr(a, "shape") and hasattr(a, "dtype")):
                return a
            s = getattr(a, "sharding", None)
            spec = s.spec if isinstance(s, NamedSharding) else s if isinstance(s, PartitionSpec) else None
            if spec is None and not replicate:
                return jax.ShapeDtypeStruct(a.shape, a.dtype)
            return jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=NamedSharding(self.mesh, spec or PartitionSpec()))
        return jax.tree_util.tree_map(one, args)

    def jit_options(self, options):
        """in_shardings / out_shardings given as PartitionSpecs, on this mesh."""
        if self.mesh is None:
            return options
        jax = _jax()
        from jax.sharding import NamedSharding, PartitionSpec
        out = dict(options)
        for k in ("in_shardings", "out_shardings"):
            if k in out and out[k] is not None:
                out[k] = jax.tree_util.tree_map(
                    lambda s: NamedSharding(self.mesh, s) if isinstance(s, PartitionSpec) else s, out[k],
                    is_leaf=lambda s: isinstance(s, PartitionSpec))
        return out


def _compile(where, fn, args, jit_options):
    """(compiled, HloProto bytes with XLA's buffer assignment or None, why not, seconds)."""
    jax = _jax()
    options = dict(jit_options)
    compiler_options = dict(options.pop("compiler_options", None) or {})
    options = where.jit_options(options)
    args = where.args(tuple(args), replicate=options.get("in_shardings") is None)
    jitted = fn if (hasattr(fn, "lower") and not options) else jax.jit(fn, **options)
    dump = tempfile.mkdtemp(prefix="hbm-jax-")
    try:
        t0 = time.perf_counter()
        if where.mesh is not None and hasattr(jax, "set_mesh"):
            with jax.set_mesh(where.mesh):
                lowered = jitted.lower(*args)
        else:
            lowered = jitted.lower(*args)
        note = None
        try:
            compiled = lowered.compile(compiler_options=dict(compiler_options, xla_dump_to=dump,
                                                             xla_dump_hlo_as_proto=True))
        except TypeError:  # a JAX whose compile() takes no compiler_options
            compiled = lowered.compile()
            note = "this JAX's compile() takes no compiler_options, so nothing was dumped"
        seconds = time.perf_counter() - t0
        proto = None
        found = sorted(f for f in glob.glob(os.path.join(dump, "*after_optimizations.hlo.pb")))
        if found:
            with open(found[-1], "rb") as f:
                proto = f.read()
        elif note is None:
            note = "XLA:%s dumped no optimized module with its buffer assignment" % where.platform.upper()
        return compiled, proto, note, seconds
    finally:
        shutil.rmtree(dump, ignore_errors=True)


def _memory_analysis(compiled):
    ma = compiled.memory_analysis()
    if ma is None:
        return {}
    out = {}
    for k in _NOT_PREDICTED + tuple(k for k, _ in _COMPARED) + ("peak_memory_in_bytes",):
        v = getattr(ma, k, None)
        if v is not None:
            out[k] = int(v)
    return out


def _xla_need(ma):
    """What memory_analysis() says the executable needs: arguments + outputs - alias + temp."""
    if not all(k in ma for k in ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
                                 "temp_size_in_bytes")):
        return None
    return (ma["argument_size_in_bytes"] + ma["output_size_in_bytes"] - ma["alias_size_in_bytes"]
            + ma["temp_size_in_bytes"])


def _cost(compiled):
    try:
        c = compiled.cost_analysis()
    except Exception:  # noqa: BLE001  (a backend without a cost model)
        return {}
    if isinstance(c, (list, tuple)):
        c = c[0] if c else {}
    return dict(c or {})


# --- the plan -----------------------------------------------------------------------------------

def _agreement(hbm_figures, ma):
    """[(memory_analysis key, hbm bytes, XLA bytes, line)] for every figure XLA gave."""
    rows = []
    for key, mine in _COMPARED:
        if key not in ma:
            continue
        h, x = hbm_figures.get(mine), ma[key]
        if h is None:
            line = "XLA %s; hbm has no such figure" % _human(x)
        elif h == x:
            line = "hbm = XLA (%s)" % _human(x)
        else:
            line = "hbm %s, XLA %s: hbm %s %s" % (_human(h), _human(x), _human(abs(h - x)),
                                                  "more" if h > x else "less")
        rows.append((key, h, x, line))
    if "peak_memory_in_bytes" in ma:  # XLA's own count of a peak (ComputePeakMemorySizes), not hbm's sum
        x, h = ma["peak_memory_in_bytes"], hbm_figures.get("peak_bytes")
        rows.append(("peak_memory_in_bytes", None, x, "XLA %s; hbm's peak_bytes %s (arguments + outputs - alias + temp "
                     "+ constants): not the same count" % (_human(x), _human(h))))
    for key in _NOT_PREDICTED:
        if key in ma:
            rows.append((key, None, ma[key], "XLA %s; hbm does not predict code size" % _human(ma[key])))
    return rows


class JaxPlan(Plan):
    """hbm's plan of a compiled JAX function (an hbm.Plan) with XLA's own figures beside it:
    memory_analysis (dict: every figure compiled.memory_analysis() gave), cost_analysis
    (dict), agreement (rows (key, hbm, xla, line)), xla (XLA's buffer assignment and the
    comparison, or None with buffer_assignment_note saying why), compiled (the jax
    Compiled), where (the backend and topology), compile_seconds, plan_seconds."""

    def _attach(self, compiled, where, note, compile_s, plan_s, name):
        self.compiled = compiled
        self.where = where.describe()
        self.topology = where.topology
        self.function = name
        self.memory_analysis = _memory_analysis(compiled)
        self.cost_analysis = _cost(compiled)
        self.flops = self.cost_analysis.get("flops")
        self.buffer_assignment_note = note
        self.compile_seconds, self.plan_seconds = compile_s, plan_s
        mine = {k: getattr(self, k, None) for _, k in _COMPARED}
        mine["peak_bytes"] = self.peak_bytes
        self.agreement = _agreement(mine, self.memory_analysis)
        self.same_as_memory_analysis = all(h == x for _, h, x, _ in self.agreement if h is not None)

    def _header(self):
        return "hbm.jax.plan of %s: %s, compiled in %.2f s, planned by hbm in %.3f s" % (
            self.function, self.where, self.compile_seconds, self.plan_seconds)

    def comparison(self):
        """XLA's figures beside hbm's: memory_analysis() one line per figure, and XLA's buffer
        assignment's agreement (or why it is not available)."""
        lines = ["XLA's compiled.memory_analysis() beside hbm's plan:"]
        for key, _, _, line in self.agreement:
            lines.append("  %-34s %s" % (key, line))
        if self.xla is None:
            lines.append("XLA's buffer assignment: not available (%s)" % (self.buffer_assignment_note or "unknown"))
        return "\n".join(lines)

    def report(self, top=None):
        return "%s\n\n%s\n\n%s\n" % (self._header(), Plan.report(self, top).rstrip("\n"), self.comparison())

    def __str__(self):
        return self.report()

    def __repr__(self):
        same = self.xla and self.xla["comparison"]["same"]
        ba = ("XLA's buffer assignment: %s" % ("the same figures and buffers" if same else "differs (see str())")
              if self.xla is not None else "XLA's buffer assignment: not available")
        return "<hbm.jax.Plan %s, %s: peak %s, fits=%s\n%s\n%s>" % (
            self.function, self.where, _human(self.peak_bytes), self.fits, self.comparison(), ba)

    def _repr_html_(self):
        e = _html.escape
        rows = "".join("<tr><td><code>%s</code></td><td>%s</td><td>%s</td><td>%s</td></tr>" % (
            e(k), e(_human(h)) if h is not None else "&ndash;", e(_human(x)), e(line))
            for k, h, x, line in self.agreement)
        ba = self.report().split("XLA's own buffer assignment", 1)
        ba = ("<pre>%s</pre>" % e("XLA's own buffer assignment" + ba[1].split("\n\n")[0])) if len(ba) == 2 else (
            "<p>XLA's buffer assignment: not available (%s)</p>" % e(self.buffer_assignment_note or "unknown"))
        return ("<div><p><b>%s</b></p><pre>%s</pre><table><tr><th>memory_analysis()</th><th>hbm</th><th>XLA</th>"
                "<th>agreement</th></tr>%s</table>%s%s</div>" % (
                    e(self._header()), e(self.explanation), rows, ba, iframe(self.html())))


def _name(fn):
    return getattr(fn, "__name__", None) or type(fn).__name__


def _plan_compiled(compiled, proto, note, seconds, where, name, device, capacity, framework_limit):
    t0 = time.perf_counter()
    source = proto if proto is not None else compiled
    p = _plan_module(source, device=device, capacity=capacity, framework_limit=framework_limit, _cls=JaxPlan)
    p._attach(compiled, where, note, seconds, time.perf_counter() - t0, name)
    p._source, p._where = source, where
    if proto is not None and p.xla is None:
        p.buffer_assignment_note = "the dumped module carries no buffer assignment"
    return p


def plan(fn, *args, device=None, mesh=None, capacity=None, framework_limit=None, **jit_options):
    """Compile fn for args (arrays or jax.ShapeDtypeStructs, shardings kept) and plan it.

    device: None (JAX's default backend, the CPU without an accelerator) or a name `hbm
    devices` lists; a TPU name ("TPU-v5e") or a JAX topology name ("v5e:2x2") compiles
    with XLA:TPU for a topology without a TPU (libtpu needed), the smallest slice with the
    devices the mesh needs. mesh: {"axis": size, ...} or a jax Mesh (rebuilt on the
    topology's devices); args' shardings (NamedSharding or PartitionSpec) are kept on it.
    capacity / framework_limit judge it as hbm.plan does. jit_options go to jax.jit
    (donate_argnums, in_shardings as PartitionSpecs, ...), compiler_options to compile().
    Returns a JaxPlan (an hbm.Plan with XLA's figures beside it)."""
    where = _Where(device, mesh)
    compiled, proto, note, seconds = _compile(where, fn, args, jit_options)
    return _plan_compiled(compiled, proto, note, seconds, where, _name(fn), where.target.hbm_device, capacity,
                          framework_limit)


# --- fit ------------------------------------------------------------------------------------------

class JaxFit(Fit):
    """hbm.fit of a compiled JAX function (an hbm.Fit) with the compile's memory_analysis."""

    def __str__(self):
        lines = ["hbm.jax.fit of %s: %s, compiled in %.2f s" % (self.function, self.where, self.compile_seconds),
                 "", self.report().rstrip("\n"), "", "XLA's compiled.memory_analysis() of the step as it is:"]
        for k, v in self.memory_analysis.items():
            lines.append("  %-34s %s" % (k, _human(v)))
        return "\n".join(lines) + "\n"

    def _repr_html_(self):
        return "<pre>%s</pre>" % _html.escape(str(self))


def _takes_policy(fn):
    try:
        return "policy" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def fit(fn, *args, device=None, mesh=None, capacity=None, framework_limit=None, policies=None, remat="hbm",
        offload=True, donate=True, timeout=2.0, **jit_options):
    """What makes fn fit device / capacity.

    Two forms. fn(*args), a step: compiled as hbm.jax.plan compiles it, then hbm.fit of the
    module (a JaxFit: hbm's verified changes, remat / offload / donate / timeout as hbm.fit).
    make_step(policy) -> the step (jitted or not), detected by a parameter named `policy`, or
    any callable with policies= given: the step is compiled under each checkpoint policy
    (policies=None or "all": every jax.checkpoint_policies policy that applies; or a list of
    names / a dict {name: policy}), each planned by hbm, and a PolicyTable returned, the
    cheapest policy that fits first."""
    if device is None and capacity is None:
        raise ValueError("hbm.jax.fit: give device= or capacity=")
    if policies is not None or _takes_policy(fn):
        return _fit_policies(fn, args, device, mesh, capacity, framework_limit, policies, jit_options)
    where = _Where(device, mesh)
    compiled, proto, note, seconds = _compile(where, fn, args, jit_options)
    f = _fit_module(proto if proto is not None else compiled, device=where.target.hbm_device, capacity=capacity,
                    framework_limit=framework_limit, remat=remat, offload=offload, donate=donate, timeout=timeout,
                    _cls=JaxFit)
    f.compiled, f.where, f.function, f.compile_seconds = compiled, where.describe(), _name(fn), seconds
    f.memory_analysis = _memory_analysis(compiled)
    f.cost_analysis = _cost(compiled)
    return f


# --- checkpoint policies, tried for real ---------------------------------------------------------

def _checkpoint_names(jaxpr):
    """The names checkpoint_name() gave in a jaxpr (its `name` equations), in order found."""
    found = []

    def walk(j):
        j = getattr(j, "jaxpr", j)
        for eqn in getattr(j, "eqns", ()):
            if eqn.primitive.name == "name" and "name" in eqn.params:
                if eqn.params["name"] not in found:
                    found.append(eqn.params["name"])
            for v in eqn.params.values():
                for sub in (v if isinstance(v, (list, tuple)) else (v,)):
                    if hasattr(sub, "eqns") or hasattr(getattr(sub, "jaxpr", None), "eqns"):
                        walk(sub)
    walk(jaxpr)
    return found


def _standard_policies(jax, make_step, where, args):
    cp = jax.checkpoint_policies
    out = [("everything_saveable", cp.everything_saveable), ("nothing_saveable", cp.nothing_saveable),
           ("dots_saveable", cp.dots_saveable),
           ("dots_with_no_batch_dims_saveable", cp.dots_with_no_batch_dims_saveable)]
    try:
        step = make_step(cp.everything_saveable)
        names = _checkpoint_names(jax.make_jaxpr(step)(*where.args(tuple(args))))
    except Exception:  # noqa: BLE001  (a step that does not trace without a mesh: no names)
        names = []
    if names:
        quoted = ", ".join(repr(n) for n in names)
        out.append(("save_only_these_names(%s)" % quoted, cp.save_only_these_names(*names)))
        if 1 < len(names) <= 4:
            out += [("save_only_these_names(%r)" % n, cp.save_only_these_names(n)) for n in names]
    # offload where the device has a host memory of its own to offload to: not on the CPU,
    # where "pinned_host" is the same RAM (XLA:CPU's temp was the same with and without it)
    if where.platform != "cpu" and "pinned_host" in where.memory_kinds():
        out.append(("offload_dot_with_no_batch_dims('device', 'pinned_host')",
                    cp.offload_dot_with_no_batch_dims("device", "pinned_host")))
        if names:
            out.append(("save_and_offload_only_these_names(offloaded=%s)" % ", ".join(repr(n) for n in names),
                        cp.save_and_offload_only_these_names(names_which_can_be_saved=[],
                                                             names_which_can_be_offloaded=names,
                                                             offload_src="device", offload_dst="pinned_host")))
    return out, names


class PolicyTable:
    """One row per checkpoint policy (hbm.jax.fit of make_step(policy)), the cheapest policy
    that fits first. rows: dicts with name, policy (the policy itself), peak_bytes (hbm's:
    arguments + outputs - alias + temp + constants), xla_peak_bytes (the same sum of
    memory_analysis()'s figures, constants aside), xla_peak_memory_in_bytes (its own
    peak_memory_in_bytes), temp_bytes, xla_temp_bytes,
    flops, extra_flops (over everything_saveable), fits, verdict, plan (the JaxPlan), error.
    best: the first row that fits, or None."""

    def __init__(self, rows, where, usable, capacity, names, function):
        self.rows, self.where, self.usable_bytes, self.capacity_bytes = rows, where, usable, capacity
        self.checkpoint_names, self.function = names, function
        self.best = next((r for r in rows if r["fits"]), None)
        self.policy = self.best["policy"] if self.best else None

    def against(self, *, capacity=None, framework_limit=None, device=None):
        """The same compiles judged against another capacity (or device name): each row's
        module planned again by hbm (milliseconds), nothing recompiled. A device of another
        TPU generation needs its own compile: call hbm.jax.fit with it."""
        rows = []
        for r in self.rows:
            r = dict(r)
            p = r["plan"]
            if p is not None:
                q = _plan_compiled(p.compiled, p._source if isinstance(p._source, bytes) else None,
                                   p.buffer_assignment_note, p.compile_seconds, p._where, p.function,
                                   device if device is not None else p._where.target.hbm_device, capacity,
                                   framework_limit)
                r.update(plan=q, peak_bytes=q.peak_bytes, temp_bytes=q.temp_size_in_bytes, fits=q.fits,
                         verdict=q.verdict)
            rows.append(r)
        return _table(rows, self.where, self.checkpoint_names, self.function)

    def __iter__(self):
        return iter(self.rows)

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, name):
        for r in self.rows:
            if r["name"] == name:
                return r
        raise KeyError(name)

    def _cells(self, r):
        if r["error"]:
            return [r["name"], "-", "-", "-", "-", "-", "error: " + r["error"].splitlines()[0][:60]]
        extra = r["extra_flops"]
        if extra is None:
            fl = "-"
        elif r["base_flops"]:
            fl = "%s (%+.1f%%)" % (_flops(extra), 100.0 * extra / r["base_flops"])
        else:
            fl = _flops(extra)
        fits = {True: "yes", False: "no", None: "-"}[r["fits"]]
        return [r["name"], _human(r["peak_bytes"]), _human(r["xla_peak_bytes"]), _human(r["temp_bytes"]),
                _human(r["xla_temp_bytes"]), fl, fits]

    _HEAD = ["policy", "hbm peak", "XLA peak", "hbm temp", "XLA temp", "extra FLOPs", "fits"]
    _NOTE = ("peak: arguments + outputs - alias + temp, hbm's plan and XLA's memory_analysis(); extra FLOPs: "
             "cost_analysis() over everything_saveable's")

    def __str__(self):
        cells = [self._HEAD] + [self._cells(r) for r in self.rows]
        w = [max(len(c[i]) for c in cells) for i in range(len(self._HEAD))]
        lines = ["hbm.jax.fit: %d checkpoint policies of %s on %s; usable %s of %s (as hbm's verdict counts)" % (
            len(self.rows), self.function, self.where, _human(self.usable_bytes), _human(self.capacity_bytes))]
        for c in cells:
            lines.append("  " + c[0].ljust(w[0]) + "".join("  " + c[i].rjust(w[i]) for i in range(1, len(c))))
        lines.append("  (%s)" % self._NOTE)
        if self.best:
            lines.append("cheapest that fits: %s (hbm peak %s, XLA's %s)" % (
                self.best["name"], _human(self.best["peak_bytes"]), _human(self.best["xla_peak_bytes"])))
        else:
            ok = [r for r in self.rows if not r["error"]]
            least = min(ok, key=lambda r: r["peak_bytes"]) if ok else None
            lines.append("no policy fits" + (": the least peak is %s (%s), %s over the usable %s" % (
                _human(least["peak_bytes"]), least["name"], _human(least["peak_bytes"] - self.usable_bytes),
                _human(self.usable_bytes)) if least and self.usable_bytes else ""))
        return "\n".join(lines) + "\n"

    def __repr__(self):
        return str(self)

    def as_dict(self):
        keys = ("name", "peak_bytes", "xla_peak_bytes", "xla_peak_memory_in_bytes", "temp_bytes", "xla_temp_bytes",
                "flops", "extra_flops", "fits", "verdict", "error")
        return {"function": self.function, "where": self.where, "usable_bytes": self.usable_bytes,
                "capacity_bytes": self.capacity_bytes, "checkpoint_names": list(self.checkpoint_names),
                "best": self.best["name"] if self.best else None,
                "rows": [{k: r[k] for k in keys} for r in self.rows]}

    def _repr_html_(self):
        e = _html.escape
        head = "".join("<th>%s</th>" % e(h) for h in self._HEAD)
        body = "".join("<tr%s>%s</tr>" % (' style="font-weight:bold"' if r is self.best else "",
                                          "".join("<td>%s</td>" % e(c) for c in self._cells(r))) for r in self.rows)
        return "<div><pre>%s</pre><table><tr>%s</tr>%s</table></div>" % (e(str(self).splitlines()[0]), head, body)


def _fit_policies(make_step, args, device, mesh, capacity, framework_limit, policies, jit_options):
    jax = _jax()
    where = _Where(device, mesh)
    names = []
    if policies is None or policies == "all" or policies is True:
        chosen, names = _standard_policies(jax, make_step, where, args)
    elif isinstance(policies, dict):
        chosen = list(policies.items())
    else:
        chosen = []
        for p in policies:
            if isinstance(p, str):
                if not hasattr(jax.checkpoint_policies, p):
                    raise ValueError("hbm.jax.fit: jax.checkpoint_policies has no policy %r" % p)
                chosen.append((p, getattr(jax.checkpoint_policies, p)))
            else:
                chosen.append((getattr(p, "__name__", repr(p)), p))
    rows = []
    for name, policy in chosen:
        row = {"name": name, "policy": policy, "peak_bytes": None, "xla_peak_bytes": None,
               "xla_peak_memory_in_bytes": None, "temp_bytes": None,
               "xla_temp_bytes": None, "flops": None, "extra_flops": None, "base_flops": None, "fits": None,
               "verdict": None, "plan": None, "error": None}
        try:
            compiled, proto, note, seconds = _compile(where, make_step(policy), args, jit_options)
            p = _plan_compiled(compiled, proto, note, seconds, where, "%s(%s)" % (_name(make_step), name),
                               where.target.hbm_device, capacity, framework_limit)
        except _errors.MissingDependency:
            raise
        except Exception as e:  # noqa: BLE001  (a policy this backend cannot compile is a row, not a failure)
            row["error"] = "%s: %s" % (type(e).__name__, e)
            rows.append(row)
            continue
        row.update(plan=p, peak_bytes=p.peak_bytes, temp_bytes=p.temp_size_in_bytes, fits=p.fits, verdict=p.verdict,
                   xla_peak_bytes=_xla_need(p.memory_analysis),
                   xla_peak_memory_in_bytes=p.memory_analysis.get("peak_memory_in_bytes"),
                   xla_temp_bytes=p.memory_analysis.get("temp_size_in_bytes"), flops=p.flops)
        rows.append(row)
    done = [r for r in rows if r["flops"] is not None]
    base = next((r["flops"] for r in done if r["name"] == "everything_saveable"), None)
    if base is None and done:
        base = min(r["flops"] for r in done)
    for r in done:
        r["base_flops"], r["extra_flops"] = base, r["flops"] - base
    return _table(rows, where.describe(), names, _name(make_step))


def _table(rows, where, names, function):
    """The rows sorted (those that fit first, the fewest extra FLOPs first), as a PolicyTable."""
    rows.sort(key=lambda r: (r["error"] is not None, r["fits"] is not True,
                             r["extra_flops"] if r["fits"] else 0, r["peak_bytes"] or 0))
    planned = next((r["plan"] for r in rows if r["plan"] is not None), None)
    usable = planned.framework_limit_bytes if planned is not None else None
    cap = planned.capacity_bytes if planned is not None else None
    return PolicyTable(rows, where, usable, cap, names, function)
