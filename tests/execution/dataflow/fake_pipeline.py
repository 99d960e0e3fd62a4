"""A pipeline declaration for the template tests: its options are plain argparse definitions, not Beam's."""

from __future__ import annotations

from beamtrove.options import Option, declared
from beamtrove.pipelines.common import documents_sink, row_reader
from beamtrove.pipelines.spec import PipelineSpec


class Options:
    """Options of the fake pipeline (not a PipelineOptions subclass, so Beam never sees them)."""

    _add_argparse_args = declared(
        Option("fake_threshold", "A threshold. Default: %(default)s.", float, 0.5),
        Option("fake_mode", "A mode.", default="a", choices=("a", "b")),
        Option("fake_flag", "A flag.", flag=True),
    )


class ListOptions:
    """An option a template parameter cannot hold."""

    @classmethod
    def _add_argparse_args(cls, parser):
        parser.add_argument("--fake_list", nargs="+", help="Several values at once.")


SPEC = PipelineSpec(
    name="fake",
    description="A pipeline that only exists for the tests.",
    options=(Options,),
    reader=row_reader,
    steps=(),
    sink=documents_sink,
)
