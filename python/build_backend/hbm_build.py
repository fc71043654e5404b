"""PEP 517 hooks: setuptools' own, with setuptools and wheel taken from this machine.

pip builds in an isolated environment that hides the running interpreter's packages and
downloads the build requirements, which fails offline. These hooks ask for nothing to be
downloaded and put back on sys.path, after whatever pip provided, the site-packages of
the interpreter running pip (a `python3 -m venv` has setuptools) and of its base
installation (Debian: python3-setuptools, python3-wheel), so the wheel is built offline.
"""
import os
import site
import sys
import sysconfig


def _local_site_packages():
    paths = [sysconfig.get_paths()[k] for k in ("purelib", "platlib")]
    try:
        paths += site.getsitepackages() + site.getsitepackages([sys.base_prefix])
    except AttributeError:  # an old virtualenv's site module
        pass
    for p in paths:
        if p not in sys.path and os.path.isdir(p):
            sys.path.append(p)


_local_site_packages()
try:
    from setuptools import build_meta as _b
except ImportError as e:
    raise ImportError("building hbm needs setuptools: Debian's python3-setuptools, "
                      "or python3 -m pip install setuptools") from e


def _no_downloads(config_settings=None):
    return []


def _need_wheel():
    try:
        import setuptools.command.bdist_wheel  # noqa: F401  (setuptools >= 70.1 has its own)
        return
    except ImportError:
        pass
    try:
        import wheel.bdist_wheel  # noqa: F401
    except ImportError as e:
        raise ImportError("building hbm with this setuptools needs the wheel package: Debian's "
                          "python3-wheel, or python3 -m pip install wheel") from e


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    _need_wheel()
    return _b.build_wheel(wheel_directory, config_settings, metadata_directory)


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    _need_wheel()
    return _b.prepare_metadata_for_build_wheel(metadata_directory, config_settings)


get_requires_for_build_wheel = _no_downloads
get_requires_for_build_sdist = _no_downloads
build_sdist = _b.build_sdist
