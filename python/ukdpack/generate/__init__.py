"""The generator: a YAML engine description expanded into an authored descriptor tree."""
