"""``ukdpack completion bash|zsh`` (docs/cli.md, "Shell completion"): each script loads
in a real shell and completes a subcommand, a flag and a choice."""

from __future__ import annotations

import os
import pty
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

from ukdpack.cli import build_parser


def _script(shell: str) -> str:
    r = subprocess.run([sys.executable, "-m", "ukdpack", "completion", shell],
                       capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    return r.stdout


def _bash_complete(script: Path, *words: str) -> list[str]:
    """What bash's completion function for ``ukdpack`` offers for the command line
    ``ukdpack WORDS`` (the last word being completed), as bash calls it on Tab."""
    line = " ".join(("ukdpack", *words))
    words_array = " ".join(f"'{w}'" for w in ("ukdpack", *words))
    program = (f"source '{script}'\n"
               "spec=$(complete -p ukdpack) || exit 3\n"
               'fn=${spec#*-F }; fn=${fn%% *}\n'
               f"COMP_WORDS=({words_array}); COMP_CWORD={len(words)}\n"
               f"COMP_LINE='{line}'; COMP_POINT=${{#COMP_LINE}}\n"
               '"$fn" ukdpack "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"\n'
               'printf "%s\\n" "${COMPREPLY[@]}"\n')
    r = subprocess.run(["bash", "--norc", "--noprofile", "-c", program], capture_output=True,
                       text=True, check=False)
    assert r.returncode == 0, r.stderr
    return [w.strip() for w in r.stdout.splitlines() if w.strip()]


def test_bash_completes_subcommands_flags_and_choices(tmp_path: Path) -> None:
    script = tmp_path / "ukdpack.bash"
    script.write_text(_script("bash"))
    assert _bash_complete(script, "pa") == ["pack"]
    assert set(_bash_complete(script, "")) >= {"validate", "pack", "cache", "completion",
                                               "doctor", "init"}
    assert _bash_complete(script, "pack", "--source-r") == ["--source-root"]
    assert set(_bash_complete(script, "cache", "")) == {"stats", "verify", "config", "prune",
                                                        "clear"}
    assert _bash_complete(script, "cache", "stats", "--js") == ["--json"]
    assert _bash_complete(script, "completion", "z") == ["zsh"]


def _zsh_tab(script_dir: Path, typed: str) -> str:
    """Type ``typed`` then Tab into an interactive zsh whose fpath holds ``_ukdpack``;
    the line as zsh's editor redraws it."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: a zsh reading no startup file but the one we give it
        os.environ.update(ZDOTDIR=str(script_dir), TERM="dumb", PS1="> ")
        os.execvp("zsh", ["zsh", "-i"])
    out = b""

    def read_for(seconds: float) -> bytes:
        got = b""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            ready, _, _ = select.select([fd], [], [], 0.05)
            if ready:
                try:
                    got += os.read(fd, 65536)
                except OSError:
                    break
        return got

    try:
        out += read_for(1.5)
        os.write(fd, typed.encode() + b"\t")
        out = read_for(1.5)
        os.write(fd, b"\x03")  # Ctrl-C: drop the line
        os.write(fd, b"exit\n")
        read_for(0.5)
    finally:
        os.close(fd)
        os.waitpid(pid, 0)
    return out.decode(errors="replace")


def test_zsh_completes_a_subcommand_and_a_flag(tmp_path: Path) -> None:
    assert shutil.which("zsh"), "zsh is missing: scripts/setup.sh installs it"
    functions = tmp_path / "functions"
    functions.mkdir()
    (functions / "_ukdpack").write_text(_script("zsh"))
    # A command named ukdpack on PATH (zsh completes only commands it knows).
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "ukdpack").symlink_to(Path(sys.executable).parent / "ukdpack")
    (tmp_path / ".zshrc").write_text(
        f"fpath=({functions} $fpath)\nPATH={bindir}:$PATH\n"
        "autoload -U compinit && compinit -u\nunsetopt beep\n")
    screen = _zsh_tab(tmp_path, "ukdpack pa")
    assert "ukdpack pack " in screen, screen
    screen = _zsh_tab(tmp_path, "ukdpack pack --source-r")
    assert "--source-root" in screen, screen


def test_the_scripts_name_every_subcommand_of_the_parser() -> None:
    """Made from the parser itself: a new subcommand needs no edit here."""
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    names = list(getattr(sub, "choices", {}))
    assert {"pack", "cache", "completion"} <= set(names)
    for shell in ("bash", "zsh"):
        text = _script(shell)
        assert all(n in text for n in names), shell
