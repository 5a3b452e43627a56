"""The authored tree: its model, read through the runtime's loader, the kinds table and the rules only the packer can judge."""
