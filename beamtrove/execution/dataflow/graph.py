"""The Dataflow job a pipeline makes, built offline with DataflowRunner's dry run.

``--dry_run=True`` makes the DataflowRunner do everything a submission does
up to the request to Dataflow: apply its overrides, translate the pipeline
into the portable graph Dataflow runs, and collect what the workers need
(with ``--setup_file``, the sdist of the package that Beam builds with
``python -m build`` or ``python setup.py sdist``). Nothing is uploaded and
no Google Cloud API is called, so no credentials or network are needed; the
project, region and temp location only have to be well formed, and default
to made-up ones.

:func:`dry_run` then fills in the job's environment (worker pool, container
images, pipeline options) as a submission would, minus the uploads, and
returns the job as Dataflow's API would receive it, the graph's steps and
the files that would be staged.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator

from apache_beam.options.pipeline_options import GoogleCloudOptions, PipelineOptions, SetupOptions, StandardOptions
from apache_beam.options.pipeline_options_validator import PipelineOptionsValidator
from apache_beam.portability.api import beam_runner_api_pb2
from apache_beam.runners.dataflow.dataflow_runner import DataflowRunner
from apache_beam.runners.dataflow.internal import apiclient
from apache_beam.runners.internal import names

from beamtrove.configuration import ConfigurationError
from beamtrove.execution.build import build
from beamtrove.fs import file_sha256
from beamtrove.option_parsing import parse
from beamtrove.pipelines import pipeline_spec
from beamtrove.pipelines.spec import PipelineSpec

__all__ = ["OFFLINE_DEFAULTS", "dry_run", "format_graph"]

#: Values for the options the DataflowRunner insists on; the dry run never contacts them.
OFFLINE_DEFAULTS = {
    "project": "beamtrove-offline",
    "region": "us-central1",
    "temp_location": "gs://beamtrove-offline/tmp",
}
_RUNNER = "DataflowRunner"


def _options(spec: PipelineSpec, argv: list[str]) -> PipelineOptions:
    given = parse(spec, argv)
    cloud = given.view_as(GoogleCloudOptions)
    defaults = [f"--{name}={value}" for name, value in OFFLINE_DEFAULTS.items() if getattr(cloud, name) is None]
    runner = given.view_as(StandardOptions).runner
    if runner is not None and runner.rsplit(".", 1)[-1] != _RUNNER:
        raise ConfigurationError(f"The graph is Dataflow's: drop --runner={runner}.")
    options = parse(spec, [*defaults, *argv, f"--runner={_RUNNER}", "--dry_run=True"])
    # Beam looks for a default bucket online when neither location is a well-formed gs:// path: refuse first.
    validator = PipelineOptionsValidator(options, DataflowRunner())
    cloud = options.view_as(GoogleCloudOptions)
    errors = validator.validate_gcs_path(cloud, "temp_location")
    if errors and (cloud.staging_location is None or validator.validate_gcs_path(cloud, "staging_location")):
        raise ConfigurationError(f"{errors[0]} (it is never accessed, but Dataflow needs a gs:// path)")
    return options


@contextlib.contextmanager
def _scratch() -> Iterator[str]:
    """Points ``tempfile`` at a directory removed afterwards.

    The runner stages its artifacts (sdist, pickled session, ...) into a fresh
    ``tempfile.mkdtemp()`` that nothing removes after a dry run.
    """
    saved = tempfile.tempdir
    with tempfile.TemporaryDirectory(prefix="beamtrove-graph-") as scratch:
        tempfile.tempdir = scratch
        try:
            yield scratch
        finally:
            tempfile.tempdir = saved


@contextlib.contextmanager
def _without_build_attempt_noise(scratch: str) -> Iterator[None]:
    """Shows what is written to stderr meanwhile only afterwards, without a failed ``python -m build``'s line.

    With ``--setup_file``, Beam first builds the sdist with ``python -m build``
    and, when the ``build`` package is not installed, with ``python setup.py
    sdist``; the first attempt's child prints ``No module named build`` to this
    process's stderr, which reads as a failure although the sdist is built.
    """
    sys.stderr.flush()
    terminal = os.dup(2)
    with open(os.path.join(scratch, "stderr"), "w+b") as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(terminal, 2)
            os.close(terminal)
            held.seek(0)
            lines = held.read().decode("utf-8", "replace").splitlines(keepends=True)
            sys.stderr.write("".join(line for line in lines if not line.rstrip().endswith(": No module named build")))


def _artifacts(proto: beam_runner_api_pb2.Pipeline, staging_dir: str | None) -> list[dict]:
    """The files the environments depend on, by staged name; copied into ``staging_dir`` when given."""
    artifacts: dict[str, dict] = {}
    for _, environment in sorted(proto.components.environments.items()):
        for dependency in environment.dependencies:
            path = beam_runner_api_pb2.ArtifactFilePayload.FromString(dependency.type_payload).path
            if dependency.role_urn == "beam:artifact:role:staging_to:v1":
                name = beam_runner_api_pb2.ArtifactStagingToRolePayload.FromString(dependency.role_payload).staged_name
            else:
                name = os.path.basename(path)
            artifact = {"name": name, "size": os.path.getsize(path), "sha256": file_sha256(path), "staged": None}
            if staging_dir is not None:
                os.makedirs(staging_dir, exist_ok=True)
                artifact["staged"] = shutil.copyfile(path, os.path.join(staging_dir, name))
            artifacts.setdefault(name, artifact)
    return list(artifacts.values())


def _steps(proto: beam_runner_api_pb2.Pipeline) -> list[dict]:
    """The pipeline's top-level steps, each with the primitive transforms it expands to."""
    transforms = proto.components.transforms
    top = list(proto.root_transform_ids)
    # The whole pipeline may be wrapped in one transform whose children are the steps the code named.
    while len(top) == 1 and transforms[top[0]].subtransforms:
        wrapper = transforms[top[0]].unique_name
        children = list(transforms[top[0]].subtransforms)
        if all(transforms[child].unique_name.startswith(f"{wrapper}/") for child in children):
            break
        top = children

    def leaves(transform_id: str) -> list[dict]:
        transform = transforms[transform_id]
        if not transform.subtransforms:
            return [{"name": transform.unique_name, "urn": transform.spec.urn}]
        return [leaf for child in transform.subtransforms for leaf in leaves(child)]

    return [{"name": transforms[step].unique_name, "transforms": leaves(step)} for step in top]


def _job_json(job: apiclient.Job, artifacts: list[dict]) -> dict:
    """The job as a submission sends it: the dry run's job plus the environment a submission adds."""
    staging = job.google_cloud_options.staging_location.rstrip("/")
    serialized = job.proto_pipeline.SerializeToString()
    environment = apiclient.Environment(
        packages=[artifact["name"] for artifact in artifacts],
        options=job.options,
        environment_version=apiclient._FNAPI_ENVIRONMENT_MAJOR_VERSION,
        proto_pipeline_staged_url=f"{staging}/{names.STAGED_PIPELINE_FILENAME}",
        proto_pipeline=job.proto_pipeline,
        pipeline_proto_hash=hashlib.sha256(serialized).hexdigest(),
    )
    job.proto.environment = environment.proto
    return json.loads(job.json())


def dry_run(pipeline_name: str, argv: list[str], staging_dir: str | None = None) -> dict:
    """Builds a pipeline with the DataflowRunner's dry run and describes the job it would submit.

    Args:
        pipeline_name: A registered pipeline (:data:`beamtrove.pipelines.PIPELINES`).
        argv: The pipeline's options and any Beam options, as ``beamtrove run`` takes
            them. ``--project``, ``--region`` and ``--temp_location`` default to
            :data:`OFFLINE_DEFAULTS`.
        staging_dir: A local directory to copy the files to stage into, under the
            names Dataflow would give them; ``None`` copies nothing.

    Returns:
        ``{"pipeline", "job", "steps", "artifacts"}``: ``job`` is the Dataflow
        ``Job`` message as JSON, with the pipeline options under
        ``environment.sdkPipelineOptions.options``; ``steps`` lists the
        top-level steps with their primitive transforms; ``artifacts`` lists the
        files to stage (name, size, sha256 and where they were copied).

    Raises:
        ConfigurationError: Unknown pipeline or options, a runner other than
            Dataflow, a malformed temp or staging location, or options, inputs
            or assets the pipeline cannot run with.
    """
    spec = pipeline_spec(pipeline_name)
    options = _options(spec, argv)
    with _scratch() as scratch, contextlib.ExitStack() as stack:
        if options.view_as(SetupOptions).setup_file:
            stack.enter_context(_without_build_attempt_noise(scratch))
        job = build(spec, options, inspect_output=False).pipeline.run().job
        artifacts = _artifacts(job.proto_pipeline, staging_dir)
    return {
        "pipeline": pipeline_name,
        "job": _job_json(job, artifacts),
        "steps": _steps(job.proto_pipeline),
        "artifacts": artifacts,
    }


def format_graph(graph: dict, option_names: list[str]) -> str:
    """A readable summary of :func:`dry_run`'s result: steps, artifacts and the given options' values."""
    job = graph["job"]
    environment = job["environment"]
    images = sorted({pool["workerHarnessContainerImage"] for pool in environment["workerPools"]})
    transforms = sum(len(step["transforms"]) for step in graph["steps"])
    width = max((len(step["name"]) for step in graph["steps"]), default=0)
    lines = [
        f"beamtrove {graph['pipeline']} as Dataflow job {job['name']} ({job['type']}); dry run, nothing submitted",
        f"worker image: {', '.join(images)}",
        f"{len(graph['steps'])} steps, {transforms} primitive transforms:",
        *(f"  {step['name']:<{width}}  {len(step['transforms'])}" for step in graph["steps"]),
        "files to stage:",
        *(
            f"  {artifact['name']}  {artifact['size']} bytes  sha256 {artifact['sha256'][:16]}"
            + (f"  -> {artifact['staged']}" if artifact["staged"] else "")
            for artifact in graph["artifacts"]
        ),
        "pipeline options:",
    ]
    values = environment["sdkPipelineOptions"]["options"]
    lines.extend(f"  {name} = {json.dumps(values[name])}" for name in option_names if name in values)
    return "\n".join(lines)
