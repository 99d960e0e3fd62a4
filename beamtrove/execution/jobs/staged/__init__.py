"""Staged jobs: global steps as file-backed tasks that local or elastic workers run in bounded memory.

A pipeline's flow becomes stages (:mod:`~beamtrove.execution.jobs.staged.plan`):
reading the input shards, each step's stages between its shuffles, and
writing the run's outputs. Tasks of one stage run in parallel on any worker;
their datasets are files partitioned by key
(:mod:`~beamtrove.execution.jobs.staged.datasets`), so one task holds one
partition. :mod:`~beamtrove.execution.jobs.staged.kind` is the job kind the
engine runs, :mod:`~beamtrove.execution.jobs.staged.tasks` seals stages and
checks what tasks read, :mod:`~beamtrove.execution.jobs.staged.prepare`
prepares a job and :mod:`~beamtrove.execution.jobs.staged.run` is ``beamtrove
run --staged``.
"""
