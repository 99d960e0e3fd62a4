"""Staged runs: global steps as file-backed tasks that local or elastic workers run in bounded memory.

A pipeline's flow becomes stages (:mod:`~beamtrove.execution.staged.plan`):
reading the input shards, each step's stages between its shuffles, and
writing the run's outputs. Tasks of one stage run in parallel on any worker;
their datasets are files partitioned by key
(:mod:`~beamtrove.execution.staged.records`), so one task holds one
partition. The job directory is an elastic one (locks, attempts, done and
failed records, history); :mod:`~beamtrove.execution.staged.worker` claims
and runs tasks and :mod:`~beamtrove.execution.staged.run` is ``beamtrove run
--staged``.
"""

from beamtrove.exports import exported_from

__all__ = ["prepare_staged_job", "run_staged", "run_staged_worker"]

# A staged job's status is read without Beam: only the modules that plan and run tasks import it.
__getattr__ = exported_from(
    __name__,
    {
        "prepare_staged_job": "beamtrove.execution.staged.run",
        "run_staged": "beamtrove.execution.staged.run",
        "run_staged_worker": "beamtrove.execution.staged.worker",
    },
)
