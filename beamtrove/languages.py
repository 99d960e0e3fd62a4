"""A document's language as the steps that depend on it name it: one key from its metadata.

Language ID writes ``language`` (and, with a GlotLID-style model, ``language_script``) into a document's
metadata, as DataTrove does: lid.176 gives ``{"language": "th"}``, GlotLID ``{"language": "tha",
"language_script": "Thai"}``. Every step that looks a language up (word splitting, FineWeb-2's per-language
thresholds, output folders) reads it through :func:`language_key`: ``"th"`` or ``"tha_Thai"``, the labels the
two models predict and the names of FineWeb-2's configs. This module imports nothing heavy.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "LANGUAGE",
    "LANGUAGE_SCORE",
    "LANGUAGE_SCRIPT",
    "join_language",
    "language_key",
    "split_language",
    "top_language_score_key",
]

#: The metadata keys language ID writes (DataTrove's names).
LANGUAGE, LANGUAGE_SCRIPT, LANGUAGE_SCORE = "language", "language_script", "language_score"


def join_language(language: str, script: str | None) -> str:
    """``"tha", "Thai"`` -> ``"tha_Thai"``; a language without a script stays as it is."""
    return f"{language}_{script}" if script else language


def split_language(key: str) -> tuple[str, str | None]:
    """``"tha_Thai"`` -> ``("tha", "Thai")``; ``"th"`` -> ``("th", None)``.

    A label's script is its last part when that is a four-letter ISO 15924 name (capitalized), as GlotLID's are.
    """
    language, _, script = key.rpartition("_")
    if language and len(script) == 4 and script[0].isupper() and script[1:].islower():
        return language, script
    return key, None


def top_language_score_key(label: str) -> str:
    """The metadata key of a label's score among a document's top languages: ``"deu_Latn"`` ->
    ``"top_language_deu_Latn_score"`` (DataTrove's ``keep_top_pairs_threshold`` names them so)."""
    return f"top_language_{label}_score"


def language_key(metadata: Mapping[str, Any]) -> str | None:
    """The language of a document's metadata as one key (``"tha_Thai"``, ``"th"``), or None when it has none."""
    language = metadata.get(LANGUAGE)
    if not isinstance(language, str) or not language:
        return None
    script = metadata.get(LANGUAGE_SCRIPT)
    return join_language(language, script if isinstance(script, str) and script else None)
