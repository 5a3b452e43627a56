"""Producing code objects: the plan of each arch, toc keys, compilers, the compile cache, code objects and DVC."""
