"""``ukdpack doctor``: what this machine has for packing, and how to get what it lacks.

``checks`` probes each thing (the extension's build, hipcc, a clang with the AMDGPU
target, nvcc, DVC and the remotes of a root, the compile cache); ``command`` prints
them one line each, or as a JSON report, and decides the exit status.
"""
