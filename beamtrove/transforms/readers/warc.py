"""The Beam source of WARC, ARC and WET files; :mod:`beamtrove.formats.warc` says which records become documents."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from beamtrove.formats.warc import HTML_MIME_TYPES, WarcParser
from beamtrove.transforms.readers.base import FileReader

__all__ = ["ReadWarc"]


class ReadWarc(FileReader):
    """Reads WARC, ARC and WET files (plain or gzipped) as documents.

    Example::

        pages = p | "ReadWarc" >> ReadWarc("gs://bucket/crawl/*.warc.gz")
        pages, dead_letters = p | ReadWarc("crawl/").with_dead_letters()

    Stats (``beamtrove/<label>``): ``in`` counts every record read, ``out``
    the documents, ``skipped.<type>_record`` other record types,
    ``skipped.non_html_payload``, ``skipped.empty_payload``,
    ``skipped.payload_too_large``, and ``errors.corrupt_archive``,
    ``errors.truncated_record``, ``errors.truncated`` (a file cut inside a
    gzip member), ``errors.undecodable``.
    """

    def __init__(
        self,
        paths: str | Iterable[str],
        *,
        record_types: Iterable[str] = ("response", "conversion", "resource"),
        mime_types: Iterable[str] = HTML_MIME_TYPES,
        max_payload_bytes: int | None = None,
        **options: Any,
    ):
        """Matches the input files.

        Args:
            paths: WARC files, directories or glob patterns (paths or URLs).
            record_types: WARC record types that become documents.
            mime_types: Payload types accepted for response and resource
                records (conversion records are text by definition).
            max_payload_bytes: Payloads longer than this are skipped, to keep
                pathological pages out of memory and extraction.
            **options: ``skip``, ``limit``, ``storage_options`` and
                ``progress_interval``, as :class:`FileReader` takes them.
        """
        super().__init__(
            paths,
            WarcParser(record_types, mime_types, max_payload_bytes),
            **options,
        )
