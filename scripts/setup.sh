#!/usr/bin/env bash
# Sets up a machine to build, run and test ukdpack. Idempotent: installs the
# Debian packages that are missing (apt-get update once), creates .venv and
# installs ukdpack into it (a regular pip install built in build/py, with the dvc and
# test extras).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

packages=(hipcc libzstd-dev libmsgpack-cxx-dev nlohmann-json3-dev libssl-dev libgtest-dev
          ninja-build git clang-15 libclang-common-15-dev ccache clang-19 lld-19
          nginx-light redis-server  # servers the remote-cache tests start
          zsh)  # the shell-completion test loads the zsh script in a real zsh
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

python=${UKDPACK_PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$python" -m venv .venv
fi
pip=(.venv/bin/python -m pip install -q --disable-pip-version-check)
"${pip[@]}" setuptools wheel "scikit-build-core>=0.11" "pybind11>=2.12" "cmake>=3.20" ninja
# A regular (not editable) install, rebuilt incrementally in build/py with the C++
# tests for scripts/test.sh. Not editable on purpose: an editable install's import
# hook would shadow the extension a superbuild puts on PYTHONPATH.
"${pip[@]}" --no-build-isolation --force-reinstall --no-deps \
  -C build-dir=build/py -C cmake.define.UKDPACK_BUILD_TESTS=ON .
"${pip[@]}" --no-build-isolation \
  -C build-dir=build/py -C cmake.define.UKDPACK_BUILD_TESTS=ON ".[dvc,test,remote]"
echo "setup: ready (.venv/bin/ukdpack)"
