"""C4's line-level cleaning and bad-words rule (Raffel et al. 2020, section 2.2), and mC4's paragraph rule."""

from __future__ import annotations

import dataclasses
import hashlib
import re

from beamtrove.document import Document
from beamtrove.fs import filesystem, read_lines
from beamtrove.text import count_sentences
from beamtrove.transforms.filters.base import DocumentFilter, Drop, Verdict

__all__ = ["END_PUNCTUATION", "C4BadWordsFilter", "C4ParagraphFilter", "C4QualityFilter"]

_CITATION = re.compile(r"\[\d*\]|\[edit\]|\[citation needed\]")
#: What a line that ends a sentence ends with, for C4 (and DataTrove's line statistics).
END_PUNCTUATION = (".", "?", "!", '"', "'")
_POLICY_PHRASES = ("terms of use", "privacy policy", "cookie policy", "uses cookies", "use of cookies", "use cookies")


@dataclasses.dataclass
class C4QualityFilter(DocumentFilter):
    """Keeps C4's clean lines of a document and drops documents left too short.

    Lines are removed when a word exceeds ``max_word_length`` characters, when
    they do not end in terminal punctuation (``filter_no_terminal_punct``; an
    ellipsis does not count), have fewer than ``min_words_per_line`` words,
    mention "javascript", or hold a cookie/terms-of-use phrase. Wikipedia-style
    citations (``[1]``, ``[edit]``) are stripped first. A whole document is
    dropped for "lorem ipsum" (``lorem_ipsum``), a curly bracket
    (``curly_bracket``) or fewer than ``min_num_sentences`` sentences in the
    kept lines (``too_few_sentences``). FineWeb ran it with
    ``filter_no_terminal_punct=False``. ``-1`` disables a numeric rule.
    """

    name = "c4_quality"

    remove_citations: bool = True
    filter_no_terminal_punct: bool = True
    min_num_sentences: int = 5
    min_words_per_line: int = 3
    max_word_length: int = 1000
    filter_lorem_ipsum: bool = True
    filter_javascript: bool = True
    filter_curly_bracket: bool = True
    filter_policy: bool = True

    def filter(self, document: Document) -> Verdict:
        kept_lines = []
        sentences = 0
        for raw_line in document.text.splitlines():
            line = raw_line.strip()
            words = line.split()
            if self.max_word_length != -1 and any(len(word) > self.max_word_length for word in words):
                continue
            if self.remove_citations:
                line = _CITATION.sub("", line)
            if self.filter_no_terminal_punct and (not line.endswith(END_PUNCTUATION) or line.endswith("...")):
                continue
            if len(words) < self.min_words_per_line:
                continue
            lowered = line.lower()
            if self.filter_lorem_ipsum and "lorem ipsum" in lowered:
                return Drop("lorem_ipsum")
            if self.filter_javascript and "javascript" in lowered:
                continue
            if self.filter_curly_bracket and "{" in line:
                return Drop("curly_bracket")
            if self.filter_policy and any(phrase in lowered for phrase in _POLICY_PHRASES):
                continue
            if self.min_num_sentences != -1:
                sentences += count_sentences(line)
            kept_lines.append(line)
        if sentences < self.min_num_sentences:
            return Drop("too_few_sentences")
        return dataclasses.replace(document, text="\n".join(kept_lines).strip())


@dataclasses.dataclass
class C4ParagraphFilter(DocumentFilter):
    """Drops documents without ``min_paragraphs`` lines of ``min_paragraph_length`` characters or more.

    mC4's paragraph rule (Xue et al. 2021), as DataTrove applies it: a
    paragraph is a line (text between ``\\n`` characters), and its length
    counts every character of it, spaces included. Drop reason:
    ``< <min_paragraphs> paragraphs`` (DataTrove's).
    """

    name = "c4_paragraph"

    min_paragraphs: int = 3
    min_paragraph_length: int = 200

    def filter(self, document: Document) -> Verdict:
        long_lines = sum(len(line) >= self.min_paragraph_length for line in document.text.split("\n"))
        if long_lines < self.min_paragraphs:
            return Drop(f"< {self.min_paragraphs} paragraphs")
        return document


# Languages written without spaces, where a bad word may sit inside a longer word.
_UNSPACED_LANGUAGES = frozenset({"ja", "th", "zh"})


class C4BadWordsFilter(DocumentFilter):
    """Drops documents holding a word of the "List of Dirty, Naughty, Obscene or Otherwise Bad Words".

    The lists (LDNOOBW, one file per language code, one word per line) are read
    from ``words_dir``; the document's language comes from its ``language``
    metadata. Drop reason: ``badwords_<lang>``. Documents in a language without
    a list are kept, or raise (a dead letter) with ``fail_on_missing_language``.

    Args:
        words_dir: Folder (local path or fsspec URL) holding ``<lang>`` files.
        languages: The language codes to load.
        keep_fraction: Fraction of documents with bad words kept anyway,
            chosen by a hash of the document id and ``seed`` so reruns agree.
        default_language: Language of documents without ``language`` metadata.
        fail_on_missing_language: Raise for a language without a list.
        seed: Seed of the ``keep_fraction`` choice.
    """

    name = "c4_badwords"

    def __init__(
        self,
        words_dir: str,
        languages: tuple[str, ...] = ("en",),
        keep_fraction: float = 0.0,
        default_language: str = "en",
        fail_on_missing_language: bool = False,
        seed: int = 0,
    ):
        self.words_dir = words_dir.rstrip("/")
        self.languages = tuple(languages)
        self.keep_fraction = keep_fraction
        self.default_language = default_language
        self.fail_on_missing_language = fail_on_missing_language
        self.seed = seed
        for language in self.languages:
            path = f"{self.words_dir}/{language}"
            if not filesystem(path)[0].exists(path):
                raise FileNotFoundError(
                    f"No bad-words list for {language!r} at {path}: put the LDNOOBW list of that language there "
                    "(github.com/LDNOOBW/List-of-Dirty-Naughty-Obscene-and-Otherwise-Bad-Words)."
                )

    def setup(self) -> None:
        self._patterns = {}
        for language in self.languages:
            lines = read_lines(f"{self.words_dir}/{language}")
            words = sorted({line.strip() for line in lines if line.strip()}, key=len, reverse=True)
            alternatives = "|".join(map(re.escape, words))
            if language in _UNSPACED_LANGUAGES:
                self._patterns[language] = re.compile(alternatives)
            else:
                self._patterns[language] = re.compile(rf"(?:\W|^)(?:{alternatives})(?:\W|$)")

    def _kept_anyway(self, document: Document) -> bool:
        digest = hashlib.blake2b(f"{self.seed}:{document.id}".encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big") / 2**64 < self.keep_fraction

    def filter(self, document: Document) -> Verdict:
        language = document.metadata.get("language", self.default_language)
        pattern = self._patterns.get(language)
        if pattern is None:
            if self.fail_on_missing_language:
                raise ValueError(f"No bad-words list loaded for language {language!r}.")
            return document
        if pattern.search(document.text.lower()) and not self._kept_anyway(document):
            return Drop(f"badwords_{language}")
        return document
