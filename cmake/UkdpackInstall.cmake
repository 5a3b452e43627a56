# Install rules for a plain (non-pip) install: library, headers, package config.
include_guard(GLOBAL)
