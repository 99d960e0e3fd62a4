"""Jobs on a shared directory: tasks claimed by independent workers, one engine for every kind of job.

No cluster is needed. A job is prepared once
(:mod:`~beamtrove.execution.jobs.prepare`); any number of workers
(:mod:`~beamtrove.execution.jobs.worker`), on any nodes that see the job
directory, claim its tasks with ``O_CREAT|O_EXCL`` locks, attempt them and
write done records; ``status`` and ``retry``
(:mod:`~beamtrove.execution.jobs.status`) read and requeue them for every
kind, and ``verify`` and ``merge`` (:mod:`~beamtrove.execution.jobs.merge`)
check every task's files and publish the job's outputs as one run folder.
What a task is comes from the job's kind, chosen once from its manifest
(:mod:`~beamtrove.execution.jobs.kinds`):

* ``shards`` (:mod:`~beamtrove.execution.jobs.shards`): shards of the input,
  each run by a shard-safe pipeline (``beamtrove elastic prepare`` of
  ``fineweb``, ``extract``, ``filter``, ``convert``);
* ``staged`` (:mod:`beamtrove.execution.jobs.staged`): the stages of a
  pipeline with global steps, each task one partition (``beamtrove run
  --staged``, or ``elastic prepare`` of ``dedup``, ``tokenize``, ...).

Job directory layout::

    manifest.json       what to run over which input, and the job's kind
    manifest.sha256     its checksum; a tampered manifest is refused
    locks/<task>.lock   the claim of a running task: host, pid, token, time;
                        its mtime is the owner's heartbeat
    attempts/<task>/<NN>-<host>-<pid>/
                        one attempt: attempt.json and what the kind's run made
                        (a shard's log.txt, inputs.json, output/ and
                        documents.jsonl.gz; a staged task's data/ and output/)
    done/<task>.json    the task's done record, the first written
    failed/<task>.json  the task ran out of attempts
    stages/<stage>/     a staged job's sealed stage: its outputs listed by partition
    history/            archived stale locks and seals, and the attempts, failures and done records of retried tasks

Modules: :mod:`~beamtrove.execution.jobs.jobdir` (the directory, locks, records),
:mod:`~beamtrove.execution.jobs.task` (an attempt as a kind sees it),
:mod:`~beamtrove.execution.jobs.scan` (scanning the input and cutting shards),
:mod:`~beamtrove.execution.jobs.shard_output` (a shard's documents, sorted by id).
"""

from beamtrove.exports import exported_from

__all__ = [
    "ElasticError",
    "JobDir",
    "merge_job",
    "prepare_job",
    "run_worker",
    "verify_job",
]

_MODULE = "beamtrove.execution.jobs."
# A job's status is read without Beam: only the modules that run or merge tasks import it.
__getattr__ = exported_from(
    __name__,
    {
        "ElasticError": _MODULE + "jobdir",
        "JobDir": _MODULE + "jobdir",
        "merge_job": _MODULE + "merge",
        "prepare_job": _MODULE + "prepare",
        "run_worker": _MODULE + "worker",
        "verify_job": _MODULE + "merge",
    },
)
