"""``beamtrove dataflow``: Flex Template specs and offline job graphs for Google Cloud Dataflow."""

from __future__ import annotations

import argparse

from beamtrove.cli.parsing import command, group
from beamtrove.configuration import ConfigurationError
from beamtrove.fs import write_json
from beamtrove.pipelines import PIPELINES

__all__ = ["add_commands"]


def _write(record: dict, url: str) -> None:
    try:
        write_json(record, url)
    except OSError as exc:
        raise ConfigurationError(f"cannot write {url}: {exc}") from exc


def _build_template(args: argparse.Namespace, _: list[str]) -> int:
    """Write a pipeline's Flex Template spec.

    The spec names the image and holds the pipeline's options as template
    parameters (plus 'pipeline', which the launcher reads). Upload it to gs://
    (or write it there directly) and launch with `gcloud dataflow flex-template
    run JOB --template-file-gcs-location SPEC --region REGION --parameters
    pipeline=PIPELINE,output=gs://...`.
    """
    # Templates are made of the pipelines' Beam option classes: only the commands that build one import Beam.
    from beamtrove.execution.dataflow.template import flex_template_spec  # noqa: PLC0415

    worker_image = args.image if args.sdk_container_image is None else args.sdk_container_image
    spec = flex_template_spec(args.pipeline, args.image, sdk_container_image=worker_image or None)
    _write(spec, args.output)
    parameters = len(spec["metadata"]["parameters"])
    print(f"{args.output}: Flex Template spec of {args.pipeline} ({parameters} parameters) for {args.image}")
    return 0


def _build_image(args: argparse.Namespace, _: list[str]) -> int:
    """Build the worker image from the repository's Dockerfile.

    By default on Google's template-launcher image and Beam's SDK image (what
    a Dataflow job needs: push the image and name it in build-template's
    --image). With --local-base, on a base made here from Debian packages with
    Beam's boot program: no registry but the package registries is needed,
    and the image serves workers (Prism, a worker pool) but holds no template
    launcher.
    """
    # The dataflow package imports Beam's Dataflow runner with its templates: only the dataflow commands pay for it.
    from beamtrove.execution.dataflow.image import build_image, image_size, make_local_base  # noqa: PLC0415

    if not args.local_base and (args.base_tag or args.rebuild_base):
        given = "--base-tag" if args.base_tag else "--rebuild-base"
        raise ConfigurationError(f"{given} is about the local base: add --local-base, or leave {given} out.")
    base = make_local_base(args.base_tag, rebuild=args.rebuild_base) if args.local_base else None
    build_image(args.tag, args.context, sdk_image=base, launcher_image=base)
    print(f"{args.tag}: {image_size(args.tag) / 1e9:.2f} GB" + (f", on {base}" if base else ""))
    return 0


def _graph(args: argparse.Namespace, pipeline_argv: list[str]) -> int:
    """Build a pipeline's Dataflow job offline (dry run) and print its steps.

    The DataflowRunner's dry run builds the job Dataflow would receive, with no
    network or credentials. --project, --region and --temp_location default to
    made-up values. Inputs are matched as `beamtrove run` does, so offline they
    must be local files.
    """
    # Beam's Dataflow runner and API client take about a second to import: only this command pays for them.
    from beamtrove.execution.dataflow.graph import dry_run, format_graph  # noqa: PLC0415
    from beamtrove.execution.dataflow.template import template_options  # noqa: PLC0415

    graph = dry_run(args.pipeline, pipeline_argv, staging_dir=args.staging_dir)
    print(format_graph(graph, [option.name for option in template_options(args.pipeline)]))
    if args.output:
        _write(graph, args.output)
        print(f"job written to {args.output}")
    return 0


def add_commands(commands) -> None:
    """Adds ``dataflow`` and its subcommands to the tree."""
    subcommands = group(commands, "dataflow", "Flex Template specs and offline job graphs for Google Cloud Dataflow")
    build = command(subcommands, "build-template", _build_template)
    build.add_argument("--image", required=True, help="the image built from the repository's Dockerfile")
    build.add_argument("--output", required=True, help="where to write the spec: a path or fsspec URL (gs://...)")
    build.add_argument(
        "--sdk-container-image",
        help="the image the workers run (default: --image, which the Dockerfile makes fit for workers; "
        "'' leaves Dataflow's default Beam image, which installs beamtrove from the staged setup.py)",
    )
    image = command(subcommands, "build-image", _build_image)
    image.add_argument(
        "--tag", required=True, help="the image's tag, e.g. REGION-docker.pkg.dev/PROJECT/REPO/beamtrove:V"
    )
    image.add_argument(
        "--local-base",
        action="store_true",
        help="first make the base from Debian packages (debootstrap, as root) and Beam's boot program (go)",
    )
    image.add_argument(
        "--base-tag", help="the local base's tag (default: beamtrove-base:bookworm-beam<Beam's version>)"
    )
    image.add_argument(
        "--rebuild-base", action="store_true", help="make the local base again even when its tag exists already"
    )
    image.add_argument("--context", default=".", help="the beamtrove clone to build (default: the current folder)")
    graph = command(subcommands, "graph", _graph, pipeline_options=True)
    graph.add_argument("--output", help="also write the job, steps and artifacts as JSON here (path or fsspec URL)")
    graph.add_argument("--staging-dir", help="copy the files the job would stage into this local directory")
    for parser in (build, graph):
        parser.add_argument("pipeline", help=f"one of {', '.join(sorted(PIPELINES))}")
