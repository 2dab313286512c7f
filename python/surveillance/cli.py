"""The ``surveillance`` command line."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``surveillance`` console script."""
    return 0


if __name__ == "__main__":
    sys.exit(main())
