#!/usr/bin/env bash
# Sets up a machine to build, run and test ukdpack: a plain Debian 12 (bookworm) with
# apt-get and PyPI reachable is enough. Idempotent: installs the Debian packages that are
# missing (apt-get update once), creates .venv with Debian's Python and installs ukdpack
# into it (a regular pip install built in build/py, with the dvc, test and remote extras).
# Prints a line per phase; the C++ build shows its own progress ([done/total]) and takes
# about 5-9 minutes on 2 cores the first time, seconds after that.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

say() { printf 'setup: %s\n' "$*"; }

# Every Debian package the build, the packer and the tests use, by name: a minbase
# Debian has none of them (installed without recommends, so each is listed).
packages=(
  python3 python3-venv python3-dev   # .venv and the extension's headers
  g++ make cmake ninja-build git ccache  # the build; make and a system CMake for the CMake tests
  hipcc clang-15 libclang-common-15-dev  # HIP compiles (hipcc is clang 15); libFuzzer
  clang-19 lld-19                    # generic targets, feature target IDs
  clang-format-19                    # the C++ layout scripts/test.sh checks
  libzstd-dev libmsgpack-cxx-dev libxxhash-dev nlohmann-json3-dev libssl-dev libgtest-dev
  util-linux procps                  # unshare, kill/race tests (ps, pkill)
  nginx-light redis-server           # servers the remote-cache tests start on loopback
  postgresql python3.11-venv         # BuildGrid's database and Python (remote-execution tests)
  zsh                                # the shell-completion test loads its script in zsh
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  say "installing ${#missing[@]} Debian packages: ${missing[*]} (a few minutes on a new machine)"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  say "Debian packages: all ${#packages[@]} present"
fi

# Debian's own Python by default: what a user's machine has (UKDPACK_PYTHON overrides).
python=${UKDPACK_PYTHON:-}
if [ -z "$python" ]; then
  python=python3
  [ -x /usr/bin/python3 ] && python=/usr/bin/python3
fi
if [ ! -x .venv/bin/python ]; then
  say "creating .venv with $("$python" --version 2>&1) ($python)"
  "$python" -m venv .venv
fi
pip=(.venv/bin/python -m pip install -q --disable-pip-version-check)
# Debian's venv pip (23.0) has no -C: bring a current one first.
say "installing the build tools into .venv (pip, scikit-build-core, pybind11, cmake, ninja)"
"${pip[@]}" --upgrade pip
"${pip[@]}" setuptools wheel "scikit-build-core>=0.11" "pybind11>=2.12" "cmake>=3.20" ninja

mkdir -p build
log=build/setup-build.log
# One pip install of ukdpack: its whole output goes to $log; the C++ build's
# [done/total] lines are shown as they come, and the log's tail if it fails.
build_install() {
  set +e
  .venv/bin/python -m pip install -v --disable-pip-version-check "$@" 2>&1 | tee "$log" \
    | grep --line-buffered -E '^ *\[[1-9][0-9]*/[0-9]+\] ' \
    | sed -u -E 's#^ *(\[[0-9]+/[0-9]+\]) .*[ /]([^ /]+)$#setup:   \1 \2#'
  local rc=${PIPESTATUS[0]}
  set -e
  if [ "$rc" != 0 ]; then
    tail -n 40 "$log" >&2
    say "the install failed (exit $rc); the whole log: $log" >&2
    exit "$rc"
  fi
}
# A regular (not editable) install, rebuilt incrementally in build/py with the C++
# tests for scripts/test.sh. Not editable on purpose: an editable install's import
# hook would shadow the extension a superbuild puts on PYTHONPATH.
# Compiled through ccache into build/ccache, the cache scripts/test.sh gives the CMake
# tests: their superbuilds compile the same sources with the same flags, and take these
# objects instead of compiling them again. Both installs pass the same defines (a changed
# one would reconfigure and rebuild).
export CCACHE_DIR="$root/build/ccache"
# With the compiler a plain CMake picks (CXX, else c++), not Python's own that
# scikit-build-core takes otherwise (x86_64-linux-gnu-g++): ccache keys on the
# compiler's name, so only then do the CMake tests' builds find these objects.
export CXX=${CXX:-c++}
build_defines=(-C build-dir=build/py -C cmake.define.UKDPACK_BUILD_TESTS=ON
               -C cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache)
say "building ukdpack's C++ runtime and extension in build/py (about 5-9 minutes on 2 cores the first time)"
build_install --no-build-isolation --force-reinstall --no-deps "${build_defines[@]}" .
say "installing ukdpack's Python dependencies and extras (dvc, test, remote)"
build_install --no-build-isolation "${build_defines[@]}" ".[dvc,test,remote]"

# The remote-execution tests' server, BuildGrid, in an environment of its own: it pins
# its own grpcio/protobuf/SQLAlchemy, and the packer must not depend on them. 0.4.4 is the
# last release that installs on Debian 12's Python 3.11 (0.4.5 and later need 3.12 or
# 3.13). psycopg2, not psycopg 3: BuildGrid's job notifier (PostgreSQL LISTEN/NOTIFY)
# calls the connection's .poll(), which only psycopg2 has; the tests' connection string
# names it (postgresql+psycopg2://), since a bare postgresql:// picks psycopg 3 when it
# is installed and Execute then never reports completion.
buildgrid_python=${UKDPACK_BUILDGRID_PYTHON:-/usr/bin/python3.11}
if [ ! -x .venv-buildgrid/bin/bgd ]; then
  say "creating .venv-buildgrid with $("$buildgrid_python" --version 2>&1) (BuildGrid 0.4.4 for the remote-execution tests)"
  "$buildgrid_python" -m venv .venv-buildgrid
  .venv-buildgrid/bin/python -m pip install -q --disable-pip-version-check \
    "buildgrid==0.4.4" "psycopg2-binary==2.9.13"
else
  say "BuildGrid: .venv-buildgrid present"
fi
say "ready (.venv/bin/ukdpack)"
