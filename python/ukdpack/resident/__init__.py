"""The resident packer: a server that holds ukdpack's modules imported and forks a
worker per ``ukdpack pack``, so a repack starts without the interpreter's start-up and
imports (opt in with ``UKDPACK_RESIDENT=1``; docs/packing.md, "The resident packer").

``place`` names the server of one interpreter and installation, ``wire`` frames the
messages, ``client`` is what ``python -m ukdpack`` runs first, ``server`` the server
and its workers. The client's modules import nothing heavier than the standard
library's sockets: they run before the command line is loaded.
"""
