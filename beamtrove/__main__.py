"""``python -m beamtrove``: the ``beamtrove`` command."""

import sys

try:
    from beamtrove.cli import main
except KeyboardInterrupt:
    # Ctrl-C while the command is still loading: nothing started, nothing to report.
    sys.exit(130)

sys.exit(main())
