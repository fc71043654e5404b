#!/usr/bin/env bash
# Install what building and testing hbm needs on a fresh Debian/Ubuntu machine.
# Idempotent: does nothing when everything is present.
set -euo pipefail
need=()
command -v cmake >/dev/null || need+=(cmake)
command -v cc >/dev/null || need+=(build-essential)
command -v make >/dev/null || need+=(make)
command -v python3 >/dev/null || need+=(python3)
command -v pkg-config >/dev/null || need+=(pkg-config)
# headless browser for tests/test_view_html.sh (Debian's package; the test skips without it)
command -v chromium >/dev/null || command -v chromium-browser >/dev/null || need+=(chromium)
# the Python package: its tests (pytest) and `pip install ./python` offline into a venv
for m in pytest:python3-pytest ensurepip:python3-venv wheel:python3-wheel; do
  /usr/bin/python3 -c "import ${m%%:*}" 2>/dev/null || need+=("${m#*:}")
done
if [ ${#need[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  echo "scripts/deps.sh: installing ${need[*]}" >&2
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${need[@]}"
fi
