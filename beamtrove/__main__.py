"""``python -m beamtrove``: the ``beamtrove`` command."""

import sys

from beamtrove.cli import main

sys.exit(main())
