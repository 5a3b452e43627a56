"""One REAPI action from a plain description: its Command, its input root (a Merkle tree
of Directory messages) and the Action, with every blob they need by digest.

Messages are made canonical as REAPI asks (files and folders sorted by name, properties
and environment sorted), so the same description gives the same action digest on every
machine: that digest is the key of the farm's action cache.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from ukdpack.remote.protos.build.bazel.remote.execution.v2 import (
    remote_execution_pb2 as re_pb2,
)


def digest_of(data: bytes) -> re_pb2.Digest:
    """The REAPI digest (sha256 in hex, size) of ``data``."""
    return re_pb2.Digest(hash=hashlib.sha256(data).hexdigest(), size_bytes=len(data))


@dataclass(frozen=True)
class ActionSpec:
    """What an action runs: ``argv`` in ``working_directory`` (relative to the input root)
    with ``env``, over ``inputs`` (input-root-relative path -> bytes); ``outputs`` are
    paths relative to the working directory; ``platform`` selects the workers."""

    argv: tuple[str, ...]
    inputs: Mapping[str, bytes]
    outputs: tuple[str, ...]
    working_directory: str = ""
    env: Mapping[str, str] = field(default_factory=dict)
    platform: Mapping[str, str] = field(default_factory=dict)
    timeout: float | None = None  # seconds the worker lets it run
    cacheable: bool = True  # may the farm answer it from (and store it in) its action cache


@dataclass(frozen=True)
class BuiltAction:
    """An action's digest and every blob it names (by sha256 hex)."""

    digest: re_pb2.Digest
    blobs: Mapping[str, bytes]


def _tree(inputs: Mapping[str, bytes], blobs: dict[str, bytes]) -> re_pb2.Digest:
    """The digest of the root Directory of ``inputs``; every file and Directory blob into
    ``blobs``."""
    files: dict[str, bytes] = {}
    folders: dict[str, dict[str, bytes]] = {}
    for path, data in inputs.items():
        head, sep, rest = path.partition("/")
        if sep:
            folders.setdefault(head, {})[rest] = data
        else:
            files[head] = data
    directory = re_pb2.Directory()
    for name in sorted(files):
        d = digest_of(files[name])
        blobs[d.hash] = files[name]
        directory.files.add(name=name, digest=d)
    for name in sorted(folders):
        directory.directories.add(name=name, digest=_tree(folders[name], blobs))
    raw = directory.SerializeToString(deterministic=True)
    d = digest_of(raw)
    blobs[d.hash] = raw
    return d


def build_action(spec: ActionSpec) -> BuiltAction:
    """The action of ``spec`` and its blobs (input files, Directories, Command, Action)."""
    for path in spec.inputs:
        if path.startswith("/") or any(p in ("", ".", "..") for p in path.split("/")):
            raise ValueError(f"input path {path!r} is not a plain relative path")
    blobs: dict[str, bytes] = {}
    root = _tree(spec.inputs, blobs)
    command = re_pb2.Command(
        arguments=list(spec.argv), output_paths=sorted(spec.outputs),
        working_directory=spec.working_directory,
        environment_variables=[re_pb2.Command.EnvironmentVariable(name=k, value=v)
                               for k, v in sorted(spec.env.items())],
        platform=re_pb2.Platform(properties=[re_pb2.Platform.Property(name=k, value=v)
                                             for k, v in sorted(spec.platform.items())]))
    raw_command = command.SerializeToString(deterministic=True)
    command_digest = digest_of(raw_command)
    blobs[command_digest.hash] = raw_command
    action = re_pb2.Action(command_digest=command_digest, input_root_digest=root,
                           do_not_cache=not spec.cacheable)
    if spec.timeout:
        action.timeout.seconds = math.ceil(spec.timeout)
    raw_action = action.SerializeToString(deterministic=True)
    action_digest = digest_of(raw_action)
    blobs[action_digest.hash] = raw_action
    return BuiltAction(action_digest, blobs)
