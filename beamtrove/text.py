"""Word and sentence splitting for the quality filters.

The Gopher, C4 and FineWeb rules count words and sentences. DataTrove counts
them with spaCy's rule-based English tokenizer; beamtrove reimplements the
rules of that tokenizer that change these counts (see :func:`split_words`)
without depending on spaCy, and works for any script: text without spaces
(Chinese, Japanese, Thai, ...) is split into one token per character, the unit
those rules can still count. Where exact agreement with DataTrove matters more
(text in other languages, where spaCy's English exceptions such as ``im`` →
``i m`` and ``cannot`` → ``can not`` apply too), :func:`word_splitter` gives
spaCy's tokenizer itself, by name.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
import unicodedata
from collections.abc import Callable, Sequence

import regex

__all__ = [
    "TERMINAL_PUNCTUATION",
    "WORD_SPLITTERS",
    "check_word_splitter",
    "count_sentences",
    "find_duplicates",
    "is_punctuation",
    "split_words",
    "word_splitter",
]

#: Names of the word splitters: ``beamtrove`` (:func:`split_words`) and ``spacy`` (the tokens of spaCy's blank
#: English pipeline, stripped, empty ones dropped: DataTrove's words; needs ``pip install 'beamtrove[spacy]'``).
WORD_SPLITTERS: tuple[str, ...] = ("beamtrove", "spacy")

# Code points a property scan joins at once: all 1.1 M as strings at once would take ~100 MB in every process.
_SCAN_BLOCK = 1 << 16


def _with_property(pattern: str) -> tuple[str, ...]:
    """Every code point matching ``pattern`` (a ``\\p{...}`` class), in code point order."""
    matches = regex.compile(pattern)
    return tuple(
        character
        for start in range(0, sys.maxunicode + 1, _SCAN_BLOCK)
        for character in matches.findall("".join(map(chr, range(start, min(start + _SCAN_BLOCK, sys.maxunicode + 1)))))
    )


#: Unicode's sentence terminals (``.``, ``!``, ``?``, ``。``, ``।``, ...).
TERMINAL_PUNCTUATION: tuple[str, ...] = _with_property(r"\p{Sentence_Terminal}")

_PUNCT = r",:;!?¿؟¡()\[\]{}<>_#*&。？！，、；：～·।،۔؛٪"
_QUOTES = "'\"”“`‘´’‚„»«「」『』（）〔〕【】《》〈〉"
_CURRENCY = r"$£€¥฿₽₴₠₡₢₣₤₥₦₧₨₩₪₫₭₮₯₰₱₲₳₵₶₷₸₹₺₻₼₾₿"
_UNITS = (
    "km|km²|km³|m|m²|m³|dm|dm²|dm³|cm|cm²|cm³|mm|mm²|mm³|ha|µm|nm|yd|in|ft|kg|g|mg|µg|t|lb|oz|m/s|km/h|kmh|mph"
    "|hPa|Pa|mbar|mb|MB|kb|KB|gb|GB|tb|TB|T|G|M|K|%|am|pm"
)
_ELLIPSIS = r"\.\.+|…"
# Leading and trailing characters split off a whitespace-separated chunk, one at a time.
_PREFIX = regex.compile(rf"(?:{_ELLIPSIS}|[§%=—–{_PUNCT}{_QUOTES}{_CURRENCY}\p{{So}}]|\+(?![0-9]))")
_SUFFIX = regex.compile(
    rf"""(?:{_ELLIPSIS}|[{_PUNCT}{_QUOTES}\p{{So}}—–]|['’][sS]
    |(?<=[0-9])(?:\+|[{_CURRENCY}]|{_UNITS})
    |(?<=[0-9\p{{Ll}}%²+\-{_QUOTES}{_PUNCT}])\.|(?<=\p{{Lu}}\p{{Lu}})\.|(?<=°[FfCcKk])\.
    |(?<=\p{{L}})['’](?:m|re|ve|ll|d))$""",
    regex.VERBOSE,
)
# Characters that split a chunk from the inside: hyphens and slashes between words, ...
_INFIX = regex.compile(
    rf"{_ELLIPSIS}|(?<=[0-9])[+\-*^](?=[0-9-])|(?<=[\p{{Ll}}{_QUOTES}])\.(?=[\p{{Lu}}{_QUOTES}])"
    r"|(?<=\p{L}),(?=\p{L})|(?<=[\p{L}0-9])(?:---|--|——|—|–|-|~)(?=\p{L})|(?<=[\p{L}0-9])[:<>=/](?=\p{L})"
)
_URL = regex.compile(r"(?:[a-z][a-z0-9+.-]*://|www\.)\S+", regex.IGNORECASE)
# Chunks that stay whole although an affix rule would split them: abbreviations.
_ABBREVIATION = regex.compile(
    r"(?:[A-Za-z]\.)+|(?:Adm|Bros|Co|Corp|Dr|Gen|Gov|Inc|Jr|Ltd|Messrs|Mr|Mrs|Ms|Mt|Prof|Rep|Rev|Sen|St|vs|co"
    r"|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec|Ph\.D)\."
)
# English negations split as do|n't, ca|n't, wo|n't.
_NEGATION = regex.compile(
    r"(ai|are|ca|could|dare|did|do|does|had|has|have|is|may|might|must|need|ought|sha|should|was|were|wo|would)"
    r"(n['’]t)",
    regex.IGNORECASE,
)
_SCRIPTS_WITHOUT_SPACES = regex.compile(
    r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}\p{Tibetan}\p{Yi}]"
)
_SCRIPTS_WITHOUT_SPACES_SPLIT = regex.compile(f"({_SCRIPTS_WITHOUT_SPACES.pattern})")


@functools.lru_cache(maxsize=4096)
def is_punctuation(token: str) -> bool:
    """True when every character of ``token`` is punctuation, a symbol or a control character."""
    return all(unicodedata.category(char)[0] in "PSC" for char in token)


def _whole(chunk: str) -> list[str] | None:
    """The tokens of a chunk no rule may split further, or None."""
    if _ABBREVIATION.fullmatch(chunk):
        return [chunk]
    negation = _NEGATION.fullmatch(chunk)
    if negation:
        return [negation.group(1), negation.group(2)]
    return None


def _split_middle(middle: str) -> list[str]:
    if _URL.fullmatch(middle):
        return [middle]
    tokens = []
    start = 0
    for infix in _INFIX.finditer(middle):
        if infix.start() > start:
            tokens.append(middle[start : infix.start()])
        tokens.append(infix.group())
        start = infix.end()
    if start < len(middle):
        tokens.append(middle[start:])
    return tokens


def _split_chunk(chunk: str) -> list[str]:
    if chunk.isascii() and chunk.isalnum():
        # Most chunks are plain words: no rule applies to them.
        return [chunk]
    whole = _whole(chunk)
    if whole is not None:
        return whole
    if _SCRIPTS_WITHOUT_SPACES.search(chunk):
        # No spaces to find words by: every character of those scripts is a token.
        tokens = []
        for piece in _SCRIPTS_WITHOUT_SPACES_SPLIT.split(chunk):
            if _SCRIPTS_WITHOUT_SPACES.fullmatch(piece):
                tokens.append(piece)
            elif piece:
                tokens.extend(_split_chunk(piece))
        return tokens
    prefixes, suffixes = [], []
    middle = chunk
    while middle:
        prefix = _PREFIX.match(middle)
        if prefix:
            prefixes.append(prefix.group())
            middle = middle[prefix.end() :]
            whole = _whole(middle)
            if whole is not None:
                return prefixes + whole + suffixes[::-1]
        suffix = _SUFFIX.search(middle) if middle else None
        if suffix:
            suffixes.append(suffix.group())
            middle = middle[: suffix.start()]
            whole = _whole(middle)
            if whole is not None:
                return prefixes + whole + suffixes[::-1]
        if not prefix and not suffix:
            break
    return prefixes + (_split_middle(middle) if middle else []) + suffixes[::-1]


@functools.lru_cache(maxsize=8)
def _split_cached(text: str) -> tuple[str, ...]:
    return tuple(token for chunk in text.split() for token in _split_chunk(chunk))


def split_words(text: str) -> tuple[str, ...]:
    """The word tokens of ``text``, punctuation tokens included.

    Follows the rules of spaCy's English tokenizer, which DataTrove counts
    words with: each whitespace-separated chunk loses leading and trailing
    punctuation one mark at a time, English clitics (``n't``, ``'s``, ``'re``)
    split off, hyphens, slashes and ellipses between words split it inside, and
    abbreviations (``U.S.``, ``Mr.``), URLs, e-mail addresses and numbers stay
    whole. Chunks in scripts written without spaces (Chinese, Japanese, Thai,
    ...) give one token per character.
    """
    # The filters of one pipeline split the same text in turn: the cache saves
    # all but the first.
    return _split_cached(text)


def check_word_splitter(name: str) -> None:
    """Fails fast on a word splitter this process cannot make.

    Raises:
        ValueError: An unknown name, or ``spacy`` without spaCy installed.
    """
    if name not in WORD_SPLITTERS:
        raise ValueError(f"The word splitter is one of {', '.join(WORD_SPLITTERS)}, not {name!r}.")
    if name == "spacy" and importlib.util.find_spec("spacy") is None:
        raise ValueError("Splitting words with spaCy needs it installed: pip install 'beamtrove[spacy]'.")


@functools.cache
def word_splitter(name: str) -> Callable[[str], Sequence[str]]:
    """The word splitter called ``name`` (one of :data:`WORD_SPLITTERS`), made once per process.

    Raises:
        ValueError: An unknown name, or ``spacy`` without spaCy installed.
    """
    check_word_splitter(name)
    if name == "beamtrove":
        return split_words
    import spacy  # noqa: PLC0415 - an optional dependency, loaded by the processes that split with it

    tokenizer = spacy.blank("en").tokenizer

    # As split_words: the filters of one pipeline split the same text in turn.
    @functools.lru_cache(maxsize=8)
    def words(text: str) -> tuple[str, ...]:
        return tuple(word for word in (token.text.strip() for token in tokenizer(text)) if word)

    return words


def count_sentences(text: str) -> int:
    """How many sentences ``text`` holds.

    A sentence ends at a token made of one terminal punctuation mark once a
    token that is not punctuation follows it, so closing quotes and brackets
    stay with the sentence they close. Non-blank text has at least one.
    """
    sentences = 0
    ended = True
    for token in split_words(text):
        if len(token) == 1 and token in _TERMINALS:
            ended = True
        elif ended and not is_punctuation(token):
            sentences += 1
            ended = False
    return sentences


_TERMINALS = frozenset(TERMINAL_PUNCTUATION)


def find_duplicates(items: list[str]) -> tuple[int, int]:
    """How many ``items`` repeat an earlier one, and how many characters those repeats hold."""
    seen = set()
    repeats = repeated_chars = 0
    for item in items:
        if item in seen:
            repeats += 1
            repeated_chars += len(item)
        else:
            seen.add(item)
    return repeats, repeated_chars
