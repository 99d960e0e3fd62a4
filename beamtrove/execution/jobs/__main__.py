"""``python -m beamtrove.execution.jobs JOB_DIR``: one worker process of the job, in an interpreter of its own.

:func:`~beamtrove.execution.jobs.worker.run_workers` forks its worker
processes; it starts them this way only from a process running other threads.
"""

import argparse
import sys

from beamtrove.execution.jobs.worker import WORKER_MODULE, run_worker_process
from beamtrove.processes import die_with_parent


def main() -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {WORKER_MODULE}")
    parser.add_argument("job_dir")
    parser.add_argument("--host")
    parser.add_argument("--max-tasks", type=int)
    parser.add_argument("--poll-interval", type=float)
    parser.add_argument("--sort-memory", type=int)
    parser.add_argument("--started-by-run", action="store_true")
    args = vars(parser.parse_args())
    die_with_parent()
    job_dir = args.pop("job_dir")
    return run_worker_process(job_dir, **{name: value for name, value in args.items() if value is not None})


if __name__ == "__main__":
    sys.exit(main())
