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

A run whose options leave the worker count to beamtrove
(``--direct_num_workers 0``, what ``beamtrove run`` gives when the command
line names neither the running mode nor the count) gets as many SDK workers as
:func:`~beamtrove.execution.direct_workers.default_workers` allows for its
input (:func:`settle_direct_workers`); one runs in memory.

With ``--direct_running_mode multi_processing``, its SDK workers are forked
from a process that has imported Beam already
(:mod:`~beamtrove.execution.worker_zygote`) instead of started as new
interpreters, which saves each worker its second or more of imports, and the
models and lists their DoFns share are loaded once, in that process, while
the pipeline is built.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Sequence

import apache_beam as beam
import grpc
from apache_beam.internal import pickler
from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, StandardOptions
from apache_beam.portability import python_urns
from apache_beam.portability.api import (
    beam_fn_api_pb2_grpc,
    beam_provision_api_pb2,
    beam_runner_api_pb2,
    endpoints_pb2,
)
from apache_beam.runners.direct.direct_runner import SwitchingDirectRunner
from apache_beam.runners.portability.fn_api_runner import fn_runner, worker_handlers
from apache_beam.runners.portability.local_job_service import BeamFnLoggingServicer
from apache_beam.runners.portability.portable_runner import JobServiceHandle
from apache_beam.runners.runner import PipelineResult, PipelineRunner
from apache_beam.utils import thread_pool_executor
from google.protobuf import json_format, text_format

from beamtrove.execution.direct_workers import DEFAULT_DIRECT_WORKERS, default_workers
from beamtrove.execution.runner_parts import runner_kind
from beamtrove.execution.worker_zygote import SDK_WORKER_MODULE, shared_zygote
from beamtrove.fs import InputFile
from beamtrove.resources import Preloading

__all__ = ["FORKED_WORKER_URN", "pipeline_runner", "settle_direct_workers"]

#: The environment of SDK workers forked from the zygote.
FORKED_WORKER_URN = "beamtrove:environment:forked_sdk_worker:v1"

# The command FnApiRunner gives --direct_running_mode multi_processing workers: those are the ones forked instead.
_BEAM_WORKER_COMMAND = f"{sys.executable} -m {SDK_WORKER_MODULE}".encode()

# Beam's settings for the server its subprocess workers send their logs to, which lets idle workers stay connected.
# Seconds a worker has to exit once its runner stops it before it is killed.
_STOP_GRACE_SECONDS = 3.0

_LOGGING_SERVER_OPTIONS = [("grpc.http2.max_pings_without_data", 0), ("grpc.http2.max_ping_strikes", 0)]


class _FnApiDirectRunner(SwitchingDirectRunner):
    """The DirectRunner of batch pipelines: the FnApiRunner, given the run's options as Beam's DirectRunner gives them.

    It is a :class:`SwitchingDirectRunner` for everything but running, so a
    pipeline is constructed for it exactly as for Beam's DirectRunner; with
    multi_processing workers, the models and lists of its DoFns are preloaded
    into the zygote as they are applied.
    """

    def apply(self, transform: beam.PTransform, input, options: PipelineOptions):
        if (
            isinstance(transform, beam.ParDo)
            and isinstance(transform.fn, Preloading)
            and options.view_as(DirectOptions).direct_running_mode == "multi_processing"
        ):
            _preload_in_zygote(transform.fn)
        return super().apply(transform, input, options)

    def is_fnapi_compatible(self) -> bool:
        # It runs every pipeline on the Fn API: Beam then skips the round trip through the runner API that it makes
        # for runners that do not (half a second of a FineWeb run's start), as it does for its own batch DirectRunner.
        return True

    def run_pipeline(self, pipeline, options: PipelineOptions) -> PipelineResult:
        # Workers of --direct_running_mode multi_processing read the options from the provision info.
        encoded = JobServiceHandle.encode_pipeline_options(options.get_all_options())
        provision_info = fn_runner.ExtendedProvisionInfo(beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded))
        return _ForkingFnApiRunner(provision_info=provision_info).run_pipeline(pipeline, options)


class _ForkingFnApiRunner(fn_runner.FnApiRunner):
    """The FnApiRunner, with the new-interpreter workers it chose for multi_processing forked from the zygote."""

    def run_via_runner_api(self, pipeline_proto: beam_runner_api_pb2.Pipeline, options: PipelineOptions):
        for environment in pipeline_proto.components.environments.values():
            if environment.urn == python_urns.SUBPROCESS_SDK and environment.payload == _BEAM_WORKER_COMMAND:
                environment.urn, environment.payload = FORKED_WORKER_URN, b""
        return super().run_via_runner_api(pipeline_proto, options)


@worker_handlers.WorkerHandler.register_environment(FORKED_WORKER_URN, None)
class _ForkedWorkerHandler(worker_handlers.GrpcWorkerHandler):
    """Forks one SDK worker from the zygote and waits for it in a thread, as Beam does its subprocess workers."""

    def __init__(self, payload: bytes, state, provision_info, grpc_server):
        super().__init__(state, provision_info, grpc_server)
        self._killed_on_stop = False
        # The thread that waits for the worker, once it started (Ctrl-C may land as it starts).
        self._thread: threading.Thread | None = None

    def start_worker(self) -> None:
        # The worker's logs come to this server, and from it to this process's logging.
        self._logging_server = grpc.server(
            thread_pool_executor.shared_unbounded_instance(), options=_LOGGING_SERVER_OPTIONS
        )
        beam_fn_api_pb2_grpc.add_BeamFnLoggingServicer_to_server(BeamFnLoggingServicer(), self._logging_server)
        logging_port = self._logging_server.add_insecure_port("[::]:0")
        self._logging_server.start()
        environment = dict(
            os.environ,
            CONTROL_API_SERVICE_DESCRIPTOR=_descriptor(self.control_address),
            LOGGING_API_SERVICE_DESCRIPTOR=_descriptor(f"localhost:{logging_port}"),
            PIPELINE_OPTIONS=json_format.MessageToJson(self.provision_info.provision_info.pipeline_options),
            WORKER_ID=self.worker_id,
        )
        self._zygote = shared_zygote()
        try:
            self._pid = self._zygote.start_worker(environment, os.getcwd())
        except BaseException:
            self._logging_server.stop(0)
            raise
        # A daemon: a runner interrupted by Ctrl-C exits without waiting for its workers (they ignore it); the
        # zygote kills them once it has gone.
        self._thread = threading.Thread(name="run_worker", target=self._wait_for_worker, daemon=True)
        self._thread.start()

    def close(self) -> None:
        # Closed as an interrupt unwinds the run: the worker, which ignores Ctrl-C, may be mid-bundle, and its
        # channels closing under it would make it print their traceback on the terminal it shares with this
        # process. It is killed first, as the zygote would kill it once this process has gone.
        if isinstance(sys.exc_info()[1], KeyboardInterrupt) and self._thread is not None:
            self._kill()
        super().close()

    def stop_worker(self) -> None:
        # Beam has closed the worker's control stream: a worker that had connected ends now. One that connects after
        # (a run stopped as it started, by Ctrl-C) would wait for its stream forever: closing the connection again
        # ends its stream too. A worker that still runs then is killed.
        if self._thread is None:
            return
        self._thread.join(_STOP_GRACE_SECONDS)
        if self._thread.is_alive():
            self.control_conn.close()
            self._thread.join(_STOP_GRACE_SECONDS)
        if self._thread.is_alive():
            self._kill()

    def _kill(self) -> None:
        self._killed_on_stop = True
        self._zygote.kill(self._pid)
        self._thread.join()

    def _wait_for_worker(self) -> None:
        try:
            exit_code = self._zygote.wait(self._pid)
        finally:
            self._logging_server.stop(0)
        if exit_code and not self._killed_on_stop:
            raise RuntimeError(f"SDK worker {self.worker_id} (pid {self._pid}) exited with code {exit_code}")


def _preload_in_zygote(fn: Preloading) -> None:
    """Has the zygote the workers will be forked from load the DoFn's models and lists while the rest of the graph
    is built, so that no worker spends its first seconds loading a copy of them."""
    try:
        pickled = pickler.dumps(fn)
    except Exception:  # a DoFn Beam cannot pickle fails the run with Beam's own message, when it is sent
        return
    shared_zygote().preload(pickled)


def _descriptor(url: str) -> str:
    return text_format.MessageToString(endpoints_pb2.ApiServiceDescriptor(url=url))


def _runs_direct(options: PipelineOptions) -> bool:
    """Whether ``options`` run on the DirectRunner, named or by default."""
    runner = options.view_as(StandardOptions).runner or "DirectRunner"
    return isinstance(runner, str) and runner_kind(runner) == "direct"


def pipeline_runner(options: PipelineOptions) -> PipelineRunner | None:
    """The runner to build a pipeline of ``options`` for: beamtrove's DirectRunner for the DirectRunner (named or
    by default), else None (the runner the options name, made by Beam)."""
    return _FnApiDirectRunner() if _runs_direct(options) else None


def settle_direct_workers(options: PipelineOptions, inputs: Sequence[InputFile], units_of_work: int) -> None:
    """Sets the worker count of a DirectRunner run that leaves it to beamtrove, before its graph is built.

    A multi_processing run with ``--direct_num_workers 0`` gets
    :func:`~beamtrove.execution.direct_workers.default_workers` workers for
    ``inputs`` read in ``units_of_work`` units; with one, it runs in memory,
    in this process. Other options are left as they are.
    """
    direct = options.view_as(DirectOptions)
    if not _runs_direct(options) or direct.direct_running_mode != "multi_processing":
        return
    if direct.direct_num_workers == DEFAULT_DIRECT_WORKERS:
        direct.direct_num_workers = default_workers(units_of_work, sum(file.size for file in inputs))
        if direct.direct_num_workers == 1:
            direct.direct_running_mode = "in_memory"
