"""``python -m beamtrove.execution.jobs JOB_DIR``: one worker of the job, as ``beamtrove run --staged`` starts them."""

import argparse
import functools
import logging
import sys

from beamtrove.execution.jobs.jobdir import ElasticError
from beamtrove.execution.jobs.worker import run_worker
from beamtrove.processes import die_with_parent


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m beamtrove.execution.jobs")
    parser.add_argument("job_dir")
    parser.add_argument("--host")
    args = parser.parse_args()
    die_with_parent()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        echo = functools.partial(print, flush=True)
        return run_worker(args.job_dir, host=args.host, echo=echo, started_by_run=True)
    except ElasticError as exc:
        print(f"beamtrove: error: {exc}", file=sys.stderr, flush=True)
        return 2


if __name__ == "__main__":
    sys.exit(main())
