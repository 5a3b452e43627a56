"""What a test needs of the machine beyond what scripts/setup.sh installs.

setup.sh installs every Debian and PyPI package the suite uses. A few things it cannot
give a plain Debian 12: NVIDIA's CUDA toolkit (not in Debian's main archive), a second
Python version, and mount namespaces where a container or chroot refuses them. A test
that needs one of those calls :func:`need`: on a user's machine it is skipped with a
reason naming what is missing; under CI (``CI=true``, as ``.ci/run`` runs) a missing
one fails, so CI still runs every test.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest


def need(found: object, what: str) -> None:
    """Skip, or under ``CI=true`` fail, unless ``found`` is truthy; ``what`` names the
    missing thing and how to get it."""
    if found:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI needs {what}, which this machine lacks", pytrace=False)
    pytest.skip(f"missing {what} (scripts/setup.sh cannot install it)")


def need_nvcc() -> str:
    """nvcc on PATH, or skip/fail naming NVIDIA's CUDA toolkit."""
    found = shutil.which("nvcc")
    need(found, "nvcc (NVIDIA's CUDA toolkit, not in Debian's main archive)")
    assert found is not None
    return found


def other_python() -> str | None:
    """An interpreter of another Python version than this one (pyenv's or the system's)."""
    mine = f"{sys.version_info[0]}.{sys.version_info[1]}"
    for version in ("3.12", "3.13", "3.10", "3.11"):
        if version == mine:
            continue
        for found in sorted(Path.home().glob(f".pyenv/versions/{version}*/bin/python{version}")):
            return str(found)
        for folder in ("/usr/bin", "/usr/local/bin"):
            if os.access(f"{folder}/python{version}", os.X_OK):
                return f"{folder}/python{version}"
    return None


def need_other_python() -> str:
    """Another Python version, or skip/fail naming it."""
    found = other_python()
    need(found, "a Python of another version than this one (python3.12, e.g. from pyenv)")
    assert found is not None
    return found


@functools.cache
def mount_namespaces() -> bool:
    """Whether this process may make a private mount namespace and mount in it (a chroot
    or an unprivileged container refuses ``unshare --mount``)."""
    if shutil.which("unshare") is None:
        return False
    ns = ["unshare", "--mount"] + ([] if os.geteuid() == 0 else ["--map-root-user"])
    probe = [*ns, "sh", "-euc", "mount -t tmpfs none /mnt 2>/dev/null || mount -t tmpfs none /tmp"]
    return subprocess.run(probe, capture_output=True, check=False).returncode == 0


def need_mount_namespaces() -> None:
    """Skip/fail unless ``unshare --mount`` works here."""
    need(mount_namespaces(), "mount namespaces (`unshare --mount`; a chroot or container refuses them)")
