"""The ``ukdpack`` command line (docs/cli.md).

Errors print as ``ukdpack: error: <file>: <json path>: <message>``, one line
each. Every command exits 0 when all is well, 1 on a finding (an invalid tree, a
failed arch, a difference), 2 on a command line it cannot act on (a bad flag, a
root or file that is not there); bad input never prints a traceback. With
``--json`` stdout holds one report (ukdpack.reports), whatever the exit status.
"""

from __future__ import annotations

import argparse
import os
import re
import select
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, NoReturn, cast

from ukdpack import __version__
from ukdpack.errors import UkdError, UsageError, escape_controls, has_controls, quote_name
from ukdpack.produce.limits import DEFAULT_JOB_TIMEOUT
from ukdpack.redact import redact, redactor
from ukdpack.reports import print_report, report
from ukdpack.words import count

if TYPE_CHECKING:
    from ukdpack.produce.remote import RemoteConfig
    from ukdpack.produce.remote_exec import RemoteExecConfig

    _Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]

Handler = Callable[[argparse.Namespace], int]

#: The last ``validate``'s tree, left for the process's end: ``python -m ukdpack`` ends
#: with ``os._exit``, which frees nothing, and freeing the runtime's set of 100,000
#: kernels costs 0.09 s of CPU. One at most: a caller running many commands keeps one.
_left_to_exit: list[object] = []


def _print_problem_lines(lines: Sequence[str]) -> None:
    blank = redactor()  # the credentials gathered once: a tree may have 100,000 findings
    for line in lines:
        print(blank(line), file=sys.stderr)


def _need_folder(path: Path, what: str) -> Path:
    """``path`` when it is a folder; else a usage error (exit 2): a root that is not
    there is a command line to fix, not a finding about a tree."""
    if not path.is_dir():
        found = "a file" if path.exists() else "nothing at that path"
        raise UsageError(f"{path}: expected {what}, found {found}")
    return path


def split_arches(values: Sequence[str] | None) -> list[str]:
    """``--arch`` values as given, repeated or comma-separated (``gfx90a,gfx1030``),
    blanks dropped."""
    return [a.strip() for v in values or () for a in v.split(",") if a.strip()]


def _one_arch(values: Sequence[str] | None) -> str | None:
    """The one ``--arch`` of a command that reads one shard."""
    arches = list(dict.fromkeys(split_arches(values)))
    if len(arches) > 1:
        raise UsageError(f"--arch {','.join(arches)}: this command reads one shard, of one "
                         "arch; name one")
    return arches[0] if arches else None


def cmd_validate(args: argparse.Namespace) -> int:
    from ukdpack.authored import early

    root = _need_folder(Path(args.root), "a descriptor root folder")
    # The tree's load starts now, on the runtime's threads, while the rules' modules
    # import (load_tree takes it).
    early.start(str(root), args.exclude_folder, True, [])
    try:
        from ukdpack.authored.validate import validate

        result = validate(root, args.exclude_folder)
    finally:
        early.discard()
    _left_to_exit[:] = [result]
    if args.json:
        print_report(report(result.valid, result.problems, {
            "root": args.root,
            "skipped": [{"path": s.rel, "why": s.why} for s in result.tree.skipped],
        }))
        return 0 if result.valid else 1
    _print_problem_lines([s.line() for s in result.tree.skipped])
    _print_problem_lines([p.line() for p in result.problems])
    print(f"ukdpack: {args.root}: {result.summary()}")
    return 0 if result.valid else 1


def cmd_pack(args: argparse.Namespace) -> int:
    from ukdpack import _runtime
    from ukdpack.authored import early

    for flag, value in (("--source-root", args.source_root), ("--out-root", args.out_root),
                        ("--handlers", args.handlers), ("--cache-dir", args.cache_dir),
                        ("--depfile", args.depfile)):
        if value == "":  # Path("") is the current folder: never what a build meant
            raise UsageError(f"{flag} '': expected a path, found an empty string (an unset "
                             "variable?); nothing was packed")
    if args.label is not None and has_controls(args.label):
        raise UsageError(f"--label {args.label!r}: expected a label that fits on one line "
                         "(it starts every progress line), found control characters in it")
    if args.handlers is not None and (not os.path.lexists(args.handlers)
                                      or os.path.isdir(args.handlers)):
        found = "a folder" if os.path.isdir(args.handlers) else "nothing at that path"
        raise UsageError(f"--handlers {args.handlers}: expected a handler manifest file, found "
                         f"{found}; nothing was packed")
    # The tree's load starts now, on the runtime's threads, while the packer's modules
    # import (load_tree takes it); a bad --arch is still refused below.
    early.start(str(Path(args.source_root).absolute()), args.exclude_folder, True,
                list(dict.fromkeys(_runtime.bare_arch(a) for a in split_arches(args.arch))))
    try:
        return _pack(args)
    finally:
        early.discard()


def _pack(args: argparse.Namespace) -> int:
    from ukdpack.progress import Reporter
    from ukdpack.shard.pack import (
        PackOptions,
        arch_variants,
        default_jobs,
        normalize_arches,
        pack,
        pack_report,
    )

    reporter = Reporter(args.label, live=False if args.plain else None)
    arches = split_arches(args.arch)
    if not arches:
        raise UsageError("--arch: expected at least one GPU arch such as gfx90a or sm_90")
    opts = PackOptions(
        source_root=Path(args.source_root), out_root=Path(args.out_root),
        arches=tuple(normalize_arches(arches, args.allow_unknown_arch,
                                      _compiler_arches(args.hipcc))),
        variants=arch_variants(arches),
        group=args.group,
        jobs=args.jobs or default_jobs(), hipcc=args.hipcc, nvcc=args.nvcc,
        handlers=Path(args.handlers) if args.handlers is not None else None,
        cache_dir=Path(args.cache_dir) if args.cache_dir is not None else None,
        depfile=Path(args.depfile) if args.depfile is not None else None,
        depfile_target=args.depfile_target, exclude_folders=tuple(args.exclude_folder),
        required=args.required, lock_timeout=args.lock_timeout, job_timeout=args.job_timeout,
        remote=_remote_config(args), remote_exec=_remote_exec_config(args))
    result = pack(opts, reporter)
    if result.failed:
        reporter.info(f"failed: {', '.join(result.failed)} ({len(result.failed)} of "
                      f"{len(opts.arches)} arch{'es' if len(opts.arches) != 1 else ''})")
    elif not result.ok:
        reporter.info("failed: the tree breaks the rules above; nothing was packed")
    if args.json:
        print_report(pack_report(opts, result))
    return 0 if result.ok else 1


def _compiler_arches(hipcc: str | None) -> Callable[[str], list[str] | str]:
    """What the chosen compiler says it builds, asked only for an arch the target table
    does not know (a newer compiler may know more; sm_ arches are the table's alone)."""
    def reported(bare: str) -> list[str] | str:
        from ukdpack.produce.compiler import amdgpu_arches, locate

        if not bare.startswith("gfx"):
            return "only AMDGPU compilers are asked"
        try:
            return amdgpu_arches(locate("hip", hipcc))
        except UkdError as e:
            return "; ".join(p.message for p in e.problems)
    return reported


def cmd_dvc_status(args: argparse.Namespace) -> int:
    from ukdpack.authored import dvc

    root = _need_folder(Path(args.root), "a descriptor root folder")
    st = dvc.status(root, verify=args.verify)
    if args.outputs:  # refused outputs are left out (a build must not touch them)
        _print_problem_lines([p.line() for p in st.problems])
        for s in st.outputs:
            print(s.output.path)
        return 1 if st.problems else 0
    failed = bool(st.problems) or (args.require and bool(st.missing))
    if args.json:
        print_report(report(not failed, st.problems, {
            "root": str(root), "repo": str(st.repo) if st.repo else None,
            "outputs": [{"sidecar": str(s.output.sidecar), "path": str(s.output.path),
                         "state": s.state, "detail": s.detail, "remote": s.output.remote,
                         "fix": dvc.fix_command(st, s) if s in st.missing else None}
                        for s in st.outputs],
            "missing": len(st.missing),
            "pull": [dvc.pull_command(r, sc) for r, sc in dvc.pull_groups(st).items()],
        }))
    else:
        _print_problem_lines([p.line() for p in st.problems])
        for line in dvc.describe_missing(st):
            print(f"  {line}")
        n, m = len(st.outputs), len(st.missing)
        if not n:
            print(f"ukdpack: {root}: no DVC outputs")
        elif m:
            print(f"ukdpack: {root}: {m} of {n} DVC outputs not present; fetch them with: "
                  f"ukdpack dvc-pull {root}")
        else:
            print(f"ukdpack: {root}: {n} DVC outputs present"
                  + (" and verified" if args.verify else ""))
    return 1 if failed else 0


def _dvc_timeout(flag: float | None) -> float:
    """``--timeout``, else $UKDPACK_DVC_PULL_TIMEOUT, else the default."""
    from ukdpack.authored import dvc

    if flag is not None:
        return flag
    text = os.environ.get("UKDPACK_DVC_PULL_TIMEOUT", "")
    if not text:
        return dvc.DEFAULT_PULL_TIMEOUT
    try:
        return _positive_seconds(text)
    except argparse.ArgumentTypeError as e:
        raise UsageError(f"$UKDPACK_DVC_PULL_TIMEOUT: {e}") from None


def cmd_dvc_pull(args: argparse.Namespace) -> int:
    from ukdpack.authored import dvc

    root = _need_folder(Path(args.root), "a descriptor root folder")
    st = dvc.status(root)
    if st.problems:
        raise UkdError(st.problems)
    if st.missing and st.repo is None:
        raise UkdError(f"{root}: its DVC sidecars lie in no DVC repository (no .dvc folder "
                       "above them)")
    rc, ran = dvc.pull(root, args.remote, _dvc_timeout(args.timeout))
    for cmd in ran:
        print(f"ukdpack: ran in {st.repo}: {cmd}")
    if not ran:
        print(f"ukdpack: {root}: every DVC output is present; nothing to pull")
    if rc != 0:
        print(f"ukdpack: error: dvc pull failed (exit {rc})", file=sys.stderr)
        _print_problem_lines([f"ukdpack: error: not pulled: {ln}"
                              for ln in dvc.describe_missing(dvc.status(root))])
        return 1
    left = dvc.status(root).missing
    if left:
        _print_problem_lines([f"ukdpack: error: still missing: {ln}"
                              for ln in dvc.describe_missing(dvc.status(root))])
        return 1
    return 0


def cmd_inspect(args: argparse.Namespace) -> int:
    from ukdpack.tools.inspect import inspect, print_json, print_tables

    ins = inspect(Path(args.shard), _one_arch(args.arch))
    if args.json:
        print_json(ins, sys.stdout)
    else:
        _print_problem_lines([p.line() for p in ins.problems])
        print_tables(ins, sys.stdout)
    return 1 if any(p.severity == "error" for p in ins.problems) else 0


def cmd_verify(args: argparse.Namespace) -> int:
    from ukdpack.tools.verify import verify

    result = verify(Path(args.shard),
                    _need_folder(Path(args.source_root), "the descriptor root folder"),
                    args.exclude_folder, _one_arch(args.arch))
    if args.json:
        print_report(report(result.ok, result.problems, {
            "shard": args.shard, "source_root": args.source_root, "arch": result.shard.arch,
            "slots": [sl.as_dict() for sl in result.slots]}))
    else:
        _print_problem_lines([p.line() for p in result.problems])
        for sl in result.slots:
            print(f"ukdpack: {args.shard}: {sl.line()}")
        print(f"ukdpack: {args.shard}: {result.summary()}")
    return 0 if result.ok else 1


def cmd_desk_check(args: argparse.Namespace) -> int:
    from ukdpack.tools.deskcheck import desk_check

    result = desk_check(Path(args.shard), _one_arch(args.arch))
    if args.json:
        print_report(report(result.ok, result.problems,
                            {"shard": args.shard, "arch": result.shard.arch}))
    else:
        _print_problem_lines([p.line() for p in result.problems])
        print(f"ukdpack: {args.shard}: {result.summary()}")
    return 0 if result.ok else 1


def cmd_diff(args: argparse.Namespace) -> int:
    from ukdpack.tools.diff import diff

    result = diff(Path(args.a), Path(args.b))
    if args.json:
        print_report(result.as_report())
    else:
        _print_problem_lines([p.line() for p in result.problems])
        for line in result.lines():
            print(line)
        print(result.summary())
    return 0 if result.ok else 1


def cmd_generate(args: argparse.Namespace) -> int:
    from ukdpack.authored.validate import validate
    from ukdpack.generate import expand as generate

    config = Path(args.config)
    if not os.path.lexists(config) or config.is_dir():  # other kinds: the reader says why
        found = "a folder" if config.is_dir() else "nothing at that path"
        raise UsageError(f"{config}: expected a generate config file (YAML), found {found}")
    out = Path(args.out)
    if os.path.lexists(out) and not out.is_dir():
        raise UsageError(f"--out {out}: expected a folder to write into; it is not one")
    gen = generate.generate(Path(args.config), out, args.max_kernels)
    what = (f"{count(len(gen.files), 'descriptor')} ({count(gen.kernels, 'kernel')} in "
            f"{count(gen.packs, 'pack')}) "
            f"from {args.config}")
    if args.check:
        plan = generate.compare(out, gen)
        _print_problem_lines(
            [p.line() for p in plan.refused]
            + [f"ukdpack: error: {out / rel}: differs from what {gen.config.file} generates"
               for rel in plan.write]
            + [f"ukdpack: error: {out / rel}: {gen.config.file} no longer generates it"
               for rel in plan.stale])
        if plan.refused:
            return 1
        if plan.write or plan.stale:
            print(f"ukdpack: {out}: out of date; run: ukdpack generate {args.config} "
                  f"--out {out}")
            return 1
        print(f"ukdpack: {out}: up to date: {what}")
        return 0
    plan = generate.write(out, gen)
    for rel in plan.stale:
        print(f"ukdpack: removed {out / rel}: {gen.config.file} no longer generates it")
    print(f"ukdpack: {out}: {what}: {len(plan.write)} written, {len(plan.same)} unchanged, "
          f"{len(plan.stale)} removed")
    if args.no_validate:
        return 0
    result = validate(out)
    _print_problem_lines([p.line() for p in result.problems])
    print(f"ukdpack: {out}: {result.summary()}")
    return 0 if result.valid else 1


def cmd_migrate(args: argparse.Namespace) -> int:
    from ukdpack.authored import migrate
    from ukdpack.authored.validate import validate

    root = _need_folder(Path(args.root), "a descriptor root folder")
    out = Path(args.out) if args.out is not None else None
    if args.out == "":  # Path("") is the current folder: never what was meant
        raise UsageError("--out '': expected a folder to write the migrated tree to")
    resume = migrate.check_out(root, out) if out is not None else False
    m = migrate.plan(root, args.exclude_folder)
    problems = m.all_problems() + (migrate.copy_problems(m) if out is not None else [])
    if problems:
        _print_problem_lines([p.line() for p in problems])
        print(f"ukdpack: {quote_name(str(root))}: not migrated; nothing was written")
        return 1
    if resume:
        print(f"ukdpack: {quote_name(str(out))}: finishing the unfinished migrate of "
              f"{quote_name(str(root))}")

    def written(f: migrate.FilePlan) -> None:
        # At once: an interrupted run has said what it rewrote.
        print(f"ukdpack: rewrote {quote_name(f.rel)}: {', '.join(f.changes)}", flush=True)

    target = migrate.write(m, out, written)
    result = validate(target, args.exclude_folder)
    _print_problem_lines([p.line() for p in result.problems])
    print(f"ukdpack: {quote_name(str(target))}: {len(m.changed())} of "
          f"{count(len(m.files), 'descriptor')} rewritten; {result.summary()}")
    return 0 if result.valid else 1


def _remote_config(args: argparse.Namespace) -> RemoteConfig | None:
    """The remote cache tier the flags (else $UKDPACK_REMOTE_CACHE*) ask for; None when no
    URL is given (an empty one, as a build passes an unset variable, included)."""
    url = args.remote_cache if args.remote_cache is not None else \
        os.environ.get("UKDPACK_REMOTE_CACHE", "")
    if not url:
        return None
    from ukdpack.produce import remote  # only here: a pack without the tier never needs it

    remote.check_url(url)
    mode = args.remote_cache_mode or os.environ.get("UKDPACK_REMOTE_CACHE_MODE") or \
        "read-write"
    if mode not in remote.MODES:
        raise UsageError(f"$UKDPACK_REMOTE_CACHE_MODE: expected read or read-write, found "
                         f"{mode!r}")
    return remote.RemoteConfig(url, mode, args.remote_cache_timeout,
                               getattr(args, "remote_cache_max_object", None)
                               or remote.DEFAULT_MAX_OBJECT)


def _remote_exec_config(args: argparse.Namespace) -> RemoteExecConfig | None:
    """Remote execution as the flags (else $UKDPACK_REMOTE_EXEC*) ask for it; None without
    a URL (an empty one included)."""
    url = args.remote_exec if args.remote_exec is not None else \
        os.environ.get("UKDPACK_REMOTE_EXEC", "")
    if not url:
        return None
    from ukdpack.produce import remote_exec
    from ukdpack.remote.url import exec_headers, parse_url

    parse_url(url)  # a usage error now (the URL shown redacted), not after the tree loads
    exec_headers()  # likewise ($UKDPACK_REMOTE_EXEC_HEADERS, no value shown)
    mode = args.remote_exec_mode or os.environ.get("UKDPACK_REMOTE_EXEC_MODE") or "auto"
    if mode not in remote_exec.MODES:
        raise UsageError(f"$UKDPACK_REMOTE_EXEC_MODE: expected auto or require, found "
                         f"{mode!r}")
    properties: dict[str, str] = {}
    for text in args.remote_exec_property:
        key, eq, value = text.partition("=")
        if not eq or not key or has_controls(text):
            raise UsageError(f"--remote-exec-property {text!r}: expected KEY=VALUE (a "
                             "platform property the farm's workers offer, e.g. OSFamily=linux)")
        if key == remote_exec.TOOLCHAIN_PROPERTY:
            raise UsageError(f"--remote-exec-property {key}: this property is the compiler's "
                             "fingerprint, which ukdpack sets itself")
        properties[key] = value
    return remote_exec.RemoteExecConfig(url, args.remote_exec_jobs,
                                        tuple(sorted(properties.items())), mode)


def _cmd_remote_cache(args: argparse.Namespace, config: RemoteConfig) -> int:
    """``ukdpack cache stats|verify --remote-cache URL``: the server's records."""
    from ukdpack.produce import remote

    where = remote.redact_url(config.url)
    try:
        store = remote.open_store(config.url, config.timeout)
    except remote.RemoteFault as e:
        raise UkdError(f"remote compile cache {where}: {e}") from None
    try:
        if args.cache_command == "stats":
            st = remote.server_stats(store)
            if args.json:
                print_report(report(True, [], {
                    "remote_cache": where, "entries": st.entries, "keys": st.keys,
                    "broken": st.broken, "objects": st.objects,
                    "object_bytes": st.object_bytes, "compile_seconds": st.compile_seconds}))
                return 0
            print(f"remote compile cache {where}\n"
                  f"  entries  {st.entries} under {st.keys} action keys ({st.broken} failing "
                  f"their digest or key)\n"
                  f"  objects  {st.objects}, {st.object_bytes:,} bytes\n"
                  f"  compiles {st.compile_seconds:.1f} s recorded")
            return 0
        verdicts = remote.server_verify(store)
    except remote.RemoteFault as e:
        raise UkdError(f"remote compile cache {where}: {e}") from None
    finally:
        store.close()
    for v in verdicts:
        if v.state == "damaged":
            print(f"ukdpack: error: remote compile cache {where}: {v.line}", file=sys.stderr)
        elif v.state == "missing":
            print(f"ukdpack: note: remote compile cache {where}: {v.line} (evicted? a pack "
                  "compiles it)", file=sys.stderr)
    damaged = sum(v.state == "damaged" for v in verdicts)
    missing = sum(v.state == "missing" for v in verdicts)
    print(f"ukdpack: remote compile cache {where}: {count(len(verdicts), 'record')} checked: "
          f"{len(verdicts) - damaged - missing} sound, {damaged} damaged, {missing} missing")
    return 1 if damaged else 0


def cmd_cache(args: argparse.Namespace) -> int:
    from ukdpack.produce.cache import CompileCache, default_cache_dir, stats, verify

    config = _remote_config(args) if args.remote_cache is not None else None
    if config is not None:
        return _cmd_remote_cache(args, config)
    folder = Path(args.cache_dir) if args.cache_dir else default_cache_dir()
    if not folder.is_dir():
        raise UsageError(f"{folder}: no compile cache there (--cache-dir, else "
                         "$UKDPACK_CACHE_DIR, $XDG_CACHE_HOME/ukdpack, ~/.cache/ukdpack)")
    cache = CompileCache(folder)
    if args.cache_command == "stats":
        from ukdpack.produce import cache_admin
        from ukdpack.reports import report as json_report  # `report` is a local below

        st = stats(cache)
        lim = cache_admin.limit(folder)
        if args.json:
            def iso(t: float | None) -> str | None:
                return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t)) if t else None

            print_report(json_report(True, [], {
                "cache": str(folder), "entries": st.entries, "unrerunnable": st.unrerunnable,
                "manifests": st.manifests, "broken_manifests": st.broken_manifests,
                "objects": st.objects, "object_bytes": st.object_bytes, "files": st.files,
                "bytes": st.bytes, "oldest_use": iso(st.oldest), "newest_use": iso(st.newest),
                "max_size": lim.max_size, "max_size_origin": lim.origin}))
            return 0

        def when(t: float | None) -> str:
            return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) if t else "-"

        limit_line = "none" if lim.max_size is None else \
            f"{cache_admin.human(lim.max_size)} ({lim.origin})"
        print(f"compile cache {folder}\n"
              f"  entries  {st.entries} in {st.manifests} manifests ({st.unrerunnable} without "
              f"a rerun record, {st.broken_manifests} manifests failing their digest)\n"
              f"  objects  {st.objects}, {st.object_bytes:,} bytes\n"
              f"  total    {st.bytes:,} bytes in {st.files} files\n"
              f"  oldest   {when(st.oldest)}\n"
              f"  newest   {when(st.newest)}\n"
              f"  limit    {limit_line}")
        return 0
    from ukdpack.shard.pack import default_jobs

    report = verify(cache, args.sample, args.jobs or default_jobs(),
                    {"hip": args.hipcc, "cuda": args.nvcc})
    for v in report.verdicts:
        if v.state == "differs":
            print(f"ukdpack: error: compile cache {folder}: {v.line}", file=sys.stderr)
        elif v.state == "skipped":
            print(f"ukdpack: note: {v.line}", file=sys.stderr)
    if report.unrerunnable:
        lack = "entry lacks" if report.unrerunnable == 1 else "entries lack"
        print(f"ukdpack: note: compile cache {folder}: {report.unrerunnable} {lack} a "
              "rerun record (an earlier ukdpack made them); skipped: packs record it from "
              "now on", file=sys.stderr)
    if report.broken_manifests:
        print(f"ukdpack: note: compile cache {folder}: {report.broken_manifests} manifests "
              "fail their digest; packs ignore them", file=sys.stderr)
    of = f" of {report.candidates}" if len(report.verdicts) < report.candidates else ""
    print(f"ukdpack: compile cache {folder}: {len(report.verdicts)}{of} "
          f"{'entry' if (report.candidates if of else len(report.verdicts)) == 1 else 'entries'}: "
          f"{report.count('same')} same when compiled again, {report.count('differs')} "
          f"differ, {report.count('skipped')} skipped")
    return 0 if report.ok else 1


def cmd_cache_admin(args: argparse.Namespace) -> int:
    """``ukdpack cache config|prune|clear``: the local cache's limit and removals, each
    under the exclusive lock, so no running pack loses an entry (cache_admin)."""
    from ukdpack.produce import cache_admin
    from ukdpack.produce.cache import CompileCache, default_cache_dir

    folder = Path(args.cache_dir) if args.cache_dir else default_cache_dir()
    setting = args.cache_command == "config" and args.max_size is not None
    if setting and not folder.exists():
        folder.mkdir(parents=True)  # setting a limit first is how a cache may start
    if not folder.is_dir():
        raise UsageError(f"{folder}: no compile cache there (--cache-dir, else "
                         "$UKDPACK_CACHE_DIR, $XDG_CACHE_HOME/ukdpack, ~/.cache/ukdpack)")
    cache = CompileCache(folder)
    name = f"compile cache {folder}"
    older_than = 0.0
    try:
        if args.cache_command == "prune":
            older_than = cache_admin.parse_duration(args.older_than)
        max_size = cache_admin.parse_size(args.max_size) if setting else None
    except ValueError as e:
        raise UsageError(f"--{'older-than' if args.cache_command == 'prune' else 'max-size'}: "
                         f"{e}") from None

    def say(line: str) -> None:
        print(f"ukdpack: {line}", file=sys.stderr, flush=True)

    if args.cache_command == "config" and not setting:
        lim = cache_admin.limit(folder)
        size = "none" if lim.max_size is None else cache_admin.human(lim.max_size)
        print(f"{name}: max_size {size} ({lim.origin})")
        return 0
    if setting:
        path = cache_admin.write_max_size(folder, max_size)
        size = "none" if max_size is None else cache_admin.human(max_size)
        print(f"ukdpack: {name}: max_size {size}, written to {path}")
        if os.environ.get(cache_admin.MAX_SIZE_ENV, "").strip():
            say(f"note: ${cache_admin.MAX_SIZE_ENV} is set: it overrides the file")
        if cache_admin.limit(folder).max_size is None:
            return 0
    with cache_admin.exclusive_lock(folder, args.wait, say) as held:
        if not held:
            raise UkdError(f"{name}: packs still use it after {args.wait:g} s; nothing "
                           "removed (--wait S waits longer)")
        if args.cache_command == "clear":
            gone = cache_admin.clear(cache)
            what = "cleared"
        elif args.cache_command == "prune":
            gone = cache_admin.prune(cache, older_than)
            what = f"pruned (not used for {args.older_than})"
        else:
            gone = cache_admin.evict(cache, cache_admin.limit(folder).max_size or 0)
            what = "evicted (least recently used first)"
    print(f"ukdpack: {name}: {what}: {count(gone.objects, 'object')}, "
          f"{cache_admin.human(gone.bytes)} removed; it holds {cache_admin.human(gone.left_bytes)}")
    return 0


#: What shell completion offers for a value, by argument name: folders, or files.
_FOLDER_ARGS = frozenset({"root", "source_root", "out_root", "cache_dir", "shard", "a", "b",
                          "out"})
_FILE_ARGS = frozenset({"handlers", "depfile", "config", "hipcc", "nvcc"})


def cmd_completion(args: argparse.Namespace) -> int:
    """``ukdpack completion bash|zsh``: a completion script made by shtab from this very
    parser, so every subcommand and flag is there and none is written twice."""
    import shtab

    parser = build_parser()
    parsers = [parser]
    while parsers:
        for action in parsers.pop()._actions:
            if isinstance(action, argparse._SubParsersAction):
                parsers.extend(action.choices.values())
            elif action.dest in _FOLDER_ARGS:
                action.complete = shtab.DIRECTORY  # type: ignore[attr-defined]
            elif action.dest in _FILE_ARGS:
                action.complete = shtab.FILE  # type: ignore[attr-defined]
    print(shtab.complete(parser, shell=args.shell), end="")
    return 0


def _positive_count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, found '{text}'") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive number, found '{text}'")
    return value


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, found '{text}'") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, found '{text}'")
    return value


def _remote_flags(p: argparse.ArgumentParser, what: str = "") -> None:
    p.add_argument("--remote-cache", metavar="URL",
                   help=what or "a shared compile cache behind the local one: http(s)://... "
                   "or redis://host:port/db (else $UKDPACK_REMOTE_CACHE; docs/remote-cache.md)")
    p.add_argument("--remote-cache-timeout", type=_positive_seconds, default=3.0, metavar="S",
                   help="seconds one request to the remote cache may take (default 3)")


class _Parser(argparse.ArgumentParser):
    """argparse with a "did you mean" for a mistyped command, its usage errors redacted
    (a mistyped flag before a URL with a password would print the URL). Every
    subcommand's parser is of this class too: argparse makes them of their parent's."""

    def error(self, message: str) -> NoReturn:
        bad = re.match(r"argument (?:COMMAND|ACTION): invalid choice: '([^']*)'", message)
        if bad:
            choices = [c for a in self._actions if isinstance(a, argparse._SubParsersAction)
                       for c in a.choices]
            import difflib  # only to word a usage error

            near = difflib.get_close_matches(bad.group(1), choices, n=1, cutoff=0.6)
            if near:
                message = f"unknown command '{bad.group(1)}'; did you mean '{near[0]}'?"
        super().error(redact(message))


class _CmakeDir(argparse.Action):
    """``--cmakedir``: print the CMake package folder and exit (``python -m ukdpack``
    answers it before loading this module; the console script gets here)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        from ukdpack.cmake_package import print_cmake_dir

        parser.exit(print_cmake_dir())


def _owner(parser: argparse.ArgumentParser, args: argparse.Namespace
           ) -> argparse.ArgumentParser:
    """The innermost (sub)command parser that ``args`` went through."""
    while True:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        name = getattr(args, subs[0].dest, None) if subs else None
        if name is None or name not in subs[0].choices:
            return parser
        parser = subs[0].choices[name]


def _add_validate(sub: _Subparsers) -> None:
    p = sub.add_parser("validate", help="check every authored-tree rule, without compiling")
    p.add_argument("root", help="descriptor root folder")
    p.add_argument("--exclude-folder", action="append", default=[], metavar="NAME",
                   help="leave out folders with this name (repeatable)")
    p.add_argument("--json", action="store_true", help="print the verdict as JSON")
    p.set_defaults(handler=cmd_validate)


def _add_pack(sub: _Subparsers) -> None:
    p = sub.add_parser("pack", help="pack one shard per arch from an authored tree")
    p.add_argument("--source-root", required=True, metavar="R", help="authored descriptor root")
    p.add_argument("--out-root", required=True, metavar="O", help="where OUT/<arch>/ shards go")
    p.add_argument("--arch", action="append", required=True, metavar="A",
                   help="target arch (repeatable, or a comma list: gfx90a,gfx1030; feature "
                   "suffixes are stripped); one ukdpack's target table or the compiler knows")
    p.add_argument("--allow-unknown-arch", action="store_true",
                   help="pack for an arch of the right shape that neither ukdpack's target "
                   "table nor the compiler knows (a typo is then found only by the compiler)")
    p.add_argument("--group", default="kernels", metavar="G",
                   help="archive group name: kpack/<group>_<arch>.kpack (default: kernels)")
    p.add_argument("--jobs", type=int, default=0, metavar="N",
                   help="parallel compiles (default: the CPUs this process may use)")
    p.add_argument("--hipcc", metavar="PATH", help="HIP compiler (else $UKDPACK_HIPCC, PATH)")
    p.add_argument("--nvcc", metavar="PATH", help="CUDA compiler (else $UKDPACK_NVCC, PATH)")
    p.add_argument("--handlers", metavar="F",
                   help="handler manifest {dispatch_symbol: [launch names]} for the runtime check")
    p.add_argument("--cache-dir", metavar="D", help="compile cache (default: ~/.cache/ukdpack)")
    p.add_argument("--depfile", metavar="F", help="write a Makefile-style depfile of every file read")
    p.add_argument("--depfile-target", metavar="T",
                   help="the target named in the depfile (default: the out root)")
    p.add_argument("--exclude-folder", action="append", default=[], metavar="X",
                   help="leave out folders with this name (repeatable)")
    p.add_argument("--label", metavar="L", help="prefix progress lines with this label")
    p.add_argument("--required", action="store_true",
                   help="a root with no kernels for any arch is an error, not dormant")
    p.add_argument("--plain", action="store_true", help="plain lines even on a terminal")
    p.add_argument("--lock-timeout", type=float, default=600.0, metavar="S",
                   help="seconds to wait for another pack of the same shard (default 600)")
    p.add_argument("--job-timeout", type=_positive_seconds, default=DEFAULT_JOB_TIMEOUT,
                   metavar="S", help="seconds one compile or builder call may take before "
                   f"its arch fails (default {DEFAULT_JOB_TIMEOUT:g})")
    p.add_argument("--json", action="store_true",
                   help="print a report per arch as JSON on stdout (progress stays on stderr)")
    _remote_flags(p)
    p.add_argument("--remote-cache-mode", choices=("read", "read-write"),
                   help="read: fetch only (presubmit jobs); read-write: upload what is "
                   "compiled too (default; else $UKDPACK_REMOTE_CACHE_MODE)")
    p.add_argument("--remote-cache-max-object", type=_positive_count, metavar="BYTES",
                   help="objects larger than this are not uploaded (default 64 MiB)")
    p.add_argument("--remote-exec", metavar="URL",
                   help="run compiles on a build farm through the Remote Execution API: "
                   "grpc[s]://HOST:PORT[/INSTANCE] (else $UKDPACK_REMOTE_EXEC; docs/packing.md)")
    p.add_argument("--remote-exec-jobs", type=_positive_count, default=64, metavar="N",
                   help="actions in flight on the farm (default 64)")
    p.add_argument("--remote-exec-property", action="append", default=[], metavar="K=V",
                   help="a platform property the farm's workers must offer (repeatable)")
    p.add_argument("--remote-exec-mode", choices=("auto", "require"),
                   help="auto: a farm that is down or failing costs one warning and the "
                   "compiles run here (default); require: the pack fails instead (else "
                   "$UKDPACK_REMOTE_EXEC_MODE)")
    p.set_defaults(handler=cmd_pack)


def _add_dvc_status(sub: _Subparsers) -> None:
    p = sub.add_parser("dvc-status", help="which DVC outputs under a root are present")
    p.add_argument("root", help="descriptor root folder")
    p.add_argument("--json", action="store_true", help="print the status as JSON")
    p.add_argument("--verify", action="store_true",
                   help="also compare content hashes as DVC computes them")
    p.add_argument("--require", action="store_true", help="exit 1 when any output is missing")
    p.add_argument("--outputs", action="store_true", help="print every output path, one a line")
    p.set_defaults(handler=cmd_dvc_status)


def _add_dvc_pull(sub: _Subparsers) -> None:
    p = sub.add_parser("dvc-pull", help="fetch the missing DVC outputs under a root with DVC")
    p.add_argument("root", help="descriptor root folder")
    p.add_argument("--remote", metavar="NAME", help="remote for outputs that name none")
    p.add_argument("--timeout", type=_positive_seconds, metavar="S",
                   help="seconds each dvc pull may take before it is stopped (default 3600; "
                   "else $UKDPACK_DVC_PULL_TIMEOUT)")
    p.set_defaults(handler=cmd_dvc_pull)


def _add_inspect(sub: _Subparsers) -> None:
    p = sub.add_parser("inspect", help="what a packed shard holds: engines, packs, kernels, "
                                       "launches, toc keys, code objects")
    p.add_argument("shard", help="a shard folder (OUT_ROOT/<arch>/)")
    p.add_argument("--arch", action="append", metavar="A",
                   help="the shard's arch (default: its folder's name)")
    p.add_argument("--json", action="store_true", help="print the shard as JSON")
    p.set_defaults(handler=cmd_inspect)


def _add_verify(sub: _Subparsers) -> None:
    p = sub.add_parser("verify", help="check a shard against what its source root says it "
                                      "must hold, without compiling")
    p.add_argument("shard", help="a shard folder (OUT_ROOT/<arch>/)")
    p.add_argument("--source-root", required=True, metavar="R",
                   help="the authored root the shard was packed from")
    p.add_argument("--exclude-folder", action="append", default=[], metavar="X",
                   help="folders the pack left out (repeatable)")
    p.add_argument("--arch", action="append", metavar="A",
                   help="the shard's arch (default: its folder's name)")
    p.add_argument("--json", action="store_true", help="print the verdict as JSON")
    p.set_defaults(handler=cmd_verify)


def _add_desk_check(sub: _Subparsers) -> None:
    p = sub.add_parser("desk-check", help="the whole-set rules over a packed shard")
    p.add_argument("shard", help="a shard folder (OUT_ROOT/<arch>/)")
    p.add_argument("--arch", action="append", metavar="A",
                   help="the shard's arch (default: its folder's name)")
    p.add_argument("--json", action="store_true", help="print the verdict as JSON")
    p.set_defaults(handler=cmd_desk_check)


def _add_diff(sub: _Subparsers) -> None:
    p = sub.add_parser("diff", help="kernels and launches added, removed and changed between "
                                    "two shards")
    p.add_argument("a", metavar="SHARD_A", help="the old shard")
    p.add_argument("b", metavar="SHARD_B", help="the new shard")
    p.add_argument("--json", action="store_true", help="print the differences as JSON")
    p.set_defaults(handler=cmd_diff)


def _add_generate(sub: _Subparsers) -> None:
    p = sub.add_parser("generate", help="expand a YAML engine description into descriptors")
    p.add_argument("config", metavar="CONFIG.yaml", help="the generate config (docs/generate.md)")
    p.add_argument("--out", required=True, metavar="R", help="folder the descriptors go to")
    p.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 when R differs from what the config generates")
    p.add_argument("--no-validate", action="store_true",
                   help="do not validate R afterwards (when R is part of a larger root)")
    # The default is genconfig.DEFAULT_MAX_KERNELS (not imported here: the parser stays light).
    p.add_argument("--max-kernels", type=_positive_count, default=100_000, metavar="N",
                   help="refuse a config that makes more kernels than this (default 100000)")
    p.set_defaults(handler=cmd_generate)


def _add_migrate(sub: _Subparsers) -> None:
    p = sub.add_parser("migrate", help="rewrite a legacy descriptor tree into today's form "
                                       "(docs/migrate.md)")
    p.add_argument("root", help="the legacy descriptor root")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--out", metavar="NEW", help="write the migrated tree here (new or empty)")
    where.add_argument("--in-place", action="store_true",
                       help="rewrite the files that change in ROOT itself")
    p.add_argument("--exclude-folder", action="append", default=[], metavar="X",
                   help="leave folders named X alone (as validate and pack do); --out "
                        "still copies them (repeatable)")
    p.set_defaults(handler=cmd_migrate)


def _add_cache(sub: _Subparsers) -> None:
    p = sub.add_parser("cache", help="the compile cache: stats, verify, config (size "
                                     "limit), prune, clear")
    cache_sub = p.add_subparsers(dest="cache_command", metavar="ACTION")
    cache_sub.required = True
    stats_p = cache_sub.add_parser("stats", help="entries, bytes, oldest and newest object")
    verify_p = cache_sub.add_parser("verify", help="compile cached entries again and compare "
                                                   "the bytes (exit 1 when one differs)")
    for c in (stats_p, verify_p):
        c.add_argument("--cache-dir", metavar="D",
                       help="the cache (default: as pack: $UKDPACK_CACHE_DIR, ...)")
        _remote_flags(c, "look at this remote cache instead of the local folder")
        c.set_defaults(handler=cmd_cache, remote_cache_mode="read")
    stats_p.add_argument("--json", action="store_true", help="print the counts as JSON")
    config_p = cache_sub.add_parser("config", help="show or set the size limit (max_size in "
                                                   "the cache folder's cache.conf)")
    config_p.add_argument("--max-size", metavar="SIZE",
                          help="keep the cache within SIZE (5G, 500M, 2GiB; 0: no limit), "
                          "evicting least recently used entries after each pack; "
                          "$UKDPACK_CACHE_MAX_SIZE overrides it")
    prune_p = cache_sub.add_parser("prune", help="remove entries no pack used for a while")
    prune_p.add_argument("--older-than", required=True, metavar="AGE",
                         help="remove entries unused for AGE: 30d, 12h, 90m, 3600s, 2w")
    clear_p = cache_sub.add_parser("clear", help="remove every entry (cache.conf stays)")
    for c in (config_p, prune_p, clear_p):
        c.add_argument("--cache-dir", metavar="D",
                       help="the cache (default: as pack: $UKDPACK_CACHE_DIR, ...)")
        c.add_argument("--wait", type=float, default=600.0, metavar="S",
                       help="seconds to wait for running packs to finish with the cache "
                       "(default 600)")
        c.set_defaults(handler=cmd_cache_admin)
    verify_p.add_argument("--sample", type=_positive_count, metavar="N",
                          help="compile N entries picked at random (default: every entry)")
    verify_p.add_argument("--jobs", type=int, default=0, metavar="N",
                          help="parallel compiles (default: the CPUs this process may use)")
    verify_p.add_argument("--hipcc", metavar="PATH", help="HIP compiler to try first")
    verify_p.add_argument("--nvcc", metavar="PATH", help="CUDA compiler to try first")


def _add_completion(sub: _Subparsers) -> None:
    p = sub.add_parser("completion", help="print a shell completion script (bash, zsh): "
                                          "docs/cli.md, \"Shell completion\"")
    p.add_argument("shell", choices=("bash", "zsh"), help="the shell it is for")
    p.set_defaults(handler=cmd_completion)


def _add_init(sub: _Subparsers) -> None:
    from ukdpack.init.command import add_parser

    add_parser(sub)


def _add_doctor(sub: _Subparsers) -> None:
    from ukdpack.doctor.command import add_parser

    add_parser(sub)


def _add_resident(sub: _Subparsers) -> None:
    from ukdpack.resident.command import add_parser

    add_parser(sub)


#: Each command's subparser, made by build_parser (all of them, or the one a command
#: line names), in the order ``ukdpack --help`` lists them.
_COMMANDS: dict[str, Callable[[_Subparsers], None]] = {
    "validate": _add_validate,
    "pack": _add_pack,
    "dvc-status": _add_dvc_status,
    "dvc-pull": _add_dvc_pull,
    "inspect": _add_inspect,
    "verify": _add_verify,
    "desk-check": _add_desk_check,
    "diff": _add_diff,
    "generate": _add_generate,
    "migrate": _add_migrate,
    "cache": _add_cache,
    "completion": _add_completion,
    "init": _add_init,
    "doctor": _add_doctor,
    "resident": _add_resident,
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser: every command's subparser, or with ``command`` (one of
    ``_COMMANDS``) that command's alone. argparse's ~150 options cost about 10 ms to make,
    paid by every command before it starts; a command line needs the one it names."""
    parser = _Parser(
        prog="ukdpack",
        description="Validate, pack and inspect GPU kernel descriptor trees.")
    parser.add_argument("--version", action="version", version=f"ukdpack {__version__}")
    parser.add_argument("--cmakedir", action=_CmakeDir,
                        help="print the folder of ukdpack's CMake package (for "
                        "-Dukdpack_DIR=...) and exit")
    # Subcommand parsers are _Parsers too (argparse makes them of the parent's class);
    # typed as plain parsers for the commands' add_parser hooks.
    sub = cast("argparse._SubParsersAction[argparse.ArgumentParser]",
               parser.add_subparsers(dest="command", metavar="COMMAND"))
    sub.required = True
    for name, add in _COMMANDS.items():
        if command is None or name == command:
            add(sub)
    return parser


#: The signals that end a command as Ctrl-C does (compiles killed, staging removed):
#: a CI cancel sends SIGTERM, a closed terminal SIGHUP. Exit status 128 + the signal.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class _Stopped(KeyboardInterrupt):
    """The command was stopped by ``signum``: a KeyboardInterrupt, so every path that
    cleans up after Ctrl-C cleans up after SIGTERM and SIGHUP alike."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _interrupt(signum: int, frame: FrameType | None) -> None:
    """The first stop signal ends the command; later ones (of any kind) are ignored, so
    they cannot cut short what the first set going (compiles killed, staging removed)
    nor print a second traceback from wherever they land."""
    for s in STOP_SIGNALS:
        signal.signal(s, signal.SIG_IGN)
    raise _Stopped(signum)


def _stdout_gone() -> bool:
    """Whether the reader of standard output has closed it (a pipe whose read end is
    gone polls as an error), as opposed to some other pipe of ours breaking."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), 0)
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except (OSError, ValueError):
        return False


def _reader_gone() -> int:
    """The reader of our output stopped reading (``ukdpack inspect ... | head``): end
    quietly with status 141, as a tool stopped by SIGPIPE does. Output still buffered
    goes to the null device, so the exit does not fail on it again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
    return 141


def _end_interrupted(signum: int = signal.SIGINT) -> int:
    """Exit status 128 + ``signum`` (130 after Ctrl-C, 143 after SIGTERM, 129 after
    SIGHUP). The pack has stopped its jobs; should a worker thread still run a second on
    (stuck where nothing can stop it), the process ends here rather than wait for it at
    exit, which nothing could then interrupt."""
    code = 128 + signum
    word = "interrupted" if signum == signal.SIGINT else f"stopped by {signal.Signals(signum).name}"
    print(f"ukdpack: {word}", file=sys.stderr)
    from ukdpack.shard.publish import end_io_pool

    end_io_pool()  # its idle threads would hold the wait below for its whole second
    deadline = time.monotonic() + 1.0
    for t in threading.enumerate():
        if t is not threading.current_thread() and not t.daemon:
            t.join(max(0.0, deadline - time.monotonic()))
            if t.is_alive():
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
    return code


#: The parser, made once by the resident server (``ukdpack.resident.server``) before it
#: forks its workers, so that no pack it serves makes it again; None elsewhere. Its
#: defaults are constants: nothing in it depends on the process that made it.
made_parser: argparse.ArgumentParser | None = None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``ukdpack`` console script and ``python -m ukdpack``.

    While it runs, SIGINT, SIGTERM and SIGHUP are handled by ``_interrupt``; after one of
    them they stay ignored (the process is ending), otherwise the previous handlers are
    put back."""
    given = sys.argv[1:] if argv is None else list(argv)
    # A command line naming a command first needs that command's subparser alone; any
    # other (help, a misspelt command) gets them all, to list them.
    parser = made_parser or build_parser(given[0] if given and given[0] in _COMMANDS else None)
    args, extra = parser.parse_known_args(given)
    if extra:  # said by the command they were given to, with that command's usage
        _owner(parser, args).error(f"unrecognized arguments: {' '.join(extra)}")
    handler: Handler = args.handler
    own_signals = threading.current_thread() is threading.main_thread()
    # A signal ignored on entry stays ignored: `nohup ukdpack pack` must outlive its
    # terminal, and a background job of a script ignores Ctrl-C.
    previous = {s: signal.signal(s, _interrupt) for s in STOP_SIGNALS
                if own_signals and signal.getsignal(s) is not signal.SIG_IGN}
    interrupted = False
    try:
        code = handler(args)
        sys.stdout.flush()  # a reader that went away shows here, not at the exit
        return code
    except UkdError as e:
        _print_problem_lines([p.line() for p in e.problems])
        if getattr(args, "json", False):  # a report on stdout whatever happened
            try:
                print_report(report(False, e.problems))
                sys.stdout.flush()
            except BrokenPipeError:
                return _reader_gone()
        return 2 if isinstance(e, UsageError) else 1
    except KeyboardInterrupt as e:
        interrupted = True
        return _end_interrupted(e.signum if isinstance(e, _Stopped) else signal.SIGINT)
    except Exception as e:  # an internal failure, never bad input: say so in one line
        if isinstance(e, BrokenPipeError) and _stdout_gone():
            return _reader_gone()
        if os.environ.get("UKDPACK_DEBUG"):
            raise
        print(escape_controls(redact(f"ukdpack: internal error: {type(e).__name__}: {e} (set "
                                     "UKDPACK_DEBUG=1 for a traceback, and please report it)")),
              file=sys.stderr)
        return 2
    finally:
        if not interrupted:
            for s, handler_before in previous.items():
                if handler_before is not None:
                    signal.signal(s, handler_before)
