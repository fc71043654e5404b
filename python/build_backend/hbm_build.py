"""PEP 517 hooks that build hbm's wheel with the standard library alone, offline.

`pip install ./python` from the hbm source tree: libhbm.so is built with CMake from the
tree (python/..; a C compiler and CMake are what `make` needs too) into a temporary folder
and bundled next to the package, so `import hbm` finds it with no variable set. A
libhbm.so already in python/hbm/ is bundled as it is. The wheel is a zip written here
(PEP 427): no setuptools, no wheel package, nothing downloaded, in any venv (Python
3.11's bundled setuptools has no bdist_wheel; it is not needed).
"""
import base64
import hashlib
import os
import re
import shutil
import subprocess
import sysconfig
import tempfile
import zipfile

_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # python/
_PKG = os.path.join(_HERE, "hbm")


def _meta():
    text = open(os.path.join(_HERE, "pyproject.toml"), encoding="utf-8").read()
    version = re.search(r'__version__\s*=\s*"([^"]+)"',
                        open(os.path.join(_PKG, "_version.py"), encoding="utf-8").read()).group(1)
    desc = re.search(r'^description\s*=\s*"([^"]*)"', text, re.M).group(1)
    pyreq = re.search(r'^requires-python\s*=\s*"([^"]*)"', text, re.M).group(1)
    section = re.split(r"^\[", text.split("[project.optional-dependencies]")[1], flags=re.M)[0]
    extras = re.findall(r'^(\w+)\s*=\s*\["(\w+)"\]', section, re.M)
    lines = ["Metadata-Version: 2.1", "Name: hbm", "Version: " + version, "Summary: " + desc,
             "Requires-Python: " + pyreq]
    for extra, dep in extras:
        lines += ["Provides-Extra: " + extra, 'Requires-Dist: %s; extra == "%s"' % (dep, extra)]
    lines.append("Description-Content-Type: text/markdown")
    readme = open(os.path.join(_HERE, "README.md"), encoding="utf-8").read()
    return version, "\n".join(lines) + "\n\n" + readme


def _libhbm(tmp):
    """The libhbm.so to bundle: python/hbm/libhbm.so, else one built from the source tree;
    None when neither can be had (the wheel then finds the library as _lib.py says)."""
    given = os.path.join(_PKG, "libhbm.so")
    if os.path.exists(given):
        return given
    root = os.path.dirname(_HERE)
    if not os.path.exists(os.path.join(root, "CMakeLists.txt")) or not shutil.which("cmake"):
        print("hbm: no source tree or no cmake here: the wheel holds no libhbm.so "
              "(build it with `make`, then set HBM_LIBRARY or copy it into python/hbm/)")
        return None
    build = os.path.join(tmp, "build")
    run = lambda *a: subprocess.run(a, check=True, stdout=subprocess.DEVNULL)  # noqa: E731
    print("hbm: building libhbm.so from %s with CMake" % root)
    run("cmake", "-S", root, "-B", build, "-DCMAKE_BUILD_TYPE=Release", "-DBUILD_TESTING=OFF")
    run("cmake", "--build", build, "--target", "hbm_shared", "-j", str(os.cpu_count() or 2))
    return os.path.realpath(os.path.join(build, "libhbm.so"))


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (name, digest, len(data))


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    version, metadata = _meta()
    with tempfile.TemporaryDirectory() as tmp:
        lib = _libhbm(tmp)
        # a wheel with a native library is for this platform only (linux_x86_64, ...)
        plat = re.sub(r"[-.]", "_", sysconfig.get_platform()) if lib else "any"
        tag = "py3-none-" + plat
        name = "hbm-%s-%s.whl" % (version, tag)
        dist = "hbm-%s.dist-info" % version
        files = []
        for f in sorted(os.listdir(_PKG)):
            if f.endswith(".py"):
                files.append(("hbm/" + f, open(os.path.join(_PKG, f), "rb").read()))
        if lib:
            files.append(("hbm/libhbm.so", open(lib, "rb").read()))
        wheel = "Wheel-Version: 1.0\nGenerator: hbm_build\nRoot-Is-Purelib: %s\nTag: %s\n" % (
            "false" if lib else "true", tag)
        files += [(dist + "/METADATA", metadata.encode()), (dist + "/WHEEL", wheel.encode())]
        record = [_record_line(n, d) for n, d in files] + [dist + "/RECORD,,"]
        files.append((dist + "/RECORD", ("\n".join(record) + "\n").encode()))
        with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
            for n, d in files:
                info = zipfile.ZipInfo(n, date_time=(1980, 1, 1, 0, 0, 0))
                info.external_attr = (0o755 if n.endswith(".so") else 0o644) << 16
                z.writestr(info, d, zipfile.ZIP_DEFLATED)
    return name


def get_requires_for_build_wheel(config_settings=None):
    return []  # nothing to download


def get_requires_for_build_sdist(config_settings=None):
    return []


def build_sdist(sdist_directory, config_settings=None):
    import tarfile
    version, metadata = _meta()
    base = "hbm-%s" % version
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as t:
        for f in ["pyproject.toml", "README.md", "build_backend/hbm_build.py"] + \
                 ["hbm/" + f for f in sorted(os.listdir(_PKG)) if f.endswith(".py")]:
            t.add(os.path.join(_HERE, f), arcname=base + "/" + f)
        data = metadata.encode()
        info = tarfile.TarInfo(base + "/PKG-INFO")
        info.size = len(data)
        import io
        t.addfile(info, io.BytesIO(data))
    return name
