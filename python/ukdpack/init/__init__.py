"""``ukdpack init DIR``: a small authored tree that validates and packs as written.

The tree is package data (``template/``): one engine (UED, KMD, a matcher), a pack of
one single-launch HIP kernel, a pack of one two-launch HIP kernel whose launches share
a translation unit, the two dispatches, and the handler manifest ``handlers.json``.
``scaffold`` fills in the engine name, the symbols made from it and fresh ids.
"""

#: The engine name ``ukdpack init`` uses without ``--name``.
DEFAULT_NAME = "mylib:kernels"
