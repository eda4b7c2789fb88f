"""Entry point for `python -m crashmatrix`: the `crashmatrix` command line."""

from crashmatrix.harness.cli.main import entry

if __name__ == "__main__":
    entry()
