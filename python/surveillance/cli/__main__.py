"""``python -m surveillance.cli``: the ``surveillance`` command line."""

import sys

from . import main

if __name__ == "__main__":
    sys.exit(main())
