"""XLA itself reads and compiles the module `hbm fit --emit` writes when it chooses to recompute a
scan residual (run by tests/test_python.sh).

jaxlib has no public call that compiles HLO text. Its parser is reachable
(jax._src.lib.xla_client.hlo.hlo_module_from_text), and so is the converter to StableHLO
(xla_client._xla.mlir.hlo_to_stablehlo); XLA:CPU then compiles what the converter gives once the
two layout-bound ops it keeps are taken out: a bitcast between default (descending) layouts is
a reshape of the same values, and a fusion's body is inlined (XLA fuses again). The figures
compared are memory_analysis()'s temp and hbm plan's. Skips, saying why, without JAX or those
calls.
"""
import json
import os
import re
import subprocess

import pytest

jax = pytest.importorskip("jax", reason="JAX is not installed (pip install jax)")

try:
    import jax.extend  # noqa: F401
    from jax._src.interpreters import mlir as jmlir
    from jax._src.lib import xla_client as xc
    from jax._src.lib.mlir import ir
    _parse = xc.hlo.hlo_module_from_text
    _to_stablehlo = xc._xla.mlir.hlo_to_stablehlo
except (ImportError, AttributeError) as e:  # jaxlib's internals moved
    pytest.skip("this jaxlib has no HLO text parser reachable from Python (%s)" % e, allow_module_level=True)

if jax.default_backend() != "cpu":
    pytest.skip("compared with XLA:CPU; JAX's default backend here is %s" % jax.default_backend(),
                allow_module_level=True)

SRC = os.environ.get("HBM_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
HBM = os.environ.get("HBM_CLI", "hbm")

_BITCAST = re.compile(r"mhlo\.bitcast (%\S+) \{result_layout = dense<\[([0-9, ]*)\]> : tensor<\d+xindex>, "
                      r"source_layout = dense<\[([0-9, ]*)\]> : tensor<\d+xindex>\}")


def _descending(layout):
    v = [int(x) for x in layout.split(",")] if layout.strip() else []
    return v == list(range(len(v) - 1, -1, -1))


def xla_cpu_temp(path):
    """XLA:CPU's temp bytes for the HLO text module at path, compiled as described above."""
    text = open(path).read()
    module = _parse(text)  # XLA's own parser: raises on a module it cannot read
    mb = _to_stablehlo(module.as_serialized_hlo_module_proto())
    with jmlir.make_ir_context():
        txt = str(ir.Module.parse(mb))
    other = [b.group(0) for b in _BITCAST.finditer(txt) if not (_descending(b.group(2)) and _descending(b.group(3)))]
    assert not other, "a bitcast between other layouts is not a reshape: %s" % other[0]
    txt = _BITCAST.sub(lambda b: "stablehlo.reshape " + b.group(1), txt)
    with jmlir.make_ir_context():
        mod = ir.Module.parse(txt)
        found = []

        def walk(op):
            for region in op.regions:
                for block in region.blocks:
                    for o in block.operations:
                        walk(o.operation)
                        if o.operation.name in ("mhlo.fusion", "mhlo.copy"):
                            found.append(o.operation)
        walk(mod.operation)
        for op in found:
            if op.name == "mhlo.copy":  # the same values
                op.results[0].replace_all_uses_with(op.operands[0])
                op.erase()
                continue
            body = op.regions[0].blocks[0]
            for arg, v in zip(body.arguments, op.operands):
                arg.replace_all_uses_with(v)
            inner = list(body.operations)
            for o in inner[:-1]:
                o.operation.move_before(op)
            for res, v in zip(op.results, inner[-1].operands):
                res.replace_all_uses_with(v)
            op.erase()
        txt = str(mod)
    be = jax.extend.backend.get_backend("cpu")
    exe = be.compile_and_load(txt, xc.DeviceList(tuple(be.devices()[:1])), xc.CompileOptions())
    return exe.get_compiled_memory_stats().temp_size_in_bytes


def hbm_json(*args):
    out = subprocess.run([HBM, *args, "--json"], check=False, capture_output=True, text=True)
    assert out.stdout, out.stderr
    return json.loads(out.stdout)


def test_xla_compiles_the_emitted_recompute_module(tmp_path):
    src = os.path.join(SRC, "examples", "fit_scan_train.hlo")
    # the way there measured first: the module as XLA compiled it plans to XLA's temp again
    assert xla_cpu_temp(src) == hbm_json("plan", src)["temp_size_in_bytes"]
    out = str(tmp_path / "recompute.hlo")
    fit = hbm_json("fit", src, "--capacity", "4MiB", "--framework-limit", "1", "--emit", out)
    assert fit["recompute_residual_fits"] is True and not fit["fits"], fit
    plan = hbm_json("plan", out)
    assert plan["peak_bytes"] == fit["recompute_residual_peak_bytes"]
    assert ".recompute" in open(out).read()
    # XLA reads the edited module, compiles it, and its temp is hbm's
    assert xla_cpu_temp(out) == plan["temp_size_in_bytes"]


def test_xla_parses_the_emitted_tpu_module(tmp_path):
    """XLA:TPU's Flax scan, its residual in a multi-output fusion: XLA's parser reads the edit
    (compiling it needs XLA:TPU's tiled layouts, which the CPU path above does not keep)."""
    src = os.path.join(SRC, "tests", "fit_jax", "flax_scan_tpu.hlo")
    out = str(tmp_path / "recompute.hlo")
    fit = hbm_json("fit", src, "--capacity", "100MiB", "--framework-limit", "1", "--emit", out)
    assert fit["recompute_residual_fits"] is True, fit
    text = open(out).read()
    module = _parse(text)
    names = {c.name for c in module.computations()}
    assert "fused_computation.9.clone.1.recompute" in names, sorted(names)
    assert hbm_json("plan", out)["peak_bytes"] == fit["recompute_residual_peak_bytes"]
