"""`python -m provision` runs the CLI."""

from provision.cli import main

main()
