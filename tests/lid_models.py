"""A fastText language-ID model with GlotLID's labels, trained in seconds on the UDHR, for tests and benchmarks.

GlotLID (``cis-lmu/glotlid`` on the Hugging Face hub) labels a text with its ISO 639-3 language and its ISO 15924
script, ``__label__deu_Latn``. It is not in ../shared/data, so :func:`train_glotlid_style_model` trains a small
model with labels of that form on the Universal Declaration of Human Rights in its 388 files (named by ISO 639-3
code, a few with a variant: ``cmn_hans``, ``srp_cyrl``, ``por_BR``): the label of a file is its code and the
dominant script of its text; the variants that share a label (``cmn_hans`` and ``cmn_hant``: ``cmn_Hani``) are
merged. Every fifth line of each language is held out of training, for tests to predict.

Training is deterministic (one thread, a fixed seed, a fresh process: fasttext-numpy2 trains from memory it
does not clear, see :func:`beamtrove.cli.train_classifier.train_classifier`) and takes about 5 s.
"""

from __future__ import annotations

import collections
import dataclasses
import multiprocessing
import pathlib
import re
import tempfile
import unicodedata
from collections.abc import Mapping

import fasttext

__all__ = ["HELD_OUT_EVERY", "LabelledLines", "dominant_script", "label_lines", "train_glotlid_style_model"]

_ISO_639_3 = re.compile("[a-z]{3}")

#: Every this-many-th line of a language is held out of training.
HELD_OUT_EVERY = 5

# The first word of the Unicode names of a script's letters -> its ISO 15924 name, for the scripts of the UDHR.
_SCRIPTS = {
    "ARABIC": "Arab",
    "ARMENIAN": "Armn",
    "BENGALI": "Beng",
    "CANADIAN": "Cans",
    "CHEROKEE": "Cher",
    "CJK": "Hani",
    "CYRILLIC": "Cyrl",
    "DEVANAGARI": "Deva",
    "ETHIOPIC": "Ethi",
    "GEORGIAN": "Geor",
    "GREEK": "Grek",
    "GUJARATI": "Gujr",
    "GURMUKHI": "Guru",
    "HANGUL": "Hang",
    "HEBREW": "Hebr",
    "KANNADA": "Knda",
    "KHMER": "Khmr",
    "LAO": "Laoo",
    "LATIN": "Latn",
    "MALAYALAM": "Mlym",
    "MONGOLIAN": "Mong",
    "MYANMAR": "Mymr",
    "SYRIAC": "Syrc",
    "TAGALOG": "Tglg",
    "TAMIL": "Taml",
    "THAANA": "Thaa",
    "THAI": "Thai",
    "TIBETAN": "Tibt",
    "TIFINAGH": "Tfng",
    "VAI": "Vaii",
    "YI": "Yiii",
}
# Japanese writes kana among Han characters: ISO 15924's Jpan, as GlotLID labels it (jpn_Jpan).
_KANA = frozenset(("HIRAGANA", "KATAKANA"))
_JAPANESE = "Jpan"
_KANA_SHARE = 0.1

# Small and quick (about 5 s), yet right on 87% of the held-out lines of 40 characters or more, where the 364
# labels hold many close languages (deu_Latn, ltz_Latn, nds_Latn): character trigrams carry language ID.
_TRAINING = {
    "dim": 16,
    "epoch": 15,
    "lr": 0.5,
    "minn": 3,
    "maxn": 3,
    "minCount": 2,
    "bucket": 200_000,
    "loss": "softmax",
    "thread": 1,
    "seed": 1,
    "verbose": 0,
}


def dominant_script(text: str) -> str | None:
    """The ISO 15924 name of the script most of ``text``'s letters are in (``Latn``, ``Cyrl``, ``Jpan``), or None
    when it has no letter of a known script."""
    counts: collections.Counter[str] = collections.Counter()
    for character in text:
        if character.isalpha():
            counts[unicodedata.name(character, "").split(" ", 1)[0]] += 1
    kana = sum(counts[block] for block in _KANA)
    if kana and kana >= _KANA_SHARE * sum(counts.values()):
        return _JAPANESE
    known = [(count, block) for block, count in counts.items() if block in _SCRIPTS]
    return _SCRIPTS[max(known)[1]] if known else None


@dataclasses.dataclass(frozen=True)
class LabelledLines:
    """The lines of one label's texts: those trained on, and those held out."""

    training: list[str]
    held_out: list[str]


def label_lines(texts: Mapping[str, str]) -> dict[str, LabelledLines]:
    """``{"deu_Latn": LabelledLines(...), ...}`` of the UDHR's files (``{"deu": text, "deu_1901": text, ...}``).

    A file's label is its ISO 639-3 code (its name up to the first ``_``) and the dominant script of its text;
    files sharing a label are merged, in the order of their names; files with no letters, and the five named by
    a number (``007`` ... ``011``), are left out. Lines are
    stripped and the empty ones dropped; every :data:`HELD_OUT_EVERY`-th line of a label is held out.
    """
    lines: dict[str, list[str]] = {}
    for name in sorted(texts):
        code = name.split("_", 1)[0]
        script = dominant_script(texts[name])
        if script is None or not _ISO_639_3.fullmatch(code):
            continue
        label = f"{code}_{script}"
        lines.setdefault(label, []).extend(line.strip() for line in texts[name].splitlines() if line.strip())
    return {
        label: LabelledLines(
            [line for index, line in enumerate(found) if index % HELD_OUT_EVERY != HELD_OUT_EVERY - 1],
            found[HELD_OUT_EVERY - 1 :: HELD_OUT_EVERY],
        )
        for label, found in sorted(lines.items())
    }


def train_glotlid_style_model(texts: Mapping[str, str], path: pathlib.Path) -> dict[str, LabelledLines]:
    """Trains a fastText model labelled as GlotLID's are on the UDHR's files and saves it to ``path`` (a ``.bin``).

    Returns:
        The lines of each label (:func:`label_lines`): the held-out ones were not trained on.
    """
    labelled = label_lines(texts)
    with tempfile.TemporaryDirectory() as scratch:
        training = pathlib.Path(scratch, "train.txt")
        with training.open("w", encoding="utf-8") as file:
            for label, lines in labelled.items():
                file.writelines(f"__label__{label} {line}\n" for line in lines.training)
        with multiprocessing.get_context("spawn").Pool(1) as trainer:
            trainer.apply(_train, (str(training), str(path)))
    return labelled


def _train(training: str, path: str) -> None:
    """Trains on the file ``training`` and saves the model to ``path``; run in a fresh process."""
    fasttext.train_supervised(input=training, **_TRAINING).save_model(path)
