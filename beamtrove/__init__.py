"""beamtrove: LLM pretraining data from web crawls, on Apache Beam."""

from beamtrove.dead_letter import DeadLetter
from beamtrove.document import Document, DocumentCoder, Media

__version__ = "0.9.0"

__all__ = ["DeadLetter", "Document", "DocumentCoder", "Media", "__version__"]
