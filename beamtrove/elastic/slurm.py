"""The Slurm array script that runs one elastic worker per array task."""

from __future__ import annotations

__all__ = ["SLURM_ARRAY_TEMPLATE"]

SLURM_ARRAY_TEMPLATE = r"""#!/bin/bash
# beamtrove elastic workers as a Slurm job array: each array task is one worker.
#
# 1. Prepare the job once, on storage every node mounts:
#      beamtrove elastic prepare --pipeline fineweb --input /shared/crawl/ --job-dir /shared/jobs/crawl \
#        --num-shards 512 -- --lid_model /shared/assets/lid.176.ftz --url_blocklist /shared/assets/ut1
# 2. Submit as many workers as you like; they may start late, die or be preempted:
#      sbatch --array=0-31 --export=ALL,JOB_DIR=/shared/jobs/crawl elastic-array.sbatch
#    A dead worker's shard is taken over once its lock is older than the lock timeout.
# 3. Watch, retry what failed, verify and merge:
#      beamtrove elastic status --job-dir /shared/jobs/crawl
#      beamtrove elastic retry --job-dir /shared/jobs/crawl --all-failed   # then submit workers again
#      beamtrove elastic verify --job-dir /shared/jobs/crawl --expect-hosts 2
#      beamtrove elastic merge --job-dir /shared/jobs/crawl --output /shared/out/crawl.jsonl.gz
#
# Environment: JOB_DIR (required); MAX_SHARDS (optional: shards per task); BEAMTROVE (the command,
# default: beamtrove on PATH; for a virtualenv, /path/to/venv/bin/beamtrove).
#SBATCH --job-name=beamtrove-elastic
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=1
#SBATCH --mem=4G
#SBATCH --time=04:00:00
#SBATCH --output=beamtrove-elastic-%A_%a.out
set -euo pipefail
: "${JOB_DIR:?set JOB_DIR to a job directory made by beamtrove elastic prepare}"
# exec: the worker itself receives Slurm's SIGTERM and frees its shard at once.
exec "${BEAMTROVE:-beamtrove}" elastic worker --job-dir "$JOB_DIR" ${MAX_SHARDS:+--max-shards "$MAX_SHARDS"}
"""
