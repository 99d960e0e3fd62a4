"""How pipelines run: built from their declarations, locally, on Prism, Flink, Slurm, Dataflow or elastic workers.

* :mod:`~beamtrove.execution.build` turns a pipeline's declaration into a Beam
  graph (ordinary, or per input file for ``--resumable``, with
  :mod:`~beamtrove.execution.resume` keeping the books of completed inputs);
* :mod:`~beamtrove.execution.run` builds, runs and waits for a pipeline and
  writes ``stats.json`` (``beamtrove run``);
* :mod:`~beamtrove.execution.runner_parts` says where Prism, Beam's Flink
  job-server jar and a Flink distribution live and points runs at them;
  :mod:`~beamtrove.execution.runner_setup` obtains them from package
  registries (``beamtrove runners setup``);
* :mod:`~beamtrove.execution.flink` configures and starts a standalone Flink
  cluster; :mod:`~beamtrove.execution.slurm_flink` runs a pipeline on one
  inside a Slurm job (``beamtrove slurm``);
* :mod:`beamtrove.execution.dataflow`: Flex Templates, their launcher and
  offline job graphs (``beamtrove dataflow``);
* :mod:`beamtrove.execution.jobs`: independent workers over a shared
  job directory (``beamtrove elastic``).
"""
