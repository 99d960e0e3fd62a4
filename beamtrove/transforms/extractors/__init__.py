"""Extractors: from raw HTML to the main text of a page."""

from beamtrove.transforms.extractors.base import Extract, ExtractionTimeout, Extractor
from beamtrove.transforms.extractors.readability import ReadabilityInscriptis
from beamtrove.transforms.extractors.resiliparse import Resiliparse
from beamtrove.transforms.extractors.trafilatura import Trafilatura

__all__ = ["Extract", "ExtractionTimeout", "Extractor", "ReadabilityInscriptis", "Resiliparse", "Trafilatura"]
