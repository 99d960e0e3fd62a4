"""Each language's words, split by the tokenizer DataTrove assigns to it.

DataTrove (0.4 and later) splits a text's words with a tokenizer chosen by its language and script, from the
table ``tokenizer_assignment.csv`` it ships (``beamtrove assets fetch`` puts the 0.10.1 table in the asset
cache; :func:`~beamtrove.assets.default_word_tokenizers`). Each row names a language (ISO 639-3 ``code_3``, maybe
ISO 639-1 ``code_1``) in a script, the kind of tokenizer (``type``) and that tokenizer's language (``tok_code``).
:func:`read_word_tokenizers` reads it into the lookup DataTrove builds, keyed by the labels language ID gives
(see :func:`beamtrove.languages.language_key`), and :func:`language_words` makes the splitter of a key: the
words DataTrove's ``load_word_tokenizer(key).word_tokenize(text)`` gives, each stripped, empty ones dropped.

The kinds, each backed by an optional package (``pip install 'beamtrove[multilingual]'`` installs those that
work offline):

* ``spacy``: spaCy's blank pipeline of the language (``vi`` segmented by pyvi); ``zh`` is jieba's words, as
  spaCy's pipeline with jieba gives them; ``ja`` is SudachiPy's split mode A, as DataTrove's own Japanese
  tokenizer gives it, on the cuts DataTrove makes every 40,000 bytes.
* ``thai``: PyThaiNLP's ``newmm-safe``. ``indic``: Indic NLP's ``trivial_tokenize``. ``kiwi``: Kiwi's
  skip-bigram model (kiwipiepy before 0.22, which dropped it). ``khmer``: khmer-nltk. ``lao``: LaoNLP.
  ``burmese``: pyidaungsu. ``tibetan``: botok, with its ``general`` dialect pack already downloaded (botok
  downloads it from GitHub on first use). ``stanza``: Stanza's tokenizer, its model already downloaded.
* ``whitespace``: spaCy's multi-language (``xx``) tokenizer, which splits at spaces and punctuation.

A text without a language, or in one the table does not list, is split by the ``whitespace`` kind, DataTrove's
fallback tokenizer (:data:`FALLBACK`).
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import importlib.metadata
import importlib.util
import io
import itertools
import os
import pathlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence

from beamtrove.assets import default_word_tokenizers
from beamtrove.fs import filesystem, open_url

__all__ = [
    "FALLBACK",
    "KINDS",
    "Assignment",
    "check_languages",
    "language_words",
    "read_word_tokenizers",
    "words_of",
]


@dataclasses.dataclass(frozen=True)
class Assignment:
    """The tokenizer of a language.

    Attributes:
        kind: One of :data:`KINDS`.
        code: The language the tokenizer is told (``tok_code``: a spaCy, Stanza or Indic NLP language), or ``""``
            for a kind with one language.
    """

    kind: str
    code: str = ""

    def __str__(self) -> str:
        return f"{self.kind}:{self.code}" if self.code else self.kind


#: DataTrove's tokenizer classes (the table's ``type``) -> beamtrove's kinds.
_KIND_OF_TYPE = {
    "SpaCyTokenizer": "spacy",
    "StanzaTokenizer": "stanza",
    "ThaiTokenizer": "thai",
    "IndicNLPTokenizer": "indic",
    "KiwiTokenizer": "kiwi",
    "KhmerTokenizer": "khmer",
    "LaoTokenizer": "lao",
    "TibetanTokenizer": "tibetan",
    "BurmeseTokenizer": "burmese",
    "WhitespaceTokenizer": "whitespace",
}
#: The kinds of tokenizer.
KINDS: tuple[str, ...] = tuple(_KIND_OF_TYPE.values())
#: What splits a text in no language, or in one the table does not list: spaCy's multi-language tokenizer.
FALLBACK = Assignment("whitespace")

# (module, what to pip install) each kind needs; spaCy's languages with a segmenter of their own need it too.
_PACKAGES = {
    "spacy": [("spacy", "spacy")],
    "stanza": [("stanza", "stanza")],
    "thai": [("pythainlp", "pythainlp")],
    "indic": [("indicnlp", "indic-nlp-library")],
    "kiwi": [("kiwipiepy", "kiwipiepy<0.22")],
    "khmer": [("khmernltk", "khmer-nltk")],
    "lao": [("laonlp", "laonlp")],
    "tibetan": [("botok", "botok")],
    # --no-deps: pyidaungsu-numpy2 requires fasttext-numpy2-wheel, whose fasttext module overwrites the
    # fasttext-numpy2 one beamtrove's language ID loads.
    "burmese": [("pyidaungsu", "pyidaungsu-numpy2 python-crfsuite emoji --no-deps")],
    "whitespace": [("spacy", "spacy")],
}
_SPACY_SEGMENTERS = {
    "zh": [("jieba", "jieba")],
    "vi": [("pyvi", "pyvi")],
    "ja": [("sudachipy", "sudachipy sudachidict_core"), ("sudachidict_core", "sudachidict_core")],
}
# Kiwi's skip-bigram model, the one DataTrove asks for, is gone from kiwipiepy_model 0.22 on.
_KIWI_LAST_WITH_SBG = (0, 21)
# DataTrove cuts Japanese text into pieces of about this many UTF-8 bytes: SudachiPy refuses long inputs.
_JAPANESE_PIECE_BYTES = 40_000
# The step DataTrove grows or shrinks a Japanese piece by, in characters.
_JAPANESE_PIECE_STEP = 10


def _cell_set(value: str) -> bool:
    """A ``default_*`` flag as DataTrove reads it: any text, ``FALSE`` included, is set."""
    return bool(value)


@functools.cache
def read_word_tokenizers(path: str | None = None) -> Mapping[str, Assignment]:
    """The tokenizer of each language key of a ``tokenizer_assignment.csv`` table, as DataTrove looks them up.

    Rows without a ``type`` are left out. Each other row, in order, gives:

    * ``<code_3>_<script>`` (``tha_Thai``) unless an earlier row gave it, and then ``<code_3>`` (``tha``);
    * ``<code_1>_<script>`` (``th_Thai``) when the row has a ``code_1`` and a ``default_code_1`` cell, unless an
      earlier row gave it, and then ``<code_1>`` (``th``) when it has a ``default_script`` cell.

    As in DataTrove 0.10.1, a ``default_*`` cell counts as set whatever it says (``FALSE`` too), so a later row
    of a language in another script takes its bare code over: ``zh`` is Hakka in Latin script's tokenizer,
    spaCy's ``xx``, not Mandarin's jieba; ``hi`` is Stanza's Kurmanji. The ``<code_3>_<script>`` keys that
    GlotLID predicts are each their first row's.

    Args:
        path: The table, path or fsspec URL; the fetched asset when None.

    Raises:
        FileNotFoundError: There is no table at ``path`` (an unfetched asset: the message says how to fetch it).
        ValueError: The table lacks a column, or names a tokenizer DataTrove does not have.
    """
    path = path or default_word_tokenizers()
    fs, local = filesystem(path)
    if not fs.exists(local):
        fetch = (
            "fetch it with `beamtrove assets fetch --only word_tokenizers`, or "
            if path == default_word_tokenizers()
            else ""
        )
        raise FileNotFoundError(
            f"There is no word tokenizer table at {path}: {fetch}give DataTrove's tokenizer_assignment.csv with "
            "--word_tokenizers (on a cluster, a path every worker reads)."
        )
    with open_url(path, "rb") as raw:
        text = raw.read().decode("utf-8")
    rows = csv.DictReader(io.StringIO(text))
    missing = {"code_3", "code_1", "script", "type", "tok_code", "default_code_1", "default_script"}
    missing -= set(rows.fieldnames or ())
    if missing:
        raise ValueError(f"The word tokenizer table {path} lacks the column(s) {', '.join(sorted(missing))}.")
    table: dict[str, Assignment] = {}
    for row in rows:
        if not row["type"]:
            continue
        if row["type"] not in _KIND_OF_TYPE:
            raise ValueError(f"The word tokenizer table {path} names an unknown tokenizer {row['type']!r}.")
        assignment = Assignment(_KIND_OF_TYPE[row["type"]], row["tok_code"])
        default_script = _cell_set(row["default_script"])
        code_3_script = f"{row['code_3']}_{row['script']}"
        if code_3_script not in table:
            table[code_3_script] = assignment
            if default_script:
                table[row["code_3"]] = assignment
        code_1 = row["code_1"]
        code_1_script = f"{code_1}_{row['script']}"
        if code_1 and _cell_set(row["default_code_1"]) and code_1_script not in table:
            table[code_1_script] = assignment
            if default_script:
                table[code_1] = assignment
    return table


def _assignment(language: str | None, path: str | None) -> Assignment:
    """The tokenizer of ``language``, :data:`FALLBACK` when it has none or the table does not list it."""
    if not language:
        return FALLBACK
    return read_word_tokenizers(path).get(language, FALLBACK)


def _missing_package(assignment: Assignment) -> str | None:
    """What to pip install for ``assignment``'s tokenizer, or None when this process has all it needs."""
    needs = list(_PACKAGES[assignment.kind])
    if assignment.kind == "spacy":
        needs += _SPACY_SEGMENTERS.get(assignment.code, [])
    for module, pip_name in needs:
        if importlib.util.find_spec(module) is None:
            return pip_name
    if assignment.kind == "kiwi":
        version = tuple(int(part) for part in re.findall(r"\d+", importlib.metadata.version("kiwipiepy"))[:2])
        if version > _KIWI_LAST_WITH_SBG:
            return "kiwipiepy<0.22"
    return None


def _stanza_resources() -> pathlib.Path:
    return pathlib.Path(os.environ.get("STANZA_RESOURCES_DIR") or pathlib.Path.home() / "stanza_resources")


def _botok_pack() -> pathlib.Path:
    # botok's default dialect pack: where its WordTokenizer looks for it, and downloads it to when absent.
    return pathlib.Path.home() / "Documents" / "pybo" / "dialect_packs" / "general"


def _missing_model(assignment: Assignment) -> str | None:
    """What a kind that downloads a model on first use lacks, or None."""
    if assignment.kind == "stanza":
        resources = _stanza_resources()
        model = resources / assignment.code / "tokenize"
        if not (resources / "resources.json").is_file() or not model.is_dir() or not any(model.iterdir()):
            return (
                f"Stanza's {assignment.code} tokenize model, which is not in {resources}: download it with "
                f"`python -c \"import stanza; stanza.download('{assignment.code}', processors='tokenize')\"` "
                "(or set STANZA_RESOURCES_DIR)"
            )
    if assignment.kind == "tibetan" and not _botok_pack().is_dir():
        return (
            f"botok's general dialect pack, which is not in {_botok_pack()}: run `python -c \"import botok; "
            'botok.WordTokenizer()"` once where GitHub is reachable'
        )
    return None


def _problem(language: str, assignment: Assignment) -> str | None:
    package = _missing_package(assignment)
    if package is not None:
        return f"Splitting {language} words ({assignment}) needs {package.split()[0]}: pip install {package}."
    model = _missing_model(assignment)
    if model is not None:
        return f"Splitting {language} words ({assignment}) needs {model}."
    return None


def check_languages(languages: Iterable[str | None], path: str | None = None, *, listed: bool = False) -> None:
    """Fails fast on a language whose words this process cannot split.

    Args:
        languages: Language keys (``"tha_Thai"``, ``"th"``); one the table does not list, or None (no
            language), is split by :data:`FALLBACK`, which needs spaCy.
        path: The table; the fetched asset when None.
        listed: Refuse a language the table does not list instead.

    Raises:
        FileNotFoundError: No table at ``path``.
        ValueError: A language's tokenizer needs a package (the message names what to pip install) or a model
            this process does not have, or, with ``listed``, a language the table does not list.
    """
    table = read_word_tokenizers(path)
    for language in languages:
        if listed and language not in table:
            raise ValueError(
                f"{language!r} is not a language of the word tokenizer table {path or default_word_tokenizers()} "
                "(keys such as tha_Thai, tha, th_Thai, th)."
            )
        problem = _problem(language or "text without a language", table.get(language, FALLBACK))
        if problem is not None:
            raise ValueError(problem)


@functools.lru_cache(maxsize=4096)
def language_words(language: str | None, path: str | None = None) -> Callable[[str], Sequence[str]]:
    """The word splitter of ``language`` (a key such as ``"tha_Thai"`` or ``"th"``), made once per process.

    A ``language`` of None, or one the table does not list, gets :data:`FALLBACK`'s.

    Raises:
        FileNotFoundError: No table at ``path``.
        ValueError: The tokenizer's package or model is missing (the message names what to install).
    """
    return _splitter(_assignment(language, path), language or "text without a language")


@functools.cache
def words_of(assignment: Assignment) -> Callable[[str], Sequence[str]]:
    """The word splitter of a kind of tokenizer and its language, made once per process."""
    return _splitter(assignment, str(assignment))


def _splitter(assignment: Assignment, language: str) -> Callable[[str], Sequence[str]]:
    problem = _problem(language, assignment)
    if problem is not None:
        raise ValueError(problem)
    return _made(assignment)


@functools.cache
def _made(assignment: Assignment) -> Callable[[str], tuple[str, ...]]:
    tokens = _MAKERS[assignment.kind](assignment.code)

    # The filters of one pipeline split the same text in turn: the cache saves all but the first.
    @functools.lru_cache(maxsize=8)
    def words(text: str) -> tuple[str, ...]:
        return tuple(word for word in (token.strip() for token in tokens(text)) if word)

    return words


# Each maker takes the tokenizer's language and returns text -> its tokens (strings, maybe blank). The imports
# are inside them: each package is optional, and loaded only by the processes that split its languages.


def _spacy_tokens(code: str) -> Callable[[str], Iterable[str]]:
    if code == "ja":
        return _japanese_tokens()
    if code == "zh":
        return _chinese_tokens()
    import spacy  # noqa: PLC0415 - an optional dependency

    nlp = spacy.blank(code)
    tokenizer = nlp.tokenizer

    def tokens(text: str) -> list[str]:
        # Strings a text adds to the vocabulary are let go after it: a long run would otherwise keep them all.
        with nlp.memory_zone():
            return [token.text for token in tokenizer(text)]

    return tokens


def _chinese_tokens() -> Callable[[str], Iterable[str]]:
    """jieba's words, as spaCy's Chinese pipeline with the jieba segmenter (DataTrove's) gives them.

    spaCy keeps jieba's words as they are and adds the text's spaces around them, which the stripping drops: the
    words are jieba's. Called directly, as spaCy's alignment of the words with the text copies the rest of the
    text at every word, which makes a long text cost the square of its length.
    """
    import jieba  # noqa: PLC0415 - an optional dependency

    return functools.partial(jieba.cut, cut_all=False)


def _japanese_tokens() -> Callable[[str], Iterable[str]]:
    from sudachipy import Dictionary, SplitMode  # noqa: PLC0415 - an optional dependency

    tokenizer = Dictionary().create(mode=SplitMode.A)

    def tokens(text: str) -> list[str]:
        return [morpheme.surface() for piece in _japanese_pieces(text) for morpheme in tokenizer.tokenize(piece)]

    return tokens


def _japanese_pieces(text: str) -> list[str]:
    """``text`` cut where DataTrove cuts Japanese text before its tokenizer sees it (a word across a cut splits).

    Each piece starts from a guess of how many characters hold 40,000 UTF-8 bytes (at the text's mean bytes
    per character, less one step): the guess shrinks by a step while that many characters hold more, and is
    kept for the next pieces; then the piece grows by a step at a time until it holds 40,000 bytes or more, or
    the rest of the text, and gives back its last step if that took it past 40,000.
    """
    if not text:
        return []
    limit, step = _JAPANESE_PIECE_BYTES, _JAPANESE_PIECE_STEP
    # ends[i]: the UTF-8 bytes of text[:i].
    ends = [0, *itertools.accumulate(len(char.encode("utf-8", "surrogatepass")) for char in text)]
    guess = int(max(limit * len(text) / ends[-1] - step, 1))
    pieces = []
    start = 0
    while start < len(text):
        left = len(text) - start

        def held(count: int, start: int = start, left: int = left) -> int:
            """The bytes of the next ``count`` characters (fewer at the end of the text)."""
            return ends[start + min(count, left)] - ends[start]

        while held(guess) > limit:
            guess = max(guess - step, 1)
        cut = guess
        if cut < left and held(cut) < limit:
            # The fewest steps after which the piece holds the limit (bytes only grow with steps), found by
            # bisection rather than one step at a time: the most steps reach the end of the text.
            fewest, most = 1, (left - cut + step - 1) // step
            while fewest < most:
                middle = (fewest + most) // 2
                if held(cut + middle * step) >= limit:
                    most = middle
                else:
                    fewest = middle + 1
            cut = min(cut + fewest * step, left)
            if held(cut) > limit:
                cut -= step
        pieces.append(text[start : start + cut])
        start += cut
    return pieces


def _stanza_tokens(code: str) -> Callable[[str], Iterable[str]]:
    import stanza  # noqa: PLC0415 - an optional dependency
    from stanza.pipeline.core import DownloadMethod  # noqa: PLC0415 - an optional dependency

    pipeline = stanza.Pipeline(code, processors="tokenize", download_method=DownloadMethod.REUSE_RESOURCES)

    def tokens(text: str) -> list[str]:
        return [token.text for sentence in pipeline(text).sentences for token in sentence.tokens]

    return tokens


def _thai_tokens(_: str) -> Callable[[str], Iterable[str]]:
    from pythainlp.tokenize import word_tokenize  # noqa: PLC0415 - an optional dependency

    return functools.partial(word_tokenize, keep_whitespace=False, engine="newmm-safe")


def _indic_tokens(code: str) -> Callable[[str], Iterable[str]]:
    from indicnlp.tokenize.indic_tokenize import trivial_tokenize  # noqa: PLC0415 - an optional dependency

    return functools.partial(trivial_tokenize, lang=code)


# Kiwi stumbles on very long numbers: DataTrove removes runs of 20 or more digits and commas first.
_LONG_NUMBER = re.compile("[0-9,]{20,}")


def _kiwi_tokens(_: str) -> Callable[[str], Iterable[str]]:
    from kiwipiepy import Kiwi  # noqa: PLC0415 - an optional dependency

    kiwi = Kiwi(model_type="sbg")

    def tokens(text: str) -> list[str]:
        # As DataTrove: the offsets are of the text without long numbers, the words cut from the text as given.
        return [text[token.start : token.end] for token in kiwi.tokenize(_LONG_NUMBER.sub("", text))]

    return tokens


def _khmer_tokens(_: str) -> Callable[[str], Iterable[str]]:
    from khmernltk import word_tokenize  # noqa: PLC0415 - an optional dependency

    return functools.partial(word_tokenize, return_tokens=True)


def _lao_tokens(_: str) -> Callable[[str], Iterable[str]]:
    from laonlp.tokenize import word_tokenize  # noqa: PLC0415 - an optional dependency

    return word_tokenize


_SPACES = re.compile(r"\s+")


def _tibetan_tokens(_: str) -> Callable[[str], Iterable[str]]:
    from botok import WordTokenizer  # noqa: PLC0415 - an optional dependency

    tokenizer = WordTokenizer()

    def tokens(text: str) -> list[str]:
        try:
            found = tokenizer.tokenize(text, split_affixes=False)
        except Exception:  # as DataTrove: botok fails on some spacing, and is tried again without it
            found = tokenizer.tokenize(_SPACES.sub("", text), split_affixes=False)
        return [token.text for token in found]

    return tokens


def _burmese_tokens(_: str) -> Callable[[str], Iterable[str]]:
    import pyidaungsu  # noqa: PLC0415 - an optional dependency

    return functools.partial(pyidaungsu.tokenize, form="word")


def _whitespace_tokens(_: str) -> Callable[[str], Iterable[str]]:
    return _spacy_tokens("xx")


_MAKERS: dict[str, Callable[[str], Callable[[str], Iterable[str]]]] = {
    "spacy": _spacy_tokens,
    "stanza": _stanza_tokens,
    "thai": _thai_tokens,
    "indic": _indic_tokens,
    "kiwi": _kiwi_tokens,
    "khmer": _khmer_tokens,
    "lao": _lao_tokens,
    "tibetan": _tibetan_tokens,
    "burmese": _burmese_tokens,
    "whitespace": _whitespace_tokens,
}
