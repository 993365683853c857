"""One module per CLI command: argument parsing and output only."""
