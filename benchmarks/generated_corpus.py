"""Documents of real English sentences at any count, with planted copies at known rates; how well a run found them.

The sentences come from the English prose of ../shared/data/text-corpora:
NLTK's movie reviews, State of the Union addresses and inaugural addresses
(:func:`benchmarks.common.nltk_texts`) and the English UDHR, split by the
sentence dedup step's rule, whitespace folded, kept when 5 to 100 words long
and unique. (The Wikipedia excerpt there is raw wikitext, markup rather than
prose, and is left out.) That pool of about 86,000 sentences is all the
generator holds, so memory does not grow with the count.

Document ``doc-NNNNNNNNN`` is a pure function of the seed and its position
N, drawn from its own seeded stream:

* an *original*: 5 to 80 sentences (log-uniform, as web pages run from
  short to long), in paragraphs, at ``https://site<k>.example/posts/<N>``
  (some with a query string); two originals share a sentence now and then,
  never enough to be near duplicates;
* an *exact* copy (rate ``--exact_rate``): the text of an earlier original
  under a URL of its own;
* a *URL* copy (``--url_rate``): a text of its own at an earlier original's
  URL spelled otherwise (host case, ``www.``, a default port, a trailing
  slash, a fragment, the query reordered), which beamtrove's URL dedup
  normalizes to the same URL;
* a *near* copy (``--near_rate``): an earlier original with about
  ``--near_edit`` of its words replaced by other words of it
  (:func:`tests.conftest.near_copy`, the rule of the tests and of
  make_warc.py), under a URL of its own; at least one word differs once
  normalized, so it is never an exact copy.

A copy is of an original at an earlier position, so of a smaller id: the
run keeps the original and removes the copy, as beamtrove's default keep
order (:class:`beamtrove.transforms.dedup.keep.KeepOrder`: the smallest id)
decides, and it also comes after it when the files are read in order.

OUT_DIR gets ``part-NNNNN.jsonl.gz`` (contiguous runs of positions, rows
``{"id", "text", "metadata": {"url"}}`` as beamtrove's JSONL reader takes
them), ``manifest.jsonl`` (one line per planted copy: ``{"id", "kind",
"of"}``) and, last, ``corpus.json`` (the settings, counts per kind and the
uncompressed bytes of the rows). The same seed and settings give the same
bytes.

:func:`removal_score` scores a run's removals (its ``excluded/<step>/``
files) against the manifest: precision, recall, recall per kind, and
precision per step.

Usage:
    python -m benchmarks.generated_corpus OUT_DIR --documents N [--files 16] [--seed 1]
        [--exact_rate 0.02] [--url_rate 0.01] [--near_rate 0.03] [--near_edit 0.02]
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import json
import math
import pathlib
import random
import sys
import urllib.parse
from collections.abc import Iterator

from beamtrove.layout import EXCLUDED_DIR
from beamtrove.text import normalize_text
from beamtrove.transforms.dedup.sentences import split_sentences
from benchmarks.common import NLTK_CORPORA, argument_parser, nltk_texts, read_jsonl
from benchmarks.dedup_inputs import excluded_ids
from tests.conftest import near_copy, zip_texts

__all__ = [
    "CORPUS_FILE",
    "KINDS",
    "MANIFEST_FILE",
    "ORIGINAL",
    "CopyRates",
    "GeneratedCorpus",
    "RemovalScore",
    "document_id",
    "removal_score",
    "sentence_pool",
    "write_corpus",
]

MANIFEST_FILE = "manifest.jsonl"
#: Written last: a folder holding it holds a whole corpus.
CORPUS_FILE = "corpus.json"
#: The kinds of planted copies, in the order the rates are drawn.
KINDS = ("exact", "url", "near")
#: The kind of a document that copies nothing.
ORIGINAL = "original"

_NLTK_CORPORA = ("movie_reviews", "state_union", "inaugural")
_SENTENCE_WORDS = (5, 100)
_DOCUMENT_SENTENCES = (5, 80)
# A sentence after the first starts a paragraph this often.
_PARAGRAPH_BREAK = 0.25
_HOSTS = 20_000
# This share of originals carry a query string, which a URL copy may reorder.
_QUERY_SHARE = 0.2
_ID_DIGITS = 9
# Level 6 makes files 15 % smaller, but compresses 5x slower, and compressing was most of the writing time.
_GZIP_LEVEL = 1


@dataclasses.dataclass(frozen=True)
class CopyRates:
    """Shares of the documents that are planted copies, and the share of words a near copy replaces.

    Attributes:
        exact: Share that are exact copies (same text, another URL).
        url: Share that are URL copies (another text, the same normalized URL).
        near: Share that are near copies (a fraction of the words replaced, another URL).
        near_edit: Share of a near copy's words drawn anew (from the words of the same text).
    """

    exact: float = 0.02
    url: float = 0.01
    near: float = 0.03
    near_edit: float = 0.02

    def __post_init__(self):
        rates = (self.exact, self.url, self.near)
        if min(rates) < 0 or sum(rates) >= 1:
            raise ValueError(f"copy rates must be >= 0 and sum below 1 (got exact, url, near = {rates})")
        if not 0 < self.near_edit < 1:
            raise ValueError(f"near_edit must lie between 0 and 1 (got {self.near_edit})")


def sentence_pool() -> list[str]:
    """The unique English sentences of 5 to 100 words of the text corpora, whitespace folded, in corpus order.

    Raises:
        FileNotFoundError: A corpus is absent from ../shared beside the checkout.
    """
    for corpus in (*_NLTK_CORPORA, "udhr2"):
        if not (NLTK_CORPORA / f"{corpus}.zip").exists():
            raise FileNotFoundError(f"{NLTK_CORPORA / corpus}.zip is absent: keep ../shared beside the checkout")
    texts = [text for corpus in _NLTK_CORPORA for text in nltk_texts(corpus)]
    texts.append(zip_texts(NLTK_CORPORA / "udhr2.zip")["eng"])
    pool = {}
    for text in texts:
        for start, end in split_sentences(text):
            sentence = " ".join(text[start:end].split())
            if _SENTENCE_WORDS[0] <= sentence.count(" ") + 1 <= _SENTENCE_WORDS[1]:
                pool[sentence] = None
    return list(pool)


def document_id(position: int) -> str:
    """The id of the document at ``position``: ids sort as positions do."""
    return f"doc-{position:0{_ID_DIGITS}d}"


def _stream(seed: int, purpose: str, position: int) -> random.Random:
    """The seeded random stream of one purpose at one position (string seeds are hashed the same in every run)."""
    return random.Random(f"beamtrove-generated:{seed}:{purpose}:{position}")


class GeneratedCorpus:
    """The documents of a generated corpus, each computed from the seed and its position alone.

    Args:
        documents: How many documents.
        seed: The seed every draw derives from.
        rates: The planted copies' rates (default: :class:`CopyRates`'s).
        pool: The sentences to draw from (default: :func:`sentence_pool`).
    """

    def __init__(self, documents: int, seed: int = 1, rates: CopyRates | None = None, pool: list[str] | None = None):
        if not 0 < documents <= 10**_ID_DIGITS:
            raise ValueError(f"documents must lie between 1 and {10**_ID_DIGITS:,} (got {documents})")
        self.documents = documents
        self.seed = seed
        self.rates = rates = rates or CopyRates()
        self.pool = sentence_pool() if pool is None else pool
        self._bounds = [sum((rates.exact, rates.url, rates.near)[: n + 1]) for n in range(len(KINDS))]

    def kind(self, position: int) -> str:
        """``"original"`` or the kind of copy (:data:`KINDS`) of the document at ``position``."""
        if position == 0:
            return ORIGINAL
        draw = _stream(self.seed, "kind", position).random()
        for kind, bound in zip(KINDS, self._bounds, strict=True):
            if draw < bound:
                return kind
        return ORIGINAL

    def original_of(self, position: int) -> int:
        """The position of the original a copy at ``position`` copies: an earlier original, drawn uniformly."""
        stream = _stream(self.seed, "of", position)
        while True:
            earlier = stream.randrange(position)
            if self.kind(earlier) == ORIGINAL:
                return earlier

    def text(self, position: int) -> str:
        """The text an original at ``position`` has (a URL copy's own text is drawn the same way)."""
        stream = _stream(self.seed, "text", position)
        low, high = _DOCUMENT_SENTENCES
        count = min(high, int(math.exp(stream.uniform(math.log(low), math.log(high + 1)))))
        paragraphs = [[self.pool[stream.randrange(len(self.pool))]]]
        for _ in range(count - 1):
            if stream.random() < _PARAGRAPH_BREAK:
                paragraphs.append([])
            paragraphs[-1].append(self.pool[stream.randrange(len(self.pool))])
        return "\n".join(" ".join(paragraph) for paragraph in paragraphs)

    def url(self, position: int) -> str:
        """The URL of an original at ``position``."""
        stream = _stream(self.seed, "url", position)
        url = f"https://site{stream.randrange(_HOSTS)}.example/posts/{position}"
        if stream.random() < _QUERY_SHARE:
            url += f"?page={stream.randrange(1, 10)}&lang=en"
        return url

    def row(self, position: int) -> dict:
        """The document at ``position`` as a JSONL row; a copy's row also holds ``of``, its original's position."""
        kind = self.kind(position)
        if kind == ORIGINAL:
            return _row(position, self.text(position), self.url(position))
        original = self.original_of(position)
        if kind == "exact":
            text, url = self.text(original), f"https://mirror{original % _HOSTS}.example/copy/{position}"
        elif kind == "url":
            text, url = self.text(position), _respelled(self.url(original), _stream(self.seed, "respell", position))
        else:
            text, url = self._near_text(position, original), f"https://near{original % _HOSTS}.example/v/{position}"
        return {**_row(position, text, url), "of": original, "kind": kind}

    def _near_text(self, position: int, original: int) -> str:
        text = self.text(original)
        stream = _stream(self.seed, "near", position)
        while True:
            near = near_copy(text, self.rates.near_edit, seed=stream.randrange(1 << 32))
            # A draw that only replaced words by themselves (or by a case variant) would be an exact copy.
            if normalize_text(near) != normalize_text(text):
                return near

    def rows(self) -> Iterator[dict]:
        """Every document's :meth:`row`, in position order."""
        return (self.row(position) for position in range(self.documents))


def _row(position: int, text: str, url: str) -> dict:
    return {"id": document_id(position), "text": text, "metadata": {"url": url}}


def _respelled(url: str, stream: random.Random) -> str:
    """``url`` spelled otherwise, in ways beamtrove's URL normalization folds away (at least one of them)."""
    parts = urllib.parse.urlsplit(url)
    host, path, query, fragment = parts.hostname, parts.path, parts.query, ""
    changes = [name for name in ("case", "www", "port", "slash", "fragment", "query") if stream.random() < 0.5]
    if not changes or (changes == ["query"] and not query):
        changes.append(stream.choice(("case", "www", "port", "slash", "fragment")))
    if "case" in changes:
        host = host.upper()
    if "www" in changes:
        host = "www." + host
    if "port" in changes:
        host += ":443"
    if "slash" in changes:
        path += "/"
    if "fragment" in changes:
        fragment = "comments"
    if "query" in changes and query:
        query = "&".join(reversed(query.split("&")))
    return urllib.parse.urlunsplit((parts.scheme, host, path, query, fragment))


def write_corpus(
    out_dir: pathlib.Path, documents: int, files: int = 16, seed: int = 1, rates: CopyRates | None = None
) -> dict:
    """Writes a generated corpus into ``out_dir`` (see the module's docstring); returns what ``corpus.json`` holds.

    Rows stream to the files one at a time: memory stays that of the sentence pool at any count.
    """
    if files < 1:
        raise ValueError(f"files must be at least 1 (got {files})")
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / CORPUS_FILE).unlink(missing_ok=True)
    # The parts of a corpus written here before (more files, say) would be read with this one's.
    for stale in out_dir.glob("part-*.jsonl.gz"):
        stale.unlink()
    corpus = GeneratedCorpus(documents, seed, rates)
    counts = dict.fromkeys((ORIGINAL, *KINDS), 0)
    content_bytes = 0
    manifest_part = out_dir / f"{MANIFEST_FILE}.part"
    with manifest_part.open("w", encoding="utf-8") as manifest:
        for number in range(files):
            with _gzip_writer(out_dir / f"part-{number:05d}.jsonl.gz") as out:
                for position in range(number * documents // files, (number + 1) * documents // files):
                    row = corpus.row(position)
                    original, kind = row.pop("of", None), row.pop("kind", ORIGINAL)
                    counts[kind] += 1
                    if original is not None:
                        entry = {"id": row["id"], "kind": kind, "of": document_id(original)}
                        manifest.write(json.dumps(entry) + "\n")
                    line = (json.dumps(row, ensure_ascii=False) + "\n").encode("utf-8")
                    content_bytes += len(line)
                    out.write(line)
    manifest_part.replace(out_dir / MANIFEST_FILE)
    summary = {
        "documents": documents,
        "files": files,
        "seed": seed,
        "rates": dataclasses.asdict(corpus.rates),
        "sentences": len(corpus.pool),
        "counts": counts,
        "content_bytes": content_bytes,
    }
    (out_dir / CORPUS_FILE).write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    return summary


@contextlib.contextmanager
def _gzip_writer(path: pathlib.Path) -> Iterator[gzip.GzipFile]:
    """A gzip file whose header holds neither a time nor a name: the same rows give the same bytes."""
    with (
        path.open("wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=_GZIP_LEVEL, mtime=0) as out,
    ):
        yield out


# --------------------------------------------------------------------------- scoring a run


@dataclasses.dataclass(frozen=True)
class RemovalScore:
    """How a run's removals match the planted copies.

    Attributes:
        removed: Documents the run removed (any step).
        planted: Planted copies, per kind.
        found: Planted copies the run removed, per kind.
        removed_by_step: Documents each step removed.
        copies_by_step: Of those, planted copies.
    """

    removed: int
    planted: dict[str, int]
    found: dict[str, int]
    removed_by_step: dict[str, int]
    copies_by_step: dict[str, int]

    @property
    def precision(self) -> float:
        """Removed documents that are planted copies, over removed documents (1.0 when none was removed)."""
        return sum(self.found.values()) / self.removed if self.removed else 1.0

    @property
    def recall(self) -> float:
        """Planted copies removed, over planted copies (1.0 when none was planted)."""
        planted = sum(self.planted.values())
        return sum(self.found.values()) / planted if planted else 1.0

    def kind_recall(self, kind: str) -> float:
        """Copies of ``kind`` removed, over copies of ``kind`` planted (1.0 when none was planted)."""
        return self.found.get(kind, 0) / self.planted[kind] if self.planted.get(kind) else 1.0

    def step_precision(self, step: str) -> float:
        """Of what ``step`` removed, the share that are planted copies (1.0 when it removed nothing)."""
        removed = self.removed_by_step.get(step, 0)
        return self.copies_by_step.get(step, 0) / removed if removed else 1.0


def removal_score(run: pathlib.Path, manifest: pathlib.Path) -> RemovalScore:
    """Scores the documents a run folder's steps removed (``excluded/<step>/``) against a generated corpus's manifest.

    Args:
        run: A ``beamtrove run dedup`` output folder.
        manifest: The corpus's ``manifest.jsonl`` (or the corpus folder).
    """
    if manifest.is_dir():
        manifest = manifest / MANIFEST_FILE
    kinds = {entry["id"]: entry["kind"] for entry in read_jsonl([manifest])}
    planted = {kind: 0 for kind in KINDS}
    for kind in kinds.values():
        planted[kind] += 1
    removed_by_step, copies_by_step, removed = {}, {}, set()
    for step in sorted(path for path in (run / EXCLUDED_DIR).glob("*") if path.is_dir()):
        ids = excluded_ids(step)
        removed_by_step[step.name] = len(ids)
        copies_by_step[step.name] = sum(1 for id_ in ids if id_ in kinds)
        removed |= ids
    found = {kind: 0 for kind in KINDS}
    for id_ in removed:
        if id_ in kinds:
            found[kinds[id_]] += 1
    return RemovalScore(len(removed), planted, found, removed_by_step, copies_by_step)


# --------------------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser(__doc__)
    parser.add_argument("out_dir", type=pathlib.Path)
    parser.add_argument("--documents", type=int, required=True, help="documents in all, copies included")
    parser.add_argument("--files", type=int, default=16, help="JSONL files (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=1, help="(default: %(default)s)")
    defaults = CopyRates()
    for field in dataclasses.fields(CopyRates):
        name = field.name if field.name == "near_edit" else f"{field.name}_rate"
        default = getattr(defaults, field.name)
        parser.add_argument(f"--{name}", type=float, default=default, help="(default: %(default)s)")
    args = parser.parse_args(argv)
    try:
        rates = CopyRates(args.exact_rate, args.url_rate, args.near_rate, args.near_edit)
        summary = write_corpus(args.out_dir, args.documents, args.files, args.seed, rates)
    except ValueError as exc:
        parser.error(str(exc))
    except FileNotFoundError as exc:
        sys.exit(str(exc))
    counts = ", ".join(f"{count:,} {kind}" for kind, count in summary["counts"].items())
    print(f"{args.out_dir}: {args.documents:,} documents ({counts}), {summary['content_bytes']:,} bytes of rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
