"""Do each language's words equal DataTrove's, and how long does a megabyte take?

Parity: for every language-script pair of DataTrove's word tokenizer table
(``beamtrove assets fetch`` fetches it) whose text the UDHR holds (388 files
named by ISO 639-3 code, maybe with a script, ``cmn_hans``, ``uzn_cyrl``, or
a variant, ``deu_1901``; a file without a script is in its language's default
script in the table; the first file of a pair is taken), splits the whole
declaration with ``beamtrove.text.word_splitter("language", pair)`` here and
with DataTrove 0.10.1's ``load_word_tokenizer(pair).word_tokenize(text)`` in
its venv, and prints per pair whether the words are identical, or where they
first differ; then totals per kind of tokenizer. A pair whose tokenizer's
package or model is missing is listed as refused (beamtrove's message). The
venv gets the tokenizers' packages installed first (pip, once).

Linearity: 1 MB (UTF-8) of Thai, Chinese and Japanese (the UDHR repeated) and
a tenth of it, through beamtrove's splitter of the language alone, through
the Gopher repetition and quality filters with ``word_splitter="language"``
(the document labelled in GlotLID's metadata; the filters share one split of
the text, as in a pipeline), and through DataTrove's tokenizer: CPU seconds
per MB, and the growth from a tenth to the whole (10x is linear).

Usage:
    python -m benchmarks.word_parity [--datatrove_venv DIR] [--languages tha_Thai,...] [--mb 1]
        [--workdir DIR] [--results FILE]
"""

from __future__ import annotations

import csv
import json
import pathlib
import subprocess
import sys
import time

from benchmarks.common import (
    NLTK_CORPORA,
    Results,
    add_datatrove_venv_argument,
    add_workdir_arguments,
    argument_parser,
    datatrove_python,
    json_output,
)
from tests.conftest import zip_texts

# The tokenizers' packages, installed into DataTrove's venv too (see the multilingual extra in setup.py).
_DATATROVE_PACKAGES = [
    "indic-nlp-library",
    "jieba",
    "khmer-nltk",
    "kiwipiepy>=0.21,<0.22",
    "laonlp",
    "pythainlp",
    "pyvi",
    "sudachidict_core",
    "sudachipy",
]
# UDHR file suffixes that name a script (ISO 15924, lower case; Chinese by its simplified and traditional forms).
_SCRIPT_SUFFIXES = {"latn": "Latn", "cyrl": "Cyrl", "arab": "Arab", "mong": "Mong", "tfng": "Tfng", "tglg": "Tglg"}
_SCRIPT_SUFFIXES |= {"hans": "Hani", "hant": "Hani"}
# The texts of the linearity runs: UDHR file, language and script as GlotLID labels them.
_RUNS = (("tha", "tha", "Thai"), ("cmn_hans", "cmn", "Hani"), ("jpn", "jpn", "Jpan"))

_DATATROVE_WORDS = """
import json, sys, time
from datatrove.utils.word_tokenizers import load_word_tokenizer

pairs, runs = json.load(open(sys.argv[1]))
words = {}
for pair, path in pairs:
    try:
        words[pair] = load_word_tokenizer(pair).word_tokenize(open(path, encoding="utf-8").read())
    except Exception as exc:
        words[pair] = f"{type(exc).__name__}: {exc}"[:300]
seconds = {}
for pair, path in runs:
    text = open(path, encoding="utf-8").read()
    tokenizer = load_word_tokenizer(pair)
    tokenizer.word_tokenize(text[:1000])
    started = time.process_time()
    count = len(tokenizer.word_tokenize(text))
    seconds[path] = [time.process_time() - started, count]
print(json.dumps({"words": words, "seconds": seconds}))
"""


def _default_scripts(table: pathlib.Path) -> dict[str, str]:
    """ISO 639-3 code -> its default script in the table (its first row saying so, else its first row's)."""
    first: dict[str, str] = {}
    default: dict[str, str] = {}
    with table.open(encoding="utf-8") as rows:
        for row in csv.DictReader(rows):
            first.setdefault(row["code_3"], row["script"])
            if row["default_script"] == "TRUE":
                default.setdefault(row["code_3"], row["script"])
    return first | default


def udhr_pairs(texts: dict[str, str], table: pathlib.Path, assigned: set[str]) -> dict[str, str]:
    """Language-script pair of the table -> the first UDHR file in it."""
    defaults = _default_scripts(table)
    pairs: dict[str, str] = {}
    for name in texts:
        code, _, suffix = name.partition("_")
        script = _SCRIPT_SUFFIXES.get(suffix.lower()) or defaults.get(code)
        pair = f"{code}_{script}"
        if script and pair in assigned:
            pairs.setdefault(pair, name)
    return pairs


def _first_difference(ours: list[str], theirs: list[str]) -> str:
    for index, (mine, peer) in enumerate(zip(ours, theirs, strict=False)):
        if mine != peer:
            return f"word {index}: {ours[index : index + 3]} vs {theirs[index : index + 3]}"
    return f"{len(ours)} vs {len(theirs)} words"


def _megabyte(text: str, size: int) -> str:
    """``text`` repeated to ``size`` UTF-8 bytes (cut at a character)."""
    repeated = text * (size // len(text.encode()) + 1)
    return repeated.encode()[:size].decode("utf-8", "ignore")


def _cpu(call) -> float:
    started = time.process_time()
    call()
    return time.process_time() - started


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser(__doc__)
    add_datatrove_venv_argument(parser)
    add_workdir_arguments(parser, "beamtrove-word-parity")
    parser.add_argument("--languages", help="comma-separated pairs to compare (default: every one the UDHR has)")
    parser.add_argument("--mb", type=float, default=1.0, help="megabytes of each linearity run (default: 1)")
    args = parser.parse_args(argv)
    # beamtrove after the flags: --help stays quick.
    from beamtrove.assets import asset_present, default_word_tokenizers  # noqa: PLC0415 - start-up time
    from beamtrove.document import Document  # noqa: PLC0415 - start-up time
    from beamtrove.text import word_splitter  # noqa: PLC0415 - start-up time
    from beamtrove.transforms.filters import GopherQualityFilter, GopherRepetitionFilter  # noqa: PLC0415
    from beamtrove.word_tokenizers import FALLBACK, read_word_tokenizers  # noqa: PLC0415 - start-up time

    if not asset_present("word_tokenizers"):
        print("fetch the table first: beamtrove assets fetch --only word_tokenizers", file=sys.stderr)
        return 2
    results = Results(__file__, __doc__, args)
    table = pathlib.Path(default_word_tokenizers())
    assignments = read_word_tokenizers(str(table))
    texts = zip_texts(NLTK_CORPORA / "udhr2.zip")
    pairs = udhr_pairs(texts, table, set(assignments))
    if args.languages:
        pairs = {pair: pairs[pair] for pair in args.languages.split(",")}
    work = args.workdir
    (work / "texts").mkdir(parents=True, exist_ok=True)

    # The linearity texts, written for DataTrove to read too.
    size = int(args.mb * 1_000_000)
    runs = []
    for name, language, script in _RUNS:
        for fraction, label in ((10, "tenth"), (1, "whole")):
            path = work / "texts" / f"{name}.{label}.txt"
            path.write_text(_megabyte(texts[name], size // fraction), encoding="utf-8")
            runs.append((f"{language}_{script}", str(path)))
    for pair, name in pairs.items():
        (work / "texts" / f"{pair}.txt").write_text(texts[name], encoding="utf-8")

    # beamtrove's words, and what it refuses. The text is read back as DataTrove reads it.
    ours: dict[str, list[str] | str] = {}
    for pair in pairs:
        text = (work / "texts" / f"{pair}.txt").read_text(encoding="utf-8")
        try:
            ours[pair] = list(word_splitter("language", pair)(text))
        except ValueError as refused:
            ours[pair] = f"refused: {refused}"

    python = datatrove_python(args.datatrove_venv)
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", *_DATATROVE_PACKAGES], check=True)
    # DataTrove's botok downloads its dictionary, retrying 50 times; pairs beamtrove refuses for a model stay out.
    asked = [
        (pair, str(work / "texts" / f"{pair}.txt"))
        for pair in pairs
        if not (isinstance(ours[pair], str) and "dialect pack" in ours[pair])
    ]
    request = work / "request.json"
    request.write_text(json.dumps([asked, runs]))
    script = work / "datatrove_words.py"
    script.write_text(_DATATROVE_WORDS)
    theirs = json_output([python, script, request])

    rows, totals = [], {}
    for pair, name in sorted(pairs.items()):
        kind = str(assignments.get(pair, FALLBACK))
        mine, peer = ours[pair], theirs["words"].get(pair, "not asked (beamtrove refused for a model)")
        if isinstance(mine, str):
            outcome, detail = "refused", mine.removeprefix("refused: ")
        elif isinstance(peer, str):
            outcome, detail = "DataTrove failed", peer
        elif mine == peer:
            outcome, detail = "identical", f"{len(mine)} words"
        else:
            outcome, detail = "differs", _first_difference(mine, peer)
        rows.append([pair, name, kind, outcome, detail])
        counts = totals.setdefault(kind.partition(":")[0], {})
        counts[outcome] = counts.get(outcome, 0) + 1
    print(results.table("Words per language-script pair (UDHR)", ["pair", "UDHR file", "tokenizer", "", ""], rows))
    total_rows = [
        [kind, *(counts.get(o, 0) for o in ("identical", "differs", "refused", "DataTrove failed"))]
        for kind, counts in sorted(totals.items())
    ]
    all_counts = [sum(row[i] for row in total_rows) for i in range(1, 5)]
    total_rows.append(["all", *all_counts])
    print(results.table("Totals per kind", ["kind", "identical", "differs", "refused", "DataTrove failed"], total_rows))
    compared = all_counts[0] + all_counts[1]
    results.check(f"every pair both split gives identical words ({all_counts[0]}/{compared})", all_counts[1] == 0)

    # Linearity.
    quality, repetition = (
        GopherQualityFilter(word_splitter="language"),
        GopherRepetitionFilter(word_splitter="language"),
    )
    rows = []
    for name, language, script in _RUNS:
        pair = f"{language}_{script}"
        split = word_splitter("language", pair)
        split(texts[name][:1000])  # models loaded before the clock starts
        figures = {}
        for label in ("tenth", "whole"):
            path = work / "texts" / f"{name}.{label}.txt"
            text = path.read_text(encoding="utf-8")
            megabytes = len(text.encode()) / 1_000_000
            split.cache_clear()
            alone = _cpu(lambda text=text, split=split: split(text))
            split.cache_clear()
            document = Document(text=text, id=name, metadata={"language": language, "language_script": script})
            filters = _cpu(lambda document=document: (repetition.filter(document), quality.filter(document)))
            peer = theirs["seconds"][str(path)][0]
            figures[label] = (megabytes, alone, filters, peer)
        (mb, alone, filters, peer), tenth = figures["whole"], figures["tenth"]
        rows.append(
            [
                pair,
                f"{mb:.2f}",
                f"{alone / mb:.2f}",
                f"{filters / mb:.2f}",
                f"{peer / mb:.2f}",
                f"{alone / peer:.2f}x",
                f"{alone / tenth[1]:.1f}x / {filters / tenth[2]:.1f}x / {peer / tenth[3]:.1f}x",
            ]
        )
    print(
        results.table(
            "CPU seconds per MB",
            ["pair", "MB", "beamtrove split", "Gopher rep. + quality", "DataTrove split", "ratio", "growth 10x text"],
            rows,
        )
    )
    results.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
