"""Elastic shard workers: many independent processes share one POSIX job directory.

No cluster is needed. ``prepare`` cuts the input into shards and publishes a
manifest; any number of ``worker`` processes, on any nodes that see the job
directory, claim shards with ``O_CREAT|O_EXCL`` locks and run the pipeline
on each with a local Beam runner; ``merge`` verifies every shard's output
and publishes them in manifest order as one run folder.

Job directory layout::

    manifest.json       what to run over which shards (see prepare_job)
    manifest.sha256     its checksum; a tampered manifest is refused
    locks/<shard>.lock  the claim of a running shard: host, pid, token, time;
                        its mtime is the owner's heartbeat
    attempts/<shard>/<NN>-<host>-<pid>/
                        one attempt: attempt.json, log.txt, inputs.json,
                        output/ (the pipeline's own output) and
                        documents.jsonl.gz (its kept documents, sorted by id
                        within the worker's --sort-memory: a larger shard is
                        sorted in runs spilled to .publishing-*/ beside it,
                        then merged; the folder goes when the file is
                        renamed into place, or stays behind a killed worker)
    done/<shard>.json   the shard's first published done record
    failed/<shard>.json the shard ran out of attempts
    history/            archived stale locks, and the attempts, failures and done records of retried shards

Modules: :mod:`~beamtrove.execution.elastic.jobdir` (the directory, locks
and once-only records), :mod:`~beamtrove.execution.elastic.scan` (scanning
the input and cutting shards), :mod:`~beamtrove.execution.elastic.prepare`,
:mod:`~beamtrove.execution.elastic.worker` (and the Slurm array script),
:mod:`~beamtrove.execution.elastic.status` (status and retry) and
:mod:`~beamtrove.execution.elastic.merge` (verify and merge).
"""

from beamtrove.exports import exported_from

__all__ = [
    "ElasticError",
    "JobDir",
    "merge_job",
    "prepare_job",
    "retry_shards",
    "run_worker",
    "shard_states",
    "verify_job",
]

_MODULE = "beamtrove.execution.elastic."
# A job's status is read without Beam: only the modules that run or merge shards import it.
__getattr__ = exported_from(
    __name__,
    {
        "ElasticError": _MODULE + "jobdir",
        "JobDir": _MODULE + "jobdir",
        "merge_job": _MODULE + "merge",
        "prepare_job": _MODULE + "prepare",
        "retry_shards": _MODULE + "status",
        "run_worker": _MODULE + "worker",
        "shard_states": _MODULE + "status",
        "verify_job": _MODULE + "merge",
    },
)
