"""Does beamtrove keep, language by language, what DataTrove 0.10.1 keeps as FineWeb-2 configures it?

Real multilingual documents: the ~990 pages of ../shared/data/trafilatura-eval and a make_warc.py set,
extracted with trafilatura. Each document is labelled once by a GlotLID-style fastText model (``--lid_model``;
by default one trained here on the UDHR in 388 languages, as the tests train theirs) through beamtrove's
language filter, and the same labelled documents go to both tools. Per language-script pair with a FineWeb-2
config, the chain of FineWeb-2's per-language filters runs on its documents:

* DataTrove (its own venv): ``GopherRepetitionFilter``, ``FineWebQualityFilter`` and ``GopherQualityFilter``
  built as FineWeb-2's pipeline script builds them from ``configs/<pair>.yml``, with ``language=<pair>``;
* beamtrove: the ``gopher_repetition``, ``fineweb_quality`` and ``gopher_quality`` steps of ``beamtrove run
  fineweb2`` (the same :class:`PerLanguageFilter` s, words split with ``word_splitter="language"``).

It prints, per language, the documents, each tool's kept count, the Jaccard index of the kept sets and the
first differing verdicts, and checks Jaccard >= 0.99 for every language with at least ``--min_documents``.

Usage:
    python -m benchmarks.fineweb2_parity [--records 3000] [--seed 1] [--lid_model PATH] [--min_documents 20]
"""

from __future__ import annotations

import pathlib
import subprocess
import sys
import time

from beamtrove.document import Document
from beamtrove.pipelines import fineweb2
from beamtrove.transforms.filters import Drop, LanguageFilter
from beamtrove.transforms.filters.per_language import LanguageConfigs, PerLanguageFilter
from benchmarks.common import (
    NLTK_CORPORA,
    SHARED,
    Results,
    add_datatrove_venv_argument,
    add_warc_set_arguments,
    argument_parser,
    datatrove_python,
    jaccard,
    json_output,
    read_jsonl,
    trafilatura_eval_texts,
    verdict,
    warc_set_of,
    write_jsonl,
)
from tests.conftest import zip_texts
from tests.lid_models import train_glotlid_style_model

CONFIGS = SHARED / "data" / "fineweb2" / "configs"

# beamtrove's three steps, in FineWeb-2's order, as `beamtrove run fineweb2` builds them.
_STEPS = (
    ("gopher_repetition", fineweb2.gopher_repetition_rule),
    ("fineweb_quality", fineweb2.fineweb_quality_rule),
    ("gopher_quality", fineweb2.gopher_quality_rule),
)

_DATATROVE_SCRIPT = """
import json, sys, yaml
from datatrove.data import Document
from datatrove.pipeline.filters import FineWebQualityFilter, GopherQualityFilter, GopherRepetitionFilter

def chain(pair, config):
    return [
        ("gopher_repetition", GopherRepetitionFilter(language=pair, dup_para_frac=0, dup_line_char_frac=0,
            dup_para_char_frac=0, dup_line_frac=config["dup_line_frac"], top_n_grams=config["top_n_grams"],
            dup_n_grams=config["dup_n_grams"])),
        ("fineweb_quality", FineWebQualityFilter(language=pair, short_line_thr=999, char_duplicates_ratio=0.1,
            line_punct_thr=config["line_punct_thr"], new_line_ratio=config["new_line_ratio"])),
        ("gopher_quality", GopherQualityFilter(language=pair, max_avg_word_length=config["max_avg_word_length"],
            min_avg_word_length=config["min_avg_word_length"], stop_words=config["stopwords"],
            max_non_alpha_words_ratio=config["max_non_alpha_words_ratio"], min_stop_words=2)),
    ]

documents, configs = sys.argv[1], sys.argv[2]
by_pair = {}
for line in open(documents, encoding="utf-8"):
    row = json.loads(line)
    by_pair.setdefault(row["pair"], []).append(row)
out, seconds = {}, {}
import time
for pair, rows in sorted(by_pair.items()):
    with open(f"{configs}/{pair}.yml") as f:
        config = yaml.safe_load(f)
    try:
        steps = chain(pair, config)
        started = time.perf_counter()
        for row in rows:
            verdict = None
            for name, rule in steps:
                result = rule.filter(Document(text=row["text"], id=row["id"]))
                if result is not True:
                    verdict = f"{name}:{result[1] if isinstance(result, tuple) else 'dropped'}"
                    break
            out[row["id"]] = verdict
        seconds[pair] = time.perf_counter() - started
    except Exception:  # a tokenizer not installed here
        out.update({row["id"]: "error" for row in rows})
print(json.dumps({"verdicts": out, "seconds": seconds}))
"""


def _warc_documents(workdir: pathlib.Path, warc_dir: pathlib.Path) -> list[dict]:
    """The make_warc.py set's documents, extracted by `beamtrove run extract` (once)."""
    out = workdir / f"extracted-{warc_dir.name}"
    if not (out / "stats.json").exists():
        command = ["beamtrove", "run", "extract", "--input", str(warc_dir), "--output", str(out), "--overwrite"]
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return [{"id": f"warc/{row['id']}", "text": row["text"]} for row in read_jsonl(sorted(out.glob("documents/*")))]


def _glotlid_model(workdir: pathlib.Path, given: str | None) -> str:
    if given:
        return given
    path = workdir / "glotlid-style" / "model.bin"
    path.parent.mkdir(parents=True, exist_ok=True)
    train_glotlid_style_model(zip_texts(NLTK_CORPORA / "udhr2.zip"), path)
    return str(path)


def _labelled(rows: list[dict], model: str, configs: LanguageConfigs) -> list[dict]:
    """The rows with their language pair, those whose pair has a FineWeb-2 config."""
    labeller = LanguageFilter(model, languages=None, language_threshold=0.0, label_only=True)
    labeller.setup()
    labelled = []
    for start in range(0, len(rows), 256):
        batch = rows[start : start + 256]
        documents = [Document(id=row["id"], text=row["text"]) for row in batch]
        for row, verdict_ in zip(batch, labeller.filter_batch(documents), strict=True):
            metadata = verdict_.metadata
            pair = f"{metadata['language']}_{metadata.get('language_script')}"
            if pair in configs.languages:
                labelled.append({**row, "pair": pair, "metadata": metadata})
    return labelled


def _beamtrove_verdicts(rows: list[dict], configs: LanguageConfigs) -> tuple[dict[str, str | None], float]:
    steps = [PerLanguageFilter(name, configs, make) for name, make in _STEPS]
    verdicts = {}
    started = time.perf_counter()
    for row in rows:
        document, found = Document(id=row["id"], text=row["text"], metadata=row["metadata"]), None
        for step in steps:
            try:
                result = step.filter(document)
            except ValueError:  # a tokenizer not installed here: a dead letter in a run
                found = "error"
                break
            if isinstance(result, Drop):
                found = f"{step.name}:{result.reason}"
                break
            document = result
        verdicts[row["id"]] = found
    return verdicts, time.perf_counter() - started


def main() -> int:
    parser = argument_parser(__doc__)
    add_warc_set_arguments(parser, records=3000, files=4, workdir_name="beamtrove-fineweb2-parity")
    add_datatrove_venv_argument(parser)
    parser.add_argument("--lid_model", help="a GlotLID-style fastText model (default: one trained on the UDHR)")
    parser.add_argument("--min_documents", type=int, default=20, help="languages checked (default: %(default)s)")
    args = parser.parse_args()
    workdir, warc_dir = warc_set_of(args)
    results = Results(__file__, __doc__, args)
    configs = LanguageConfigs(str(CONFIGS))
    rows = trafilatura_eval_texts(workdir) + _warc_documents(workdir, warc_dir)
    labelled = _labelled(rows, _glotlid_model(workdir, args.lid_model), configs)
    print(f"{len(rows)} documents, {len(labelled)} in a language with a FineWeb-2 config", file=sys.stderr)
    documents = write_jsonl(workdir / "labelled.jsonl", labelled)
    ours, our_seconds = _beamtrove_verdicts(labelled, configs)
    theirs = json_output([datatrove_python(args.datatrove_venv), "-c", _DATATROVE_SCRIPT, documents, CONFIGS])
    their_seconds = sum(theirs["seconds"].values())
    by_pair: dict[str, list[str]] = {}
    for row in labelled:
        by_pair.setdefault(row["pair"], []).append(row["id"])
    table, checked = [], []
    for pair, ids in sorted(by_pair.items(), key=lambda item: -len(item[1])):
        kept_ours = {i for i in ids if ours[i] is None}
        kept_theirs = {i for i in ids if theirs["verdicts"][i] is None}
        differing = [i for i in ids if ours[i] != theirs["verdicts"][i]]
        errors = f"{sum(ours[i] == 'error' for i in ids)} / {sum(theirs['verdicts'][i] == 'error' for i in ids)}"
        score = jaccard(kept_ours, kept_theirs)
        # A language neither tool can split here (its tokenizer downloads a model) is not compared.
        if len(ids) >= args.min_documents and not any(ours[i] == "error" for i in ids):
            checked.append((pair, score))
        example = f"{differing[0]}: {ours[differing[0]]} / {theirs['verdicts'][differing[0]]}" if differing else ""
        row = (pair, len(ids), len(kept_ours), len(kept_theirs), f"{score:.4f}", len(differing), errors, example)
        table.append(row)
    print(
        results.table(
            "FineWeb-2's per-language filters, beamtrove vs DataTrove 0.10.1, same labelled documents",
            (
                "pair",
                "documents",
                "kept (beamtrove)",
                "kept (DataTrove)",
                "Jaccard",
                "verdicts differing",
                "no tokenizer here (beamtrove / DataTrove)",
                "first difference",
            ),
            table,
        )
    )
    print(results.note(f"filter time: beamtrove {our_seconds:.2f} s, DataTrove {their_seconds:.2f} s"))
    for pair, score in checked:
        print(f"{pair}: {verdict(results.check(f'{pair}: Jaccard >= 0.99', score >= 0.99))}")
    results.write()
    return 0 if results.passed else 1


if __name__ == "__main__":
    sys.exit(main())
