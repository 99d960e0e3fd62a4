"""``python -m beamtrove.execution.staged JOB_DIR``: one worker of a staged job (what ``--staged`` starts)."""

import argparse
import logging
import sys

from beamtrove.execution.staged.worker import run_staged_worker
from beamtrove.processes import die_with_parent


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m beamtrove.execution.staged")
    parser.add_argument("job_dir")
    parser.add_argument("--host")
    args = parser.parse_args()
    die_with_parent()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return run_staged_worker(args.job_dir, host=args.host, echo=lambda line: print(line, flush=True))


if __name__ == "__main__":
    sys.exit(main())
