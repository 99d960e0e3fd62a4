"""Word and sentence splitting for the quality filters, and the text normalization dedup and decontamination share.

The Gopher, C4 and FineWeb rules count words and sentences. DataTrove counts
them with spaCy's rule-based English tokenizer; beamtrove reimplements the
rules of that tokenizer that change these counts (see :func:`split_words`)
without depending on spaCy, and works for any script: text without spaces
(Chinese, Japanese, Thai, ...) is split into one token per character, the unit
those rules can still count. Where exact agreement with DataTrove matters more
(text in other languages, where spaCy's English exceptions such as ``im`` →
``i m`` and ``cannot`` → ``can not`` apply too), :func:`word_splitter` gives
spaCy's tokenizer itself, by name; and, as DataTrove does since 0.4, each
language's own tokenizer, chosen by the document's language
(:mod:`beamtrove.word_tokenizers`).

Dedup and decontamination compare texts after :func:`normalize_text`, as
DataTrove's do after its default text simplification: a text gives the same
words in both tools, and a decontamination index the same n-grams.
"""

from __future__ import annotations

import functools
import importlib.util
import itertools
import re
import string
import sys
import unicodedata
from collections.abc import Callable, Iterable, Sequence

import regex

from beamtrove.word_tokenizers import check_languages, language_words

__all__ = [
    "TERMINAL_PUNCTUATION",
    "WORD_SPLITTERS",
    "check_word_splitter",
    "count_sentences",
    "find_duplicates",
    "is_language_splitter",
    "is_punctuation",
    "normalize_text",
    "spaced_words",
    "split_words",
    "word_splitter",
]

#: Names of the word splitters: ``beamtrove`` (:func:`split_words`), ``spacy`` (the tokens of spaCy's blank
#: English pipeline, stripped, empty ones dropped: DataTrove's words; needs ``pip install 'beamtrove[spacy]'``)
#: and ``language`` (each document split by the tokenizer DataTrove assigns to its language, see
#: :mod:`beamtrove.word_tokenizers`; needs ``pip install 'beamtrove[multilingual]'``). A language key of the
#: word tokenizer table (``"tha_Thai"``, ``"th"``) names a splitter too: that language's, for every document.
WORD_SPLITTERS: tuple[str, ...] = ("beamtrove", "spacy", "language")

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
_PREFIX_MARK = rf"[§%=—–{_PUNCT}{_QUOTES}{_CURRENCY}\p{{So}}]"
_SUFFIX_MARK = rf"[{_PUNCT}{_QUOTES}\p{{So}}—–]"
_PREFIX = regex.compile(rf"(?:{_ELLIPSIS}|{_PREFIX_MARK}|\+(?![0-9]))")
_SUFFIX = regex.compile(
    rf"""(?:{_ELLIPSIS}|{_SUFFIX_MARK}|['’][sS]
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


# The most characters a suffix but the ellipsis spans (a unit such as "km/h"), and the most its lookbehinds read.
_SUFFIX_SPAN = max(3, *map(len, _UNITS.split("|")))
_SUFFIX_LOOKBEHIND = 2
# No middle _whole keeps but a run of initials (U.S.A.) is longer than this ("shouldn't" has 9 characters).
_LONGEST_NAMED_WHOLE = 16
# Runs of marks are split off at once only while the middle stays longer than this, where no step of the loop
# can find the middle whole, nor a suffix search or a prefix match read past the other end.
_RUN_MARGIN = 2 * _LONGEST_NAMED_WHOLE
_INITIALS = regex.compile(r"(?:[A-Za-z]\.)*")
# Characters that are a prefix whatever follows them ("+" is not: "+1" stays whole), and characters that are a
# suffix whatever precedes them, or a dot after a mark or quote, read backwards from where the match ends. No
# longer suffix ends with any of them: only the ellipsis ends with a dot, and it needs two.
_LONE_PREFIXES = regex.compile(rf"(?:…|{_PREFIX_MARK})+")
_LONE_SUFFIXES = regex.compile(rf"(?r)(?:[…{_SUFFIX_MARK[1:]}|(?<=[{_QUOTES}{_PUNCT}])\.)+")


@functools.lru_cache(maxsize=4096)
def _is_lone_prefix(char: str) -> bool:
    return _LONE_PREFIXES.fullmatch(char) is not None


@functools.lru_cache(maxsize=4096)
def _ends_lone_suffix(pair: str) -> bool:
    """True when the last character of ``pair`` (one or two characters) is a suffix, after the first."""
    return _LONE_SUFFIXES.match(pair, len(pair) - 1) is not None


class _Middle:
    """What is left of a chunk, ``chunk[start:end]``, as its leading and trailing marks are split off one at a time.

    Each step costs the same whatever the length of the middle, where cutting the chunk anew and searching all of
    it for a suffix at every step made a run of marks cost the square of its length: a suffix is searched for
    among the last characters only, a side that found no mark is not searched again until the other side's steps
    could change that, the initials _whole keeps are read once, and a run of marks that the steps would split off
    one by one, each making one token, is split off at once (see :meth:`split_runs`).
    """

    def __init__(self, chunk: str):
        self.chunk = chunk
        self.start = 0
        self.end = len(chunk)
        self._no_prefix_at = self._no_suffix_at = -1
        self._initials_from = self._initials_end = -1
        self._prefix_run_end = self._suffix_run_start = -1

    def __bool__(self) -> bool:
        return self.start < self.end

    def __str__(self) -> str:
        return self.chunk[self.start : self.end]

    def strip_prefix(self) -> str | None:
        """Splits off and returns the leading mark, or None."""
        chunk, start, end = self.chunk, self.start, self.end
        if _is_lone_prefix(chunk[start]):
            self.start += 1
            return chunk[start]
        # Only "+" or a dot run reaching the end would see the end move.
        if self._no_prefix_at == start and end - start > 2:
            return None
        prefix = _PREFIX.match(chunk, start, end)
        if prefix is None:
            self._no_prefix_at = start
            return None
        self.start = prefix.end()
        return prefix.group()

    def strip_suffix(self) -> str | None:
        """Splits off and returns the trailing mark, or None."""
        chunk, start, end = self.chunk, self.start, self.end
        if _ends_lone_suffix(chunk[max(start, end - 2) : end]):
            begin = end - 1
        elif end - start <= _SUFFIX_SPAN + _SUFFIX_LOOKBEHIND:
            # The lookbehinds must not see past the start: search the middle itself.
            suffix = _SUFFIX.search(chunk[start:end])
            if suffix is None:
                return None
            begin = start + suffix.start()
        elif self._no_suffix_at == end:
            # What the search reads has not changed since it found nothing.
            return None
        else:
            suffix = _SUFFIX.search(chunk, end - _SUFFIX_SPAN, end)
            if suffix is None:
                self._no_suffix_at = end
                return None
            begin = suffix.start()
            if begin == end - _SUFFIX_SPAN and chunk[begin] == ".":
                # Only the ellipsis spans that far; a search of the middle finds the start of its dot run.
                while begin > start and chunk[begin - 1] == ".":
                    begin -= 1
        self.end = begin
        return chunk[begin:end]

    def whole(self) -> list[str] | None:
        """:func:`_whole` of the middle."""
        start, end = self.start, self.end
        if end - start <= _LONGEST_NAMED_WHOLE:
            return _whole(self.chunk[start:end])
        if (end - start) % 2 == 0 and end <= self._initials():
            return [self.chunk[start:end]]
        return None

    def _initials(self) -> int:
        """Where the initials starting the middle end."""
        if self._initials_from != self.start:
            # A prefix never starts with a letter: once initials start the middle, its start stays.
            self._initials_from = self.start
            self._initials_end = _INITIALS.match(self.chunk, self.start).end()
        return self._initials_end

    def split_runs(self, prefixes: list[str], suffixes: list[str]) -> None:
        """Takes at once the steps the loop of :func:`_split_chunk` would take one mark at a time.

        While marks that split off one character at a time start and end the middle, each step of the loop takes
        one from each side; while one side found nothing (and cannot until the other comes near), each takes one
        from the other. The middle stays long, so no step finds it whole; the last mark of a run stays for the
        steps, as the middle it leaves may be whole (initials, say).
        """
        chunk, start, end = self.chunk, self.start, self.end
        room = end - start - _RUN_MARGIN
        if room <= 0:
            return
        if self._prefix_run_end < start:
            lone = _LONE_PREFIXES.match(chunk, start)
            self._prefix_run_end = start if lone is None else lone.end()
        if self._suffix_run_start >= end or self._suffix_run_start < 0:
            lone = _LONE_SUFFIXES.match(chunk, 0, end)
            self._suffix_run_start = end if lone is None else lone.start()
        prefix_run = min(self._prefix_run_end, end) - start - 1
        suffix_run = end - max(self._suffix_run_start, start) - 1
        if prefix_run > 0 and suffix_run > 0:
            both = min(prefix_run, suffix_run, room // 2)
            prefixes.extend(chunk[start : start + both])
            suffixes.extend(reversed(chunk[end - both : end]))
            self.start, self.end = start + both, end - both
        elif prefix_run > 0 and self._no_suffix_at == end:
            taken = min(prefix_run, room)
            prefixes.extend(chunk[start : start + taken])
            self.start = start + taken
        elif suffix_run > 0 and self._no_prefix_at == start and not _is_lone_prefix(chunk[start]):
            taken = min(suffix_run, room, end - self._initials() - 1)
            if taken > 0:
                suffixes.extend(reversed(chunk[end - taken : end]))
                self.end = end - taken


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
    middle = _Middle(chunk)
    while middle:
        middle.split_runs(prefixes, suffixes)
        prefix = middle.strip_prefix()
        if prefix is not None:
            prefixes.append(prefix)
            whole = middle.whole()
            if whole is not None:
                return prefixes + whole + suffixes[::-1]
        suffix = middle.strip_suffix() if middle else None
        if suffix is not None:
            suffixes.append(suffix)
            whole = middle.whole()
            if whole is not None:
                return prefixes + whole + suffixes[::-1]
        if prefix is None and suffix is None:
            break
    return prefixes + (_split_middle(str(middle)) if middle else []) + suffixes[::-1]


# Words repeat: a chunk met before costs a lookup, in C, rather than a call of the rules, in Python.
@functools.lru_cache(maxsize=1 << 17)
def _chunk_tokens(chunk: str) -> tuple[str, ...]:
    return tuple(_split_chunk(chunk))


# Scripts written without spaces start at Thai (U+0E00): below it, a chunk of letters is one word.
_FIRST_WITHOUT_SPACES = "\u0e00"


def _splitting_chunks(chunks: list[str], joined: str) -> dict[str, tuple[str, ...]]:
    """The chunks some rule splits, each with its tokens (``joined`` is ``"".join(chunks)``)."""
    if joined.isascii() and joined.isalnum():
        # Plain words only, as most normalized texts are: no rule applies to any (see _split_chunk).
        return {}
    # Letters match no affix or infix rule (their marks, quotes, units after a digit, dots and apostrophes are
    # other characters): only the other chunks, each once, go through the rules or the cache of their tokens.
    return {
        chunk: tokens
        for chunk in set(chunks)
        if not ((chunk.isascii() and chunk.isalnum()) or (chunk.isalpha() and max(chunk) < _FIRST_WITHOUT_SPACES))
        and (tokens := _chunk_tokens(chunk)) != (chunk,)
    }


@functools.lru_cache(maxsize=8)
def _split_cached(text: str) -> tuple[str, ...]:
    chunks = text.split()
    split = _splitting_chunks(chunks, "".join(chunks))
    if not split:
        return tuple(chunks)
    return tuple(itertools.chain.from_iterable([split.get(chunk, (chunk,)) for chunk in chunks]))


def spaced_words(text: str) -> str:
    """The tokens of :func:`split_words` joined by single spaces; ``text`` itself when it is that already.

    For what reads the words from a text's bytes (bloom dedup hashes a normalized text's n-grams so): no tuple
    of the words is built, and a text whose chunks are its words, as most normalized texts', is not copied.
    """
    if text.isascii() and text.replace(" ", "").isalnum() and "  " not in text and text[:1] != " " != text[-1:]:
        # ASCII words between single spaces, and nothing else: found in C, no chunk made.
        return text
    chunks = text.split()
    joined = "".join(chunks)
    split = _splitting_chunks(chunks, joined)
    if split:
        spaced = {chunk: " ".join(tokens) for chunk, tokens in split.items()}
        return " ".join([spaced.get(chunk, chunk) for chunk in chunks])
    # Single spaces between the chunks and nowhere else: as many whitespace characters as gaps, all spaces.
    if len(text) - len(joined) == len(chunks) - 1 == text.count(" "):
        return text
    return " ".join(chunks)


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


def is_language_splitter(name: str) -> bool:
    """Whether the word splitter ``name`` splits by language: ``language``, or a language key (``"tha_Thai"``)."""
    return name not in _ENGLISH_SPLITTERS


# The splitters of English (whatever the text's language), which read no word tokenizer table.
_ENGLISH_SPLITTERS = ("beamtrove", "spacy")


def check_word_splitter(name: str, languages: Iterable[str] = (), *, word_tokenizers: str | None = None) -> None:
    """Fails fast on a word splitter this process cannot make.

    Args:
        name: One of :data:`WORD_SPLITTERS`, or a language key of the word tokenizer table (``"tha_Thai"``).
        languages: For ``language``: the languages the documents will be in (keys such as ``"tha_Thai"`` or
            ``"th"``), each of whose tokenizer must be usable here. Languages the table does not list are split
            by its fallback, which needs spaCy, as ``language`` always does.
        word_tokenizers: The word tokenizer table (DataTrove's ``tokenizer_assignment.csv``), path or fsspec
            URL; the fetched asset when None. Read for ``language`` and language keys only.

    Raises:
        ValueError: An unknown name, or a package (named in the message, with what to pip install) or model
            the splitter needs that this process lacks.
        FileNotFoundError: ``language`` or a language key, and no table at ``word_tokenizers``.
    """
    if not is_language_splitter(name):
        if name == "spacy" and importlib.util.find_spec("spacy") is None:
            raise ValueError("Splitting words with spaCy needs it installed: pip install 'beamtrove[spacy]'.")
        return
    if name == "language":
        check_languages([None, *languages], word_tokenizers)
        return
    try:
        check_languages([name], word_tokenizers, listed=True)
    except FileNotFoundError as missing:
        raise ValueError(
            f"The word splitter is one of {', '.join(WORD_SPLITTERS)} or a language of the word tokenizer table, "
            f"not {name!r}, and that table is not there to look it up: {missing}"
        ) from None
    except ValueError as problem:
        if "is not a language of" not in str(problem):
            raise
        raise ValueError(
            f"The word splitter is one of {', '.join(WORD_SPLITTERS)} or a language of the word tokenizer table "
            f"(tha_Thai, th, ...), not {name!r}."
        ) from None


def word_splitter(
    name: str, language: str | None = None, *, word_tokenizers: str | None = None
) -> Callable[[str], Sequence[str]]:
    """The word splitter called ``name``, for a document in ``language``; each is made once per process.

    Args:
        name: One of :data:`WORD_SPLITTERS`, or a language key of the word tokenizer table (``"tha_Thai"``,
            ``"th"``): that language's splitter for every document, as DataTrove's ``language=`` argument.
        language: For ``language``: the document's language key (:func:`beamtrove.languages.language_key` of
            its metadata). None, or a language the table does not list, is split by the table's fallback, spaCy's
            multi-language tokenizer (:data:`beamtrove.word_tokenizers.FALLBACK`), as DataTrove's is. Other
            names ignore it.
        word_tokenizers: The word tokenizer table, path or fsspec URL; the fetched asset when None.

    Raises:
        ValueError: An unknown name, or a package or model the splitter needs that this process lacks.
        FileNotFoundError: ``language`` or a language key, and no table at ``word_tokenizers``.
    """
    if name == "language":
        return language_words(language, word_tokenizers)
    return _named_splitter(name, word_tokenizers)


@functools.cache
def _named_splitter(name: str, word_tokenizers: str | None) -> Callable[[str], Sequence[str]]:
    if name == "beamtrove":
        return split_words
    if name != "spacy":
        check_word_splitter(name, word_tokenizers=word_tokenizers)
        return language_words(name, word_tokenizers)
    check_word_splitter(name)
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


# The marks DataTrove's text simplification turns into spaces: ASCII punctuation, common CJK and typographic
# marks, and the C0/C1 control characters except tab and newline (whitespace, folded later anyway). Other
# symbols (``€``, ``°``, ``¿``) and other scripts' punctuation (``،``, ``।``) stay, as parts of words.
_MARKS = (
    string.punctuation
    + "\u2013\u2014\u2019\u201c\u201d\u201e\u2026\u2236\u2501\u25ba\u00ab\u00b4\u00bb"
    + "\u3001\u3002\u3008\u3009\u300a\u300b\u300c\u300d\u3010\u3011"
    + "\uff01\uff05\uff08\uff09\uff0c\uff0e\uff11\uff1a\uff1b\uff1f\uff5e"
    + "".join(chr(code) for code in (*range(0, 9), *range(11, 32), *range(127, 160)))
)
# A class of a hundred characters: matched in C, where str.translate with a table looks up every character.
_MARK = re.compile(f"[{re.escape(_MARKS)}]")
# A number, with at most one decimal part after one of the separators in use across scripts.
_NUMBER = regex.compile(r"\p{Nd}+(?:[.,\u060c\u066b\u2396\u2397\u2398]\p{Nd}+)?")
# Runs of marks by the regex module's tables, which may be a newer Unicode than unicodedata's: they only find
# where to look, and unicodedata, whose NFD the text went through, says which are nonspacing.
_MARK_RUN = regex.compile(r"\p{M}+")


def _without_nonspacing(run: regex.Match) -> str:
    return "".join(char for char in run.group() if unicodedata.category(char) != "Mn")


def normalize_text(text: str) -> str:
    """``text`` as dedup and decontamination compare it: DataTrove's default text simplification.

    Lowercased; every number (``3``, ``3.14``, ``2,5``) becomes ``0``;
    punctuation and control characters become spaces; runs of whitespace
    become one space; accents are removed (NFD, combining marks dropped).
    Symbols such as ``€`` and ``°`` stay. Example: ``"Café  déjà-vu: 3.14 €!"``
    becomes ``"cafe deja vu 0 €"``.
    """
    text = " ".join(_MARK.sub(" ", _NUMBER.sub("0", text.lower())).split())
    if text.isascii():
        # NFD leaves ASCII as it is, and it holds no mark.
        return text
    return _MARK_RUN.sub(_without_nonspacing, unicodedata.normalize("NFD", text)).strip()
