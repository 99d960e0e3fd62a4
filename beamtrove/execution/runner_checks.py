"""Refusals of runner options that Beam accepts but that would spoil a run."""

from __future__ import annotations

from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions

__all__ = ["check_runner_options"]


def check_runner_options(options: PipelineOptions) -> None:
    """Refuses runner options known to lose data, before anything is built.

    Raises:
        ValueError: ``--direct_running_mode=multi_threading``, which silently
            drops elements on Beam 2.77.
    """
    if options.view_as(DirectOptions).direct_running_mode == "multi_threading":
        raise ValueError(
            "--direct_running_mode=multi_threading silently drops elements on Beam 2.77: use in_memory (one "
            "process) or multi_processing (with --direct_num_workers), or leave both out for one worker per core."
        )
