"""``beamtrove dataflow``: Flex Template specs and offline job graphs for Google Cloud Dataflow.

``beamtrove dataflow build-template PIPELINE --image IMAGE --output SPEC.json``
writes the Flex Template spec of a pipeline (what ``gcloud dataflow
flex-template build`` writes), for an image built from the repository's
Dockerfile. ``beamtrove dataflow graph PIPELINE -- OPTIONS`` builds the
pipeline with the DataflowRunner's dry run, offline, and prints the job it
would submit: its steps, the files it would stage and its options.
"""

from __future__ import annotations

import argparse
import json
import sys

from beamtrove.dataflow.template import flex_template_spec, template_options
from beamtrove.fs import open_url
from beamtrove.pipelines import PIPELINES

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="beamtrove dataflow",
        description="Run beamtrove's pipelines on Google Cloud Dataflow as Flex Templates.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser(
        "build-template",
        help="write a pipeline's Flex Template spec",
        description="Writes the Flex Template spec of a pipeline: the image, and the pipeline's options as template "
        "parameters (plus 'pipeline', which the launcher reads). Upload it to gs:// (or write it there directly) "
        "and launch with `gcloud dataflow flex-template run JOB --template-file-gcs-location SPEC "
        "--region REGION --parameters pipeline=PIPELINE,output=gs://...`.",
    )
    build.add_argument("pipeline", help=f"one of {', '.join(sorted(PIPELINES))}")
    build.add_argument("--image", required=True, help="the image built from the repository's Dockerfile")
    build.add_argument("--output", required=True, help="where to write the spec: a path or fsspec URL (gs://...)")
    build.add_argument(
        "--sdk-container-image",
        help="the image the workers run (default: --image, which the Dockerfile makes fit for workers; "
        "'' leaves Dataflow's default Beam image, which installs beamtrove from the staged setup.py)",
    )
    graph = commands.add_parser(
        "graph",
        help="build a pipeline's Dataflow job offline (dry run) and print its steps",
        usage="beamtrove dataflow graph PIPELINE [--output JOB.json] [--staging-dir DIR] "
        "-- [PIPELINE AND BEAM OPTIONS]",
        description="Builds the pipeline with the DataflowRunner's dry run: the job Dataflow would receive, with no "
        "network or credentials. Options after -- are the pipeline's, as `beamtrove run PIPELINE` takes them, and "
        "Beam's (--setup_file, --sdk_container_image, ...); --project, --region and --temp_location default to "
        "made-up values. Inputs are matched as `beamtrove run` does, so offline they must be local files.",
    )
    graph.add_argument("pipeline", help=f"one of {', '.join(sorted(PIPELINES))}")
    graph.add_argument("--output", help="also write the job, steps and artifacts as JSON here (path or fsspec URL)")
    graph.add_argument("--staging-dir", help="copy the files the job would stage into this local directory")
    return parser


def _write_json(record: dict, output: str) -> bool:
    """Writes ``record`` to ``output`` (path or fsspec URL); False, with the error printed, when it cannot."""
    try:
        with open_url(output, "w") as out:
            json.dump(record, out, indent=2)
            out.write("\n")
    except OSError as exc:
        print(f"beamtrove: error: cannot write {output}: {exc}", file=sys.stderr)
        return False
    return True


def _build_template(pipeline: str, image: str, output: str, sdk_container_image: str | None) -> int:
    worker_image = image if sdk_container_image is None else sdk_container_image
    try:
        spec = flex_template_spec(pipeline, image, sdk_container_image=worker_image or None)
    except ValueError as exc:
        print(f"beamtrove: error: {exc}", file=sys.stderr)
        return 2
    if not _write_json(spec, output):
        return 1
    print(f"{output}: Flex Template spec of {pipeline} ({len(spec['metadata']['parameters'])} parameters) for {image}")
    return 0


def _graph(pipeline: str, argv: list[str], output: str | None, staging_dir: str | None) -> int:
    if pipeline not in PIPELINES:
        print(
            f"beamtrove: error: Unknown pipeline {pipeline!r}; available: {', '.join(sorted(PIPELINES))}.",
            file=sys.stderr,
        )
        return 2
    # Beam's Dataflow runner and API client take about a second to import: only this command pays for them.
    from beamtrove.dataflow.graph import dry_run, format_graph  # noqa: PLC0415

    try:
        graph = dry_run(pipeline, argv, staging_dir=staging_dir)
    except (ValueError, FileNotFoundError, FileExistsError, ImportError) as exc:
        print(f"beamtrove: error: {exc}", file=sys.stderr)
        return 2
    print(format_graph(graph, [option.name for option in template_options(pipeline)]))
    if output:
        if not _write_json(graph, output):
            return 1
        print(f"job written to {output}")
    return 0


def main(argv: list[str]) -> int:
    """Entry point of ``beamtrove dataflow``; returns the exit status (2 for usage errors)."""
    own, rest = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, None)
    parser = _parser()
    args = parser.parse_args(own)
    if args.command == "build-template":
        if rest is not None:
            parser.error("build-template takes no options after --")
        return _build_template(args.pipeline, args.image, args.output, args.sdk_container_image)
    return _graph(args.pipeline, rest or [], args.output, args.staging_dir)
