"""Code the benches run in their child processes, as text: a child may run another
version's Python environment (a side-by-side run), without this folder on its path."""

from __future__ import annotations


def timer_code(clock: str, into: str) -> str:
    """The text of ``wrap(owner, attr, label)``, which replaces ``owner.attr`` with a
    version that adds the seconds of ``time.<clock>()`` each call takes to
    ``<into>[label]`` (an attribute a version lacks is left alone). The child's text must
    have imported ``functools`` and ``time`` and made the dict ``<into>``."""
    return f"""
def wrap(owner, attr, label):
    fn = getattr(owner, attr, None)
    if fn is None:  # a version without it (an older packer, compared side by side)
        return
    @functools.wraps(fn)
    def timed(*args, **kwargs):
        t = time.{clock}()
        try:
            return fn(*args, **kwargs)
        finally:
            {into}[label] = {into}.get(label, 0.0) + time.{clock}() - t
    setattr(owner, attr, timed)
"""
