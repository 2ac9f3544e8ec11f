"""``python -m ltr``: the same entry point as the ``ltr`` command."""

import sys

from ltr.cli import main

if __name__ == "__main__":
    sys.exit(main())
