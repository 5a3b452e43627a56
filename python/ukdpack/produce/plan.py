"""What one arch shard needs: its kernels, their launches, and the distinct code
objects (jobs) those launches share.

Launches that share a translation unit and build (hip, cuda), a file (hsaco)
or a builder call share one job, one code object and one toc key.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ukdpack import _runtime
from ukdpack.authored.kinds import COMPILED, kind, normalized_build
from ukdpack.authored.load import Member, Tree
from ukdpack.authored.model import Source, Ukd
from ukdpack.authored.tockey import launch_toc_key


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
    #: what a compile builds for when not the bare arch: a generic family
    #: (``gfx11-generic``) or a target ID with features (``gfx90a:xnack+``)
    target: str = ""

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.kind, self.toc_key, f"{self.arch}={self.target}" if self.target else self.arch)

    @property
    def compile_target(self) -> str:
        return self.target or self.arch

    def what(self) -> str:
        """``kernels/a.hip [N=4] for gfx90a`` for messages and progress."""
        if kind(self.kind).producer == "module":
            return f"builder {self.fields['module']}:{self.fields['function']} for {self.arch}"
        build = normalized_build(self.fields.get("build"))
        parts = [f"{k}={v}" for k, v in build["defines"].items()] + build["flags"]
        shown = f" [{' '.join(parts)}]" if parts else ""
        return f"{self.rel}{shown} for {self.compile_target}"


@dataclass(frozen=True)
class Launch:
    """One launch of one kernel of the shard."""

    member: Member
    name: str | None  # None for a single-launch kernel
    source: Source
    job_key: tuple[str, str, str] | None  # None for kinds without a code object
    #: every job of the launch, one per target (feature variants); job_key is the first
    job_keys: tuple[tuple[str, str, str], ...] = ()


@dataclass(frozen=True)
class ArchPlan:
    arch: str
    members: tuple[Member, ...]
    launches: tuple[Launch, ...]
    jobs: tuple[Job, ...]

    @functools.cached_property
    def on_arch(self) -> dict[str, Member]:
        """The shard's kernels by key (made once: the shard's packs are made beside the
        compiles and after them, each asking which kernels the arch keeps)."""
        return {m.ukd.key: m for m in self.members}

    @functools.cached_property
    def _by_kernel(self) -> dict[str, list[Launch]]:
        out: dict[str, list[Launch]] = {}
        for ln in self.launches:
            out.setdefault(ln.member.ukd.key, []).append(ln)
        return out

    def launches_of(self, ukd: Ukd) -> list[Launch]:
        """The launches of one kernel, in launch-name order."""
        return self._by_kernel.get(ukd.key, [])


#: The targets of a source built for the bare arch alone.
_BARE = ("",)


def _generic(src: Source) -> bool:
    """Whether the source's build asks for the arch's generic family."""
    return (src.fields.get("build") or {}).get("generic") is True


def compile_targets(src: Source, arch: str, variants: Sequence[str]) -> list[str]:
    """What a compiled (hip, cuda) source is built for in the shard of ``arch``: each
    requested target ID of the arch (``variants``; none: the arch itself), or, for a
    build asking for ``generic``, the arch's generic family with the features of each
    variant the family supports. ``""`` stands for the bare arch."""
    wanted = list(variants) or [arch]
    if _generic(src):  # an sm_ arch has no family
        family = str(_runtime.generic_family_of(arch))
        if family:
            supported = set(_runtime.supported_features(family))
            wanted = [":".join([family, *(f"{n}{v}" for n, v in
                                          _runtime.target_features(t).items()
                                          if n in supported)]) for t in wanted]
    out = list(dict.fromkeys(wanted))
    return ["" if t == arch else t for t in out]


def plan_arch(tree: Tree, arch: str, variants: Sequence[str] = ()) -> ArchPlan:
    """The kernels in the shard of ``arch`` and the jobs that build their objects:
    one per compiled source and target (``variants``: the target IDs with features
    asked for the arch, e.g. ``gfx90a:xnack+``; see compile_targets). The tree has
    passed every rule, so every path stays inside the root."""
    members = tuple(tree.members_on(arch))
    # Each job made once, at the end, with all its users; as before, its fields are
    # those of its last launch (launches of one job differ only outside its identity).
    made: dict[tuple[str, str, str], tuple[str, str, str | None, Mapping[str, Any], str]] = {}
    users: dict[tuple[str, str, str], list[User]] = {}
    launches: list[Launch] = []
    for m in members:
        for name, src in m.ukd.launches:
            if src.kind not in COMPILED:
                launches.append(Launch(m, name, src, None))
                continue
            rel = m.ukd.file_of(src)
            key = launch_toc_key(tree, m.ukd, src)
            user = User(m.ukd.name, m.ukd.file, src.json_path)
            # The bare arch alone (compile_targets' answer without variants or a generic
            # build), told without asking it: most launches of most trees.
            targets = (compile_targets(src, arch, variants) if kind(src.kind).producer ==
                       "compile" and (variants or _generic(src)) else _BARE)
            keys: list[tuple[str, str, str]] = []
            for target in targets:
                job_key = (src.kind, key, f"{arch}={target}" if target else arch)  # Job.key
                made[job_key] = (src.kind, key, rel, src.fields, target)
                users.setdefault(job_key, []).append(user)
                keys.append(job_key)
            launches.append(Launch(m, name, src, keys[0], tuple(keys)))
    jobs = tuple(Job(k, arch, key, rel, fields, tuple(users[job_key]), target)
                 for job_key, (k, key, rel, fields, target) in made.items())
    return ArchPlan(arch, members, tuple(launches), jobs)
