"""``python -m surveillance``: the ``surveillance`` command line (:mod:`surveillance.cli`)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
