"""``beamtrove train-classifier``: a small fastText quality classifier from documents to keep and to drop.

DCLM filters with a fastText classifier trained on high-quality text
(positives) against ordinary web text (negatives). This command trains such
a model from two sets of documents, for ``FastTextClassifierFilter`` (the
``classifier`` step of ``beamtrove run filter``) to use. Texts are
normalized as the filter normalizes them before predicting: stripped, line
breaks replaced.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import glob
import itertools
import math
import multiprocessing
import os
import pathlib
import random
import shutil
import signal
import tempfile
from collections.abc import Iterator, Sequence

from beamtrove.cli.parsing import command
from beamtrove.configuration import ConfigurationError
from beamtrove.dead_letter import DeadLetter
from beamtrove.formats import input_format
from beamtrove.processes import die_with_parent, stops_interrupt
from beamtrove.run_output import documents_of_run, read_documents

__all__ = ["LabelScores", "TrainingSettings", "add_commands", "train_classifier"]

_LABEL_PREFIX = "__label__"


@dataclasses.dataclass(frozen=True)
class TrainingSettings:
    """How the classifier is trained: fastText's supervised defaults, with word bigrams and fewer hash buckets.

    Attributes:
        positive_label: Label of the documents to keep (without ``__label__``).
        negative_label: Label of the others.
        epoch: Passes over the training texts.
        word_ngrams: Longest word n-gram used as a feature.
        dim: Size of the word vectors.
        bucket: Hash buckets of the n-grams; fastText's 2,000,000 make a
            0.9 GB model at ``dim`` 100, which a small training set does not need.
        lr: Learning rate.
        min_count: Words seen fewer times are left out.
        seed: Seeds the validation split, the order of the texts, the
            balancing and fastText.
        balance: Train on as many texts of each label: the larger set is
            cut to a random sample the size of the smaller.
        validation: Share of each set held out to measure the model.
        newline_replacement: What replaces line breaks, as the filter's
            option of that name (keep them equal).
    """

    positive_label: str = "hq"
    negative_label: str = "lq"
    epoch: int = 5
    word_ngrams: int = 2
    dim: int = 100
    bucket: int = 200_000
    lr: float = 0.1
    min_count: int = 1
    seed: int = 0
    balance: bool = False
    validation: float = 0.1
    newline_replacement: str = ""


@dataclasses.dataclass(frozen=True)
class LabelScores:
    """How the model does on one label of the held-out texts.

    Attributes:
        label: The label, without ``__label__``.
        held_out: Held-out texts of that label.
        precision: Share of the texts predicted with the label that have it (NaN when none is).
        recall: Share of the texts with the label predicted with it.
    """

    label: str
    held_out: int
    precision: float
    recall: float


def _line(label: str, text: str) -> str:
    return f"{_LABEL_PREFIX}{label} {text}\n"


def _split(texts: list[str], share: float, rng: random.Random) -> tuple[list[str], list[str]]:
    """``(training, held out)``: ``share`` of ``texts``, drawn at random, held out."""
    order = list(range(len(texts)))
    rng.shuffle(order)
    held = round(len(texts) * share)
    return [texts[i] for i in order[held:]], [texts[i] for i in order[:held]]


def train_classifier(
    positive: Sequence[str],
    negative: Sequence[str],
    model_path: str | pathlib.Path,
    settings: TrainingSettings = TrainingSettings(),
    quantized_path: str | pathlib.Path | None = None,
) -> list[LabelScores]:
    """Trains a fastText classifier and writes it to ``model_path`` (and a quantized copy to ``quantized_path``).

    Training is deterministic for a seed: one fastText thread, texts in an
    order drawn from the seed, in a fresh process (fasttext-numpy2 starts
    training from memory it does not clear, which in a process that has run
    other work holds leftovers: its models then vary and it can fail with
    NaN weights). It works in a hidden folder beside the model, removed
    however training ends (one a killed run left is removed by the next run
    writing the same model); each model appears under its name whole, by a
    rename.

    Args:
        positive: Texts of documents to keep.
        negative: Texts of documents to drop.
        model_path: Where to write the model (``.bin``), a local path.
        settings: How to train.
        quantized_path: Where to write the quantized model (``.ftz``), if wanted.

    Returns:
        The scores of the model on the held-out texts, per label (none
        when nothing is held out).

    Raises:
        ValueError: A set has no text to train on, or fastText's training failed.
        OSError: A model cannot be written where asked (a folder has its name).
    """
    import fasttext  # noqa: PLC0415 - only this command reads the model it trained

    normalized = {
        label: [text.strip().replace("\n", settings.newline_replacement) for text in texts]
        for label, texts in ((settings.positive_label, positive), (settings.negative_label, negative))
    }
    rng = random.Random(settings.seed)
    splits = {
        label: _split([text for text in texts if text], settings.validation, rng) for label, texts in normalized.items()
    }
    if settings.balance:
        fewest = min(len(learn) for learn, _ in splits.values())
        splits = {label: (rng.sample(learn, fewest), held) for label, (learn, held) in splits.items()}
    training, held_out = [], []
    for label, (learn, held) in splits.items():
        if not learn:
            raise ValueError(f"No {label} document has text to train on once {settings.validation:.0%} is held out.")
        training.extend(_line(label, text) for text in learn)
        held_out.extend(_line(label, text) for text in held)
    rng.shuffle(training)
    model_path = pathlib.Path(model_path)
    with _scratch_beside(model_path) as folder:
        training_file, held_out_file = folder / "train.txt", folder / "held_out.txt"
        training_file.write_text("".join(training), encoding="utf-8")
        held_out_file.write_text("".join(held_out), encoding="utf-8")
        trained, quantized = folder / "model.bin", folder / "model.ftz"
        quantize_to = None if quantized_path is None else str(quantized)
        # Leaving the block stops the trainer, so an interrupted command does not leave it training.
        with multiprocessing.get_context("spawn").Pool(
            1, initializer=_serve_the_command, initargs=(os.getpid(),)
        ) as trainer:
            job = trainer.apply_async(_train_and_save, (str(training_file), settings, str(trained), quantize_to))
            try:
                job.get()
            except RuntimeError as exc:  # fastText's only training error: its weights became NaN
                raise ValueError(
                    f"fastText's training failed ({exc}); another --dim, --lr or --seed usually trains"
                ) from None
        scores = _label_scores(fasttext.load_model(str(trained)), held_out_file, held_out) if held_out else []
        os.replace(trained, model_path)
        if quantized_path is not None:
            os.replace(quantized, quantized_path)
        return scores


@contextlib.contextmanager
def _scratch_beside(model_path: pathlib.Path) -> Iterator[pathlib.Path]:
    """A new hidden folder beside ``model_path`` to train in, locked while in use and removed however the block ends.

    Beside the model, the trained file is renamed into place rather than
    copied. Folders of earlier runs for the same model whose lock is free
    (their run was killed) are removed first.
    """
    prefix = f".{model_path.name}.training-"
    model_path.parent.mkdir(parents=True, exist_ok=True)
    for leftover in model_path.parent.glob(glob.escape(prefix) + "*"):
        _remove_if_abandoned(leftover)
    folder = pathlib.Path(tempfile.mkdtemp(prefix=prefix, dir=model_path.parent))
    lock = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        os.close(lock)


def _remove_if_abandoned(folder: pathlib.Path) -> None:
    """Removes a scratch folder unless a live run holds its lock (the kernel frees a dead run's)."""
    try:
        lock = os.open(folder, os.O_RDONLY)
    except OSError:  # gone meanwhile, or not a folder: nothing of ours
        return
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        shutil.rmtree(folder, ignore_errors=True)
    except BlockingIOError:
        pass
    finally:
        os.close(lock)


def _serve_the_command(command_pid: int) -> None:
    """Set up the trainer: it ends with the command, which alone answers Ctrl-C (it reaches the whole group)."""
    die_with_parent(command_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _train_and_save(
    training_file: str, settings: TrainingSettings, model_path: str, quantized_path: str | None
) -> None:
    """Trains on ``training_file`` and writes the model (and its quantized copy); run in a fresh process."""
    import fasttext  # noqa: PLC0415 - imported in the training process

    model = fasttext.train_supervised(
        input=training_file,
        epoch=settings.epoch,
        wordNgrams=settings.word_ngrams,
        dim=settings.dim,
        bucket=settings.bucket,
        lr=settings.lr,
        minCount=settings.min_count,
        seed=settings.seed,
        thread=1,
        verbose=0,
    )
    model.save_model(model_path)
    if quantized_path is not None:
        model.quantize(input=training_file, retrain=False)
        model.save_model(quantized_path)


def _label_scores(model, held_out_file: pathlib.Path, held_out: list[str]) -> list[LabelScores]:
    measured = model.test_label(str(held_out_file))
    return [
        LabelScores(
            label.removeprefix(_LABEL_PREFIX),
            sum(line.startswith(label + " ") for line in held_out),
            scores["precision"],
            scores["recall"],
        )
        for label, scores in sorted(measured.items())
    ]


def _texts(paths: list[str], limit: int | None) -> tuple[list[str], int]:
    """The texts of the documents ``paths`` hold (at most ``limit``), and how many records could not be read.

    A run's output folder stands for its ``documents/``.
    """
    folders = [documents_of_run(path) for path in paths]
    try:
        file_format = input_format("auto", folders)
        if file_format == "warc":
            raise ValueError(f"{folders[0]}: WARC files hold pages; extract their text first (beamtrove run extract)")
        records = read_documents(folders, file_format)
    except (FileNotFoundError, ValueError) as exc:
        raise ConfigurationError(str(exc)) from None
    unreadable = 0

    def documents() -> Iterator[str]:
        nonlocal unreadable
        for outcome in records:
            if isinstance(outcome, DeadLetter):
                unreadable += 1
            else:
                yield outcome.document.text

    texts = list(itertools.islice(documents(), limit))
    return texts, unreadable


def _train(args: argparse.Namespace, _: list[str]) -> int:
    """Train a small fastText quality classifier from documents to keep (--positive) and to drop (--negative).

    Each set is JSONL, Parquet or CSV files, folders or globs, or a run's
    output folder (its documents/). Texts are stripped and their line breaks
    replaced (--newline_replacement) as FastTextClassifierFilter does before
    predicting, labelled __label__hq and __label__lq by default, and
    --validation of each set is held out; --balance trains on as many
    texts of each set. Training uses one fastText thread, in a fresh process:
    the same sets and --seed give the same model. Prints the held-out
    precision and recall per label, and writes the model (.bin) to --output
    and, with --quantize, a quantized copy beside it (.ftz). Use it with
    `beamtrove run filter --steps classifier --classifier_model MODEL`.
    """
    settings = TrainingSettings(
        positive_label=args.positive_label,
        negative_label=args.negative_label,
        epoch=args.epoch,
        word_ngrams=args.word_ngrams,
        dim=args.dim,
        bucket=args.bucket,
        lr=args.lr,
        min_count=args.min_count,
        seed=args.seed,
        balance=args.balance,
        validation=args.validation,
        newline_replacement=args.newline_replacement,
    )
    if not 0 <= settings.validation < 1:
        raise ConfigurationError(f"--validation is a share from 0 to below 1, not {settings.validation}.")
    if settings.positive_label == settings.negative_label:
        raise ConfigurationError(f"--positive_label and --negative_label are both {settings.positive_label!r}.")
    model_path, quantized_path = _model_paths(args.output, args.quantize)
    positive, positive_unreadable = _texts(args.positive, args.limit)
    negative, negative_unreadable = _texts(args.negative, args.limit)
    print(
        f"documents: {len(positive)} {settings.positive_label} ({positive_unreadable} unreadable records), "
        f"{len(negative)} {settings.negative_label} ({negative_unreadable} unreadable records)"
    )
    try:
        with stops_interrupt():
            scores = train_classifier(positive, negative, model_path, settings, quantized_path)
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from None
    for score in scores:
        # fastText's precision of a label it never predicted is NaN.
        precision = "none predicted" if math.isnan(score.precision) else f"{score.precision:.4f}"
        print(f"held out {score.label}: {score.held_out} documents, precision {precision}, recall {score.recall:.4f}")
    print(model_path)
    if quantized_path is not None:
        print(quantized_path)
    return 0


def _model_paths(output: str, quantize: bool) -> tuple[pathlib.Path, pathlib.Path | None]:
    """The model's path and its quantized copy's, refused before any reading when no file can be written there."""
    model_path = pathlib.Path(output)
    quantized_path = model_path.with_suffix(".ftz") if quantize else None
    if output.endswith(("/", os.sep)) or model_path.is_dir():
        raise ConfigurationError(
            f"--output {output} is a folder: give the model's file, e.g. --output {model_path / 'model.bin'}"
        )
    if quantized_path is not None and quantized_path.is_dir():
        raise ConfigurationError(
            f"--quantize writes {quantized_path}, which is a folder: move it, or give another --output"
        )
    folder = next(parent for parent in model_path.absolute().parents if parent.exists())
    if not folder.is_dir():
        raise ConfigurationError(f"--output {output} cannot be written: {folder} is a file, not a folder")
    return model_path, quantized_path


def add_commands(commands) -> None:
    """Adds ``train-classifier`` to the tree."""
    train = command(commands, "train-classifier", _train)
    defaults = TrainingSettings()
    train.add_argument("--positive", nargs="+", required=True, metavar="PATH", help="documents to keep")
    train.add_argument("--negative", nargs="+", required=True, metavar="PATH", help="documents to drop")
    train.add_argument("--output", required=True, help="where to write the model, a local .bin path")
    train.add_argument("--quantize", action="store_true", help="also write a quantized model (.ftz) beside it")
    train.add_argument("--positive_label", default=defaults.positive_label, help="default: %(default)s")
    train.add_argument("--negative_label", default=defaults.negative_label, help="default: %(default)s")
    train.add_argument("--epoch", type=int, default=defaults.epoch, help="default: %(default)s")
    train.add_argument("--word_ngrams", type=int, default=defaults.word_ngrams, help="default: %(default)s")
    train.add_argument("--dim", type=int, default=defaults.dim, help="default: %(default)s")
    train.add_argument("--bucket", type=int, default=defaults.bucket, help="n-gram hash buckets; default: %(default)s")
    train.add_argument("--lr", type=float, default=defaults.lr, help="default: %(default)s")
    train.add_argument("--min_count", type=int, default=defaults.min_count, help="default: %(default)s")
    train.add_argument("--seed", type=int, default=defaults.seed, help="default: %(default)s")
    train.add_argument(
        "--validation", type=float, default=defaults.validation, help="share held out; default: %(default)s"
    )
    train.add_argument(
        "--balance", action="store_true", help="cut the larger set to a random sample the size of the smaller"
    )
    train.add_argument("--limit", type=int, help="read at most this many documents of each set")
    train.add_argument(
        "--newline_replacement",
        default=defaults.newline_replacement,
        help="what replaces line breaks; give the filter the same (DCLM: ' '); default: '' as DataTrove",
    )
