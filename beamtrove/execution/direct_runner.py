"""The DirectRunner as beamtrove runs it: Beam's FnApiRunner, without Beam's first try of Prism.

Beam 2.77's DirectRunner first tries to run a batch pipeline on Prism, which
it downloads from GitHub when no ``--prism_location`` is given, and falls back
to the FnApiRunner when that fails. Offline, every run pays the failed
try (about a quarter of a second on a 2-core machine; as long as the resolver
takes to give up where DNS hangs); online, the pipeline runs on a Prism
fetched behind the user's back, not on the runner it named.
:func:`pipeline_runner` gives a DirectRunner that goes straight to the
FnApiRunner, the runner Beam falls back to, with ``--direct_running_mode``
and ``--direct_num_workers`` as given.
``--runner PrismRunner`` still runs on Prism.
"""

from __future__ import annotations

from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.runners.direct.direct_runner import SwitchingDirectRunner
from apache_beam.runners.runner import PipelineResult, PipelineRunner

__all__ = ["pipeline_runner"]


class _FnApiDirectRunner(SwitchingDirectRunner):
    """The DirectRunner of batch pipelines: the FnApiRunner, given the run's options as Beam's DirectRunner gives them.

    It is a :class:`SwitchingDirectRunner` for everything but running, so a
    pipeline is constructed for it exactly as for Beam's DirectRunner.
    """

    def run_pipeline(self, pipeline, options: PipelineOptions) -> PipelineResult:
        from apache_beam.portability.api import beam_provision_api_pb2  # noqa: PLC0415
        from apache_beam.runners.portability.fn_api_runner import fn_runner  # noqa: PLC0415
        from apache_beam.runners.portability.portable_runner import JobServiceHandle  # noqa: PLC0415

        # Workers of --direct_running_mode multi_processing read the options from the provision info.
        encoded = JobServiceHandle.encode_pipeline_options(options.get_all_options())
        provision_info = fn_runner.ExtendedProvisionInfo(beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded))
        return fn_runner.FnApiRunner(provision_info=provision_info).run_pipeline(pipeline, options)


def pipeline_runner(options: PipelineOptions) -> PipelineRunner | None:
    """The runner to build a pipeline of ``options`` for: beamtrove's DirectRunner for the DirectRunner (named or
    by default), else None (the runner the options name, made by Beam)."""
    runner = options.view_as(StandardOptions).runner or "DirectRunner"
    if not isinstance(runner, str) or runner.rsplit(".", 1)[-1].lower().removesuffix("runner") != "direct":
        return None
    return _FnApiDirectRunner()
