#!/usr/bin/env bash
# scripts/deps.sh [build|test] - install what hbm needs on a Debian/Ubuntu machine, and only
# that. Idempotent: does nothing when everything is present.
#   build (default): a C compiler, make and CMake - all that `make build` and `make run` need;
#         and, optional (the build succeeds without it, and those inputs then say what is
#         missing), protobuf-c: protoc-c and libprotobuf-c, to read XProf profiles and XLA's
#         protobuf dumps.
#   test: also what some tests use (pkg-config, python3 with pytest and venv, zlib's headers
#         for gzip'd inputs, Debian's chromium for the HTML test); those tests skip, saying
#         why, where it is missing. Then the project's Python environment build-py/venv
#         (HBM_VENV), with JAX, libtpu, flax, optax, dask, pytest and PyTorch (CPU) at the versions of
#         python/requirements-test.txt, from the package index; a stamp of that file's hash
#         makes a second run do nothing, and an index that cannot be reached is a note (the
#         tests that need JAX then skip). `make run` needs none of it.
# Without apt-get nothing is installed: a missing build tool is an error that names it,
# a missing test tool is a note.
set -eu
mode=${1:-build}
case "$mode" in build | test) ;; *) echo "usage: scripts/deps.sh [build|test]" >&2; exit 2 ;; esac
need=() # Debian packages to install
missing=() # what is absent, in words
have() { command -v "$1" >/dev/null 2>&1; }
want() { # want PACKAGE WHAT: WHAT is absent, PACKAGE provides it
  need+=("$1")
  missing+=("$2")
}
have cmake || want cmake "cmake"
have cc || have gcc || have clang || want build-essential "a C compiler (cc)"
have make || want make "make"
nbuild=${#need[@]}
# optional in both modes: protobuf-c for XLA's protobuf inputs (src/hlo/proto_read.c)
have protoc-c || want protobuf-c-compiler "protoc-c (for XProf profiles and XLA's *.pb dumps)"
[ -e /usr/include/protobuf-c/protobuf-c.h ] ||
  want libprotobuf-c-dev "libprotobuf-c (for XProf profiles and XLA's *.pb dumps)"
if [ "$mode" = test ]; then
  have pkg-config || want pkg-config "pkg-config"
  # a python3 module, or the Debian package that provides it to /usr/bin/python3 (the
  # python3 on PATH may be another one, e.g. pyenv's)
  pymod() {
    python3 -c "import $1" 2>/dev/null ||
      dpkg-query -W -f='${Status}' "$2" 2>/dev/null | grep -q 'install ok installed'
  }
  if have python3; then
    pymod pytest python3-pytest || want python3-pytest "python3's pytest"
    pymod 'ensurepip, venv' python3-venv || want python3-venv "python3's venv"
  else
    want python3 "python3"
    need+=(python3-pytest python3-venv)
  fi
  # gzip'd inputs are read with zlib when the build finds its header (optional for building)
  [ -e /usr/include/zlib.h ] || want zlib1g-dev "zlib's headers (zlib.h)"
  # the headless browser for tests/test_view_html.sh
  have chromium || have chromium-browser || want chromium "chromium (for the HTML test)"
  # the Python tests run in a private network namespace and bring its loopback up there
  have ip || [ -x /usr/sbin/ip ] || [ -x /sbin/ip ] || want iproute2 "ip (iproute2: the loopback of the tests' network namespace)"
fi
# test mode, last: the virtual environment of python/requirements-test.txt (see the top)
pyenv() {
  local root req venv stamp hash py
  root=$(cd "$(dirname "$0")/.." && pwd)
  req=$root/python/requirements-test.txt
  venv=${HBM_VENV:-$root/build-py/venv}
  stamp=$venv/.hbm-requirements
  hash=$(sha256sum "$req" | cut -d' ' -f1)
  [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$hash" ] && return 0
  py=""
  for c in python3 /usr/bin/python3; do
    if "$c" -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
      py=$c; break
    fi
  done
  if [ -z "$py" ]; then
    echo "scripts/deps.sh: note: no python3 >= 3.11 with venv for $venv; the tests that need JAX will skip" >&2
    return 0
  fi
  mkdir -p "$(dirname "$venv")"
  [ -x "$venv/bin/python" ] || "$py" -m venv "$venv" >/dev/null || {
    echo "scripts/deps.sh: note: $py -m venv $venv failed; the tests that need JAX will skip" >&2
    return 0
  }
  echo "scripts/deps.sh: installing python/requirements-test.txt into $venv" >&2
  if ! "$venv/bin/python" -m pip install -q --disable-pip-version-check --retries 1 --timeout 20 \
    -r "$req" >"$venv/pip.log" 2>&1; then
    echo "scripts/deps.sh: note: could not install python/requirements-test.txt into $venv" \
      "(package index unreachable? $venv/pip.log says); the tests that need JAX will skip" >&2
    return 0
  fi
  echo "$hash" >"$stamp.tmp" && mv "$stamp.tmp" "$stamp"
}
if [ ${#need[@]} -eq 0 ]; then
  [ "$mode" = test ] && pyenv
  exit 0
fi
list() { local IFS=,; local s="$*"; echo "${s//,/, }"; }
if ! have apt-get; then
  if [ "$nbuild" -gt 0 ]; then
    echo "scripts/deps.sh: missing: $(list "${missing[@]:0:$nbuild}")" >&2
    echo "scripts/deps.sh: install them with your system's package manager (no apt-get here)" >&2
    exit 1
  fi
  echo "scripts/deps.sh: note: no $(list "${missing[@]}") and no apt-get to install them;" \
    "the tests that need them will skip" >&2
  [ "$mode" = test ] && pyenv
  exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if have sudo; then
    sudo=sudo
  else
    echo "scripts/deps.sh: missing: $(list "${missing[@]}"); not root and no sudo to install them" >&2
    [ "$nbuild" -gt 0 ] && exit 1
    [ "$mode" = test ] && pyenv
    exit 0
  fi
fi
echo "scripts/deps.sh: installing ${need[*]}" >&2
$sudo apt-get update -q >/dev/null
if ! DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${need[@]}" >/dev/null; then
  # the required tools alone, then each optional package on its own: one that this
  # distribution lacks is a note, not a failed build
  [ "$nbuild" -gt 0 ] && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${need[@]:0:$nbuild}" >/dev/null
  for p in "${need[@]:$nbuild}"; do
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "$p" >/dev/null 2>&1 ||
      echo "scripts/deps.sh: note: could not install $p; what needs it is skipped or says so" >&2
  done
fi
[ "$mode" = test ] && pyenv
exit 0
