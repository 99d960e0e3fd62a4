"""A pipeline module for the template tests: its options are plain argparse definitions, not registered with Beam."""

from __future__ import annotations

from beamtrove.options import add_option

DESCRIPTION = "A pipeline that only exists for the tests."


class Options:
    """Options of the fake pipeline (not a PipelineOptions subclass, so Beam never sees them)."""

    @classmethod
    def _add_argparse_args(cls, parser):
        add_option(parser, "fake_threshold", type=float, default=0.5, help="A threshold. Default: %(default)s.")
        add_option(parser, "fake_mode", choices=("a", "b"), default="a", help="A mode.")
        add_option(parser, "fake_flag", action="store_true", help="A flag.")


class ListOptions:
    """An option a template parameter cannot hold."""

    @classmethod
    def _add_argparse_args(cls, parser):
        parser.add_argument("--fake_list", nargs="+", help="Several values at once.")


SHARED_OPTIONS = ()


def build(pipeline, options) -> None:
    """Builds nothing."""
