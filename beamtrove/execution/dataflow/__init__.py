"""Google Cloud Dataflow: Flex Template specs, the template's launcher and offline job graphs.

* :mod:`beamtrove.execution.dataflow.template` derives a pipeline's Flex Template spec
  from its option definitions (``beamtrove dataflow build-template``).
* :mod:`beamtrove.execution.dataflow.launch` is the file the template's image runs: it
  builds the pipeline from the template parameters and submits it.
* :mod:`beamtrove.execution.dataflow.graph` builds the job a pipeline would submit with
  the DataflowRunner's dry run, offline (``beamtrove dataflow graph``).

The repository's ``Dockerfile`` builds the image, which serves both as the
template's launcher image and as the workers' SDK container.
"""

from beamtrove.execution.dataflow.template import (
    PIPELINE_PARAMETER,
    REQUIRED_OPTIONS,
    TemplateOption,
    flex_template_spec,
    template_options,
)

__all__ = ["PIPELINE_PARAMETER", "REQUIRED_OPTIONS", "TemplateOption", "flex_template_spec", "template_options"]
