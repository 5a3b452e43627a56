"""What one arch shard needs: its kernels, their launches, and the distinct code
objects (jobs) those launches share.

Launches that share a translation unit and build (hip, cuda), a file (hsaco)
or a builder call share one job, one code object and one toc key.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ukdpack.authored.kinds import COMPILED, kind, normalized_build
from ukdpack.authored.load import Member, Tree
from ukdpack.authored.model import Source, Ukd
from ukdpack.authored.rules import launch_toc_key


@dataclass(frozen=True)
class User:
    """A launch that uses a job, for messages: kernel name and where it is written."""

    name: str
    file: str
    json_path: str

    def __str__(self) -> str:
        return f"'{self.name}' ({self.file}: {self.json_path})"


@dataclass(frozen=True)
class Job:
    """One code object for one arch."""

    kind: str
    arch: str
    toc_key: str
    rel: str | None  # root-relative source (hip, cuda) or object (hsaco) file
    fields: Mapping[str, Any] = field(compare=False, hash=False)
    users: tuple[User, ...] = field(compare=False, hash=False, default=())

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.kind, self.toc_key, self.arch)

    def what(self) -> str:
        """``kernels/a.hip [N=4] for gfx90a`` for messages and progress."""
        if kind(self.kind).producer == "builder":
            return f"builder {self.fields['module']}:{self.fields['function']} for {self.arch}"
        build = normalized_build(self.fields.get("build"))
        parts = [f"{k}={v}" for k, v in build["defines"].items()] + build["flags"]
        shown = f" [{' '.join(parts)}]" if parts else ""
        return f"{self.rel}{shown} for {self.arch}"


@dataclass(frozen=True)
class Launch:
    """One launch of one kernel of the shard."""

    member: Member
    name: str | None  # None for a single-launch kernel
    source: Source
    job_key: tuple[str, str, str] | None  # None for kinds without a code object


@dataclass(frozen=True)
class ArchPlan:
    arch: str
    members: tuple[Member, ...]
    launches: tuple[Launch, ...]
    jobs: tuple[Job, ...]

    @functools.cached_property
    def _by_kernel(self) -> dict[str, list[Launch]]:
        out: dict[str, list[Launch]] = {}
        for ln in self.launches:
            out.setdefault(ln.member.ukd.key, []).append(ln)
        return out

    def launches_of(self, ukd: Ukd) -> list[Launch]:
        """The launches of one kernel, in launch-name order."""
        return self._by_kernel.get(ukd.key, [])


def plan_arch(tree: Tree, arch: str) -> ArchPlan:
    """The kernels in the shard of ``arch`` and the jobs that build their objects.
    The tree has passed every rule, so every path stays inside the root."""
    members = tuple(tree.members_on(arch))
    jobs: dict[tuple[str, str, str], Job] = {}
    launches: list[Launch] = []
    for m in members:
        for name, src in m.ukd.launches:
            if src.kind not in COMPILED:
                launches.append(Launch(m, name, src, None))
                continue
            rel = m.ukd.file_of(src)
            key = launch_toc_key(tree, m.ukd, src)
            job = Job(src.kind, arch, key, rel, src.fields)
            user = User(m.ukd.name, m.ukd.file, src.json_path)
            known = jobs.get(job.key)
            jobs[job.key] = Job(job.kind, arch, key, rel, src.fields,
                                (known.users if known else ()) + (user,))
            launches.append(Launch(m, name, src, job.key))
    return ArchPlan(arch, members, tuple(launches), tuple(jobs.values()))
