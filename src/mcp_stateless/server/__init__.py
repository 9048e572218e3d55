"""The server framework: `App`, `Context`, registries, results and listen events."""
