# One image for both ends of a beamtrove Dataflow Flex Template: Dataflow's launcher VM runs it to build the
# pipeline and submit the job, and the workers run it as their SDK container (the spec that
# `beamtrove dataflow build-template` writes names it as sdkContainerImage). One image means the job is built
# and executed by the same beamtrove, Beam, Python and assets.
#
#   docker build -t REGION-docker.pkg.dev/PROJECT/REPOSITORY/beamtrove:TAG . && docker push ...
#
# Google ships the template launcher binary only in its template base images; pin one of their release tags
# with --build-arg LAUNCHER_IMAGE=... for reproducible builds.
ARG LAUNCHER_IMAGE=gcr.io/dataflow-templates-base/python311-template-launcher-base:latest
# Beam's own SDK image, of the Beam version setup.py pins: it brings the worker boot program and a Beam whose
# worker harness matches the SDK that builds the job. Its Python must be the launcher base's (3.11 both).
# `beamtrove dataflow build-image --local-base` passes, for both, a base made from Debian packages with Beam's
# boot program laid out as in Beam's image, and an empty launcher folder: its image is a worker image only.
ARG SDK_IMAGE=apache/beam_python3.11_sdk:2.77.0

FROM ${LAUNCHER_IMAGE} AS launcher

FROM ${SDK_IMAGE}

COPY --from=launcher /opt/google/dataflow/ /opt/google/dataflow/

WORKDIR /template
# setup.py reads README.md and the version; the sources stay here after the install because the launcher stages
# them again through FLEX_TEMPLATE_PYTHON_SETUP_FILE below. The dependencies are installed first, from setup.py
# alone, so that a rebuild after a change to beamtrove's code reuses that layer.
COPY setup.py README.md ./
COPY beamtrove/__init__.py beamtrove/
# The s3 extra too: --dump reads Common Crawl from s3://commoncrawl unless --cc_base says otherwise.
RUN pip install --no-cache-dir ".[s3]"
COPY beamtrove/ beamtrove/
RUN pip install --no-cache-dir --no-deps --force-reinstall .

# Extraction forks worker processes while gRPC's threads run; its fork handlers would only warn that they are skipped.
ENV GRPC_ENABLE_FORK_SUPPORT=false

# The language-ID model and URL blocklist go into the image, so fineweb's default --lid_model and
# --url_blocklist name the same files on the launcher VM, which checks them, and on every worker, which reads them.
ENV BEAMTROVE_ASSETS=/opt/beamtrove/assets
RUN beamtrove assets fetch

# The launcher runs this file with one --name=value argument per template parameter.
ENV FLEX_TEMPLATE_PYTHON_PY_FILE=/template/beamtrove/execution/dataflow/launch.py
# The launcher passes this as --setup_file, so Beam stages beamtrove as an sdist: a launch whose workers run
# Beam's stock image instead of this one (sdk_container_image overridden) still has beamtrove on them.
ENV FLEX_TEMPLATE_PYTHON_SETUP_FILE=/template/setup.py

# Workers start the SDK harness through the entrypoint. Dataflow starts python_template_launcher itself on the
# launcher VM, so the entrypoint belongs to the workers, as Google lays out images that are both.
ENTRYPOINT ["/opt/apache/beam/boot"]
