"""``python -m beamtrove``: the ``beamtrove`` command."""

import sys

try:
    from beamtrove.processes import interrupt_on_sigterm

    # SIGTERM acts as Ctrl-C while the command loads too.
    interrupt_on_sigterm()
    from beamtrove.cli import main
except KeyboardInterrupt:
    # Ctrl-C while the command is still loading: nothing started, nothing to report. (Imported here: the
    # interrupt may have stopped the import above.)
    from beamtrove.processes import forget_interrupts_handled

    forget_interrupts_handled()
    sys.exit(130)

sys.exit(main())
