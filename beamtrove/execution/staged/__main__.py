"""``python -m beamtrove.execution.staged JOB_DIR``: one worker of a staged job (what ``--staged`` starts)."""

import argparse
import functools
import logging
import sys

from beamtrove.execution.elastic.jobdir import ElasticError
from beamtrove.execution.staged.worker import run_staged_worker
from beamtrove.processes import die_with_parent


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m beamtrove.execution.staged")
    parser.add_argument("job_dir")
    parser.add_argument("--host")
    args = parser.parse_args()
    die_with_parent()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        echo = functools.partial(print, flush=True)
        return run_staged_worker(args.job_dir, host=args.host, echo=echo, started_by_run=True)
    except ElasticError as exc:
        print(f"beamtrove: error: {exc}", file=sys.stderr, flush=True)
        return 2


if __name__ == "__main__":
    sys.exit(main())
