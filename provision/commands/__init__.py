"""One module per CLI command (the CLI layer): argument parsing, calls, output; no decisions."""
