"""``python -m fltheory``: the same command as the ``fltheory`` console script."""

import sys

from fltheory.cli import main

if __name__ == "__main__":
    sys.exit(main())
