"""Does beamtrove's LanguageFilter label as DataTrove 0.10.1's does with GlotLID's labels, and how fast?

FineWeb-2 labels every document with DataTrove's ``LanguageFilter(backend="glotlid", label_only=True,
keep_top_pairs_threshold=0.01)``: ``language`` (``deu``), ``language_script`` (``Latn``), ``language_score``
and ``top_language_<label>_score`` for each label above 0.01. GlotLID's own model is on the Hugging Face hub,
out of reach here, so by default both run a fastText model labelled as GlotLID's is (``__label__deu_Latn``,
364 labels), trained on the UDHR by ``tests/lid_models.py`` (``--model`` takes another, such as GlotLID's
``model.bin``). The documents: the text beamtrove's trafilatura extracts from the 990 multilingual pages of
``../shared/data/trafilatura-eval`` (extracted once into ``--workdir``), and the UDHR lines held out of the
model's training. DataTrove runs in its own venv, its model pointed at the same file.

Two settings are compared: FineWeb-2's (label only, any language), and a keeping filter with wanted languages
(``--languages``, DataTrove's ``languages``), where DataTrove reports the top pairs of those languages alone.
Prints, per setting, the documents compared, how many have the same ``language`` and ``language_script``,
the largest score difference, how many have the same top-pairs keys, the same whole metadata (keys, order
and values) and the same keep decision, and the speed of each (documents/s, best of ``--repeat``) with the
ratio. The speed is that of the filter's calls alone, the model loaded, on one core.

Usage:
    python -m benchmarks.glotlid_parity [--model PATH] [--languages deu_Latn,fra_Latn,eng_Latn] [--repeat 3]
        [--documents all|pages|udhr] [--datatrove_venv PATH] [--workdir DIR] [--results FILE]
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import pathlib
import sys
import tempfile
import time

from beamtrove.document import Document
from beamtrove.languages import LANGUAGE, LANGUAGE_SCORE, LANGUAGE_SCRIPT
from beamtrove.transforms.filters import Drop, LanguageFilter
from beamtrove.transforms.filters.language import load_fasttext_model
from benchmarks.common import (
    NLTK_CORPORA,
    Results,
    add_datatrove_venv_argument,
    add_workdir_arguments,
    argument_parser,
    datatrove_python,
    json_output,
    trafilatura_eval_texts,
    write_jsonl,
)
from tests.conftest import zip_texts
from tests.lid_models import train_glotlid_style_model

_TOP_PAIRS = 0.01

_DATATROVE_SCRIPT = """
import json, sys, time
from datatrove.data import Document
from datatrove.pipeline.filters import LanguageFilter

documents_path, model_path, subfolder, settings, repeat = sys.argv[1:]
rule = LanguageFilter(backend="glotlid", **json.loads(settings))
# No model-path argument: its model fetches MODEL_URL into a cache folder named by MODEL_SUBFOLDER.
rule.model.MODEL_URL = model_path
rule.model.MODEL_SUBFOLDER = subfolder
rule.model.model
rows = [json.loads(line) for line in open(documents_path, encoding="utf-8")]
best = None
for _ in range(int(repeat)):
    documents = [Document(text=row["text"], id=row["id"]) for row in rows]
    start = time.perf_counter()
    kept = [rule.filter(document) for document in documents]
    seconds = time.perf_counter() - start
    best = seconds if best is None else min(best, seconds)
print(json.dumps({
    "seconds": best,
    "documents": {d.id: [bool(k), list(d.metadata.items())] for d, k in zip(documents, kept)},
}))
"""


@dataclasses.dataclass(frozen=True)
class Setting:
    """One configuration of both filters: DataTrove's keyword arguments, and beamtrove's."""

    name: str
    datatrove: dict
    beamtrove: dict


def _model(args, workdir: pathlib.Path) -> tuple[pathlib.Path, list[dict]]:
    """The model both filters run, and the UDHR lines held out of its training (none for a model given)."""
    if args.model is not None:
        return args.model, []
    path = workdir / "glotlid-style" / "model.bin"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = train_glotlid_style_model(zip_texts(NLTK_CORPORA / "udhr2.zip"), path)
    held_out = [
        {"id": f"udhr:{label}:{index}", "text": line}
        for label, labelled in lines.items()
        for index, line in enumerate(labelled.held_out)
    ]
    return path, held_out


def _beamtrove_run(model: pathlib.Path, settings: dict, rows: list[dict], repeat: int) -> tuple[float, dict]:
    rule = LanguageFilter(str(model), **settings)
    rule.setup()
    best = None
    for _ in range(repeat):
        documents = [Document(text=row["text"], id=row["id"]) for row in rows]
        start = time.perf_counter()
        verdicts = [
            verdict
            for at in range(0, len(documents), rule.batch_size)
            for verdict in rule.filter_batch(documents[at : at + rule.batch_size])
        ]
        seconds = time.perf_counter() - start
        best = seconds if best is None else min(best, seconds)
    found = {}
    for document, verdict in zip(documents, verdicts, strict=True):
        labelled = verdict.document if isinstance(verdict, Drop) else verdict
        found[document.id] = [not isinstance(verdict, Drop), list(labelled.metadata.items())]
    return best, found


def _datatrove_run(python, model: pathlib.Path, settings: dict, rows: list[dict], repeat: int) -> tuple[float, dict]:
    digest = hashlib.sha256(model.read_bytes()).hexdigest()[:16]
    with tempfile.TemporaryDirectory() as scratch:
        documents = write_jsonl(pathlib.Path(scratch, "documents.jsonl"), rows)
        # A folder per model's contents: DataTrove keeps the first file it cached under a name.
        command = [python, "-c", _DATATROVE_SCRIPT, documents, model.resolve(), f"beamtrove-parity-{digest}"]
        answer = json_output([*command, json.dumps(settings), str(repeat)])
    # JSON gives each metadata item as a list: pairs, as beamtrove's are, to compare them.
    found = {key: [kept, [tuple(item) for item in items]] for key, (kept, items) in answer["documents"].items()}
    return answer["seconds"], found


def _top_pairs(metadata: dict) -> set[str]:
    return {key for key in metadata if key.startswith("top_language_")}


def _compare(ours: dict, theirs: dict) -> dict:
    same_label = same_top = same_metadata = same_decision = 0
    largest = 0.0
    differing = []
    for doc_id, (our_keep, our_items) in ours.items():
        their_keep, their_items = theirs[doc_id]
        our_meta, their_meta = dict(our_items), dict(their_items)
        label = (our_meta.get(LANGUAGE), our_meta.get(LANGUAGE_SCRIPT))
        same_label += label == (their_meta.get(LANGUAGE), their_meta.get(LANGUAGE_SCRIPT))
        largest = max(largest, abs(our_meta[LANGUAGE_SCORE] - their_meta[LANGUAGE_SCORE]))
        same_top += _top_pairs(our_meta) == _top_pairs(their_meta)
        same_metadata += list(our_items) == list(their_items)
        same_decision += our_keep == their_keep
        if list(our_items) != list(their_items) or our_keep != their_keep:
            differing.append(doc_id)
    return {
        "same_label": same_label,
        "largest_score_difference": largest,
        "same_top_pairs": same_top,
        "same_metadata": same_metadata,
        "same_decision": same_decision,
        "differing": differing,
    }


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--model", type=pathlib.Path, help="a GlotLID-style fastText model (default: train one)")
    parser.add_argument(
        "--languages",
        default="deu_Latn,fra_Latn,eng_Latn",
        help="the wanted languages of the second setting, comma-separated (default: %(default)s)",
    )
    parser.add_argument("--repeat", type=int, default=3, help="timed passes of each filter; the best counts")
    parser.add_argument(
        "--documents",
        choices=("all", "pages", "udhr"),
        default="all",
        help="compare on the pages' texts, the held-out UDHR lines, or both (default: %(default)s)",
    )
    add_datatrove_venv_argument(parser)
    add_workdir_arguments(parser, "beamtrove-glotlid-parity")
    args = parser.parse_args()
    results = Results(__file__, __doc__, args)
    python = datatrove_python(args.datatrove_venv)
    model, held_out = _model(args, args.workdir)
    pages = trafilatura_eval_texts(args.workdir)
    pages = pages if args.documents in ("all", "pages") else []
    held_out = held_out if args.documents in ("all", "udhr") else []
    rows = pages + held_out
    labels = len(load_fasttext_model(str(model), "The model", "--model").get_labels())
    digest = hashlib.sha256(model.read_bytes()).hexdigest()[:16]
    print(results.note(f"model {model}: {labels} labels, sha256 {digest}"))
    print(results.note(f"{len(rows)} documents: {len(pages)} pages' texts, {len(held_out)} held-out UDHR lines"))
    languages = [code.strip() for code in args.languages.split(",")]
    settings = [
        Setting(
            "FineWeb-2: label_only, keep_top_pairs_threshold=0.01",
            {"label_only": True, "keep_top_pairs_threshold": _TOP_PAIRS},
            {"languages": None, "label_only": True, "keep_top_pairs_threshold": _TOP_PAIRS},
        ),
        Setting(
            f"languages={','.join(languages)}, threshold 0.65, keep_top_pairs_threshold=0.01",
            {"languages": languages, "keep_top_pairs_threshold": _TOP_PAIRS},
            {"languages": languages, "keep_top_pairs_threshold": _TOP_PAIRS},
        ),
    ]
    table = []
    for setting in settings:
        their_seconds, theirs = _datatrove_run(python, model, setting.datatrove, rows, args.repeat)
        our_seconds, ours = _beamtrove_run(model, setting.beamtrove, rows, args.repeat)
        found = _compare(ours, theirs)
        count = len(rows)
        table.append(
            [
                setting.name,
                count,
                found["same_label"],
                f"{found['largest_score_difference']:.3g}",
                found["same_top_pairs"],
                found["same_metadata"],
                found["same_decision"],
                f"{count / our_seconds:.0f}",
                f"{count / their_seconds:.0f}",
                f"{their_seconds / our_seconds:.2f}x",
            ]
        )
        results.check(f"{setting.name}: every document labelled and decided as DataTrove does", not found["differing"])
        for doc_id in found["differing"][:5]:
            print(f"  differs: {doc_id}\n    beamtrove {ours[doc_id]}\n    DataTrove {theirs[doc_id]}")
    columns = [
        "setting",
        "documents",
        "same language, script",
        "max |score difference|",
        "same top pairs",
        "same metadata",
        "same decision",
        "beamtrove docs/s",
        "DataTrove docs/s",
        "speed ratio",
    ]
    print()
    print(results.table("beamtrove's LanguageFilter against DataTrove's glotlid backend, same model", columns, table))
    results.write()
    if not results.passed:
        sys.exit(1)


if __name__ == "__main__":
    main()
