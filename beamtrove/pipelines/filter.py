"""``beamtrove run filter``: the filters and formatters a user chooses, over extracted documents.

``--steps`` names per-document steps in the order they run, from
:data:`FILTER_STEPS`: DataTrove's filters and formatters, so a recipe other
than FineWeb's (C4's, a classifier-filtered set) is one command over the
output of ``beamtrove run extract`` or any JSONL/Parquet/CSV documents.
Writes ``documents/``, ``excluded/<step>/`` (each dropped document with its
``filter_reason``), ``dead_letters/`` and ``stats.json`` under ``--output``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from apache_beam.options.pipeline_options import PipelineOptions

from beamtrove.configuration import ConfigurationError, did_you_mean
from beamtrove.options import Option, WordSplitterOptions, declared, word_splitting
from beamtrove.pipelines.common import RowInputOptions, documents_sink, row_reader
from beamtrove.pipelines.spec import DocumentStep, PipelineSpec
from beamtrove.pipelines.steps import (
    LanguageOptions,
    URLFilterOptions,
    filter_step,
    fixed_filter,
    language_filter,
    url_filter,
    word_counting_filter,
)
from beamtrove.transforms.decont import NGramsDecontFilter
from beamtrove.transforms.filters import (
    C4BadWordsFilter,
    C4ParagraphFilter,
    C4QualityFilter,
    FineWebQualityFilter,
    GopherQualityFilter,
    GopherRepetitionFilter,
)
from beamtrove.transforms.filters.classifier import FILTER_MODES, FastTextClassifierFilter, label_thresholds
from beamtrove.transforms.filters.unigram import LOGPROB_THRESHOLDS, UnigramLogProbFilter
from beamtrove.transforms.formatters import FTFYFormatter, PIIFormatter, SymbolLinesFormatter

__all__ = [
    "FILTER_STEPS",
    "SPEC",
    "C4BadWordsOptions",
    "ClassifierOptions",
    "DecontOptions",
    "FilterOptions",
    "StepChoice",
    "UnigramOptions",
]


@dataclasses.dataclass(frozen=True)
class StepChoice:
    """A step ``--steps`` can name.

    Attributes:
        make: Makes the step from the run's options.
        summary: What it does, in a few words, for ``--help``.
        options: The option class of its settings, if it has any.
    """

    make: Callable[[PipelineOptions], DocumentStep]
    summary: str
    options: type[PipelineOptions] | None = None


class C4BadWordsOptions(PipelineOptions):
    """The C4 bad-words filter's lists."""

    _add_argparse_args = declared(
        Option(
            "badwords_dir",
            "Folder (path or fsspec URL) holding one LDNOOBW bad-words list per language code, e.g. <dir>/en. "
            "Needed by the c4_badwords step.",
            reads="path",
        ),
        Option("badwords_languages", "Comma-separated languages whose lists to load. Default: en.", default="en"),
    )


def _c4_badwords(options: PipelineOptions) -> DocumentStep:
    own = options.view_as(C4BadWordsOptions)
    if not own.badwords_dir:
        raise ValueError("The c4_badwords step needs --badwords_dir, a folder of LDNOOBW lists named by language.")
    languages = tuple(code.strip() for code in own.badwords_languages.split(","))
    return filter_step(C4BadWordsFilter(own.badwords_dir, languages=languages))


class DecontOptions(PipelineOptions):
    """The decontamination indexes the decont step applies."""

    _add_argparse_args = declared(
        Option(
            "decont_index",
            "Comma-separated index folders written by `beamtrove run decont_index` (or DataTrove's "
            "NGramsDecontIndexer). Needed by the decont step.",
            reads="paths",
        ),
    )


def _decont(options: PipelineOptions) -> DocumentStep:
    given = options.view_as(DecontOptions).decont_index
    paths = [path.strip() for path in (given or "").split(",") if path.strip()]
    if not paths:
        raise ValueError("The decont step needs --decont_index, an index folder from `beamtrove run decont_index`.")
    word_tokenizers = options.view_as(WordSplitterOptions).word_tokenizers
    return filter_step(NGramsDecontFilter(paths, word_tokenizers=word_tokenizers))


class ClassifierOptions(PipelineOptions):
    """The fastText classifier step's model and labels."""

    _add_argparse_args = declared(
        Option(
            "classifier_model",
            "fastText classifier (.bin or .ftz, path or fsspec URL), e.g. from `beamtrove train-classifier`. "
            "Needed by the classifier step.",
            reads="path",
        ),
        Option(
            "classifier_labels",
            "Comma-separated label:minimum pairs; a text is kept when one label scores at least its minimum. "
            "Default: hq:0.5.",
            default="hq:0.5",
            check=label_thresholds,
        ),
        Option(
            "classifier_remove_labels",
            "Comma-separated label:minimum pairs; a text is removed when one label scores at least its minimum "
            "(instead of --classifier_labels).",
            check=label_thresholds,
        ),
        Option(
            "classifier_mode",
            "What is scored and kept or removed. Default: document.",
            choices=FILTER_MODES,
            default="document",
        ),
        Option(
            "classifier_newline_replacement",
            "What replaces line breaks before scoring; the one the model was trained with. Default: '' (DataTrove's).",
            default="",
        ),
    )


def _classifier(options: PipelineOptions) -> DocumentStep:
    own = options.view_as(ClassifierOptions)
    if not own.classifier_model:
        raise ValueError("The classifier step needs --classifier_model, a fastText classifier.")
    remove = label_thresholds(own.classifier_remove_labels or "", "--classifier_remove_labels")
    keep = [] if remove else label_thresholds(own.classifier_labels, "--classifier_labels")
    return filter_step(
        FastTextClassifierFilter(
            own.classifier_model,
            keep_labels=keep,
            remove_labels=remove,
            newline_replacement=own.classifier_newline_replacement,
            filter_mode=own.classifier_mode,
        )
    )


class UnigramOptions(PipelineOptions):
    """The unigram log-probability step's table and threshold."""

    _add_argparse_args = declared(
        Option(
            "unigram_table",
            "word,count CSV table (path or fsspec URL), e.g. Google's 1T unigram_freq.csv that DataTrove downloads. "
            "Default: wordfreq's English frequencies (pip install 'beamtrove[unigram]').",
            reads="path",
        ),
        Option(
            "unigram_threshold",
            "Average log probability a document must exceed. Default: -10.",
            float,
            -10.0,
            range=LOGPROB_THRESHOLDS,
        ),
    )


def _unigram(options: PipelineOptions) -> DocumentStep:
    own = options.view_as(UnigramOptions)
    splitting = word_splitting(options)
    return filter_step(UnigramLogProbFilter(own.unigram_threshold, table=own.unigram_table, **splitting))


#: Step name -> the step, in the order ``--help`` lists them. Names are the steps' stats names.
FILTER_STEPS: dict[str, StepChoice] = {
    "url_filter": StepChoice(url_filter, "UT1 URL blocklist, as FineWeb", URLFilterOptions),
    "language_filter": StepChoice(language_filter, "fastText language ID", LanguageOptions),
    "gopher_repetition": StepChoice(
        word_counting_filter(GopherRepetitionFilter), "Gopher repetition rules", WordSplitterOptions
    ),
    "gopher_quality": StepChoice(
        word_counting_filter(GopherQualityFilter), "Gopher quality rules", WordSplitterOptions
    ),
    "c4_quality": StepChoice(fixed_filter(C4QualityFilter), "C4's line and document rules (DataTrove's defaults)"),
    "c4_badwords": StepChoice(_c4_badwords, "C4 bad-words lists", C4BadWordsOptions),
    "c4_paragraph": StepChoice(fixed_filter(C4ParagraphFilter), "mC4's paragraph rule: 3 lines of 200+ characters"),
    "fineweb_quality": StepChoice(
        word_counting_filter(FineWebQualityFilter), "FineWeb's quality rules", WordSplitterOptions
    ),
    "ftfy": StepChoice(fixed_filter(FTFYFormatter), "ftfy's encoding repairs (mojibake), DataTrove's settings"),
    "symbol_lines": StepChoice(fixed_filter(SymbolLinesFormatter), "removal of lines made only of symbols"),
    "pii": StepChoice(fixed_filter(PIIFormatter), "masking of e-mail and public IPv4 addresses"),
    "decont": StepChoice(_decont, "benchmark n-gram decontamination", DecontOptions),
    "classifier": StepChoice(_classifier, "any fastText classifier, label thresholds (DCLM-style)", ClassifierOptions),
    "unigram_logprob": StepChoice(_unigram, "average unigram log probability of the words (peS2o)", UnigramOptions),
}


class FilterOptions(PipelineOptions):
    """Options of the filter pipeline."""

    _add_argparse_args = declared(
        Option(
            "steps",
            "Comma-separated steps to run, in this order (required): "
            + "; ".join(f"{name} ({choice.summary})" for name, choice in FILTER_STEPS.items())
            + ".",
        ),
    )


def _chosen_steps(options: PipelineOptions) -> list[str]:
    """The step names ``--steps`` gives, in order.

    Raises:
        ConfigurationError: None given, an unknown name, or a name given twice.
    """
    given = options.view_as(FilterOptions).steps
    names = [name.strip() for name in (given or "").split(",") if name.strip()]
    if not names:
        raise ConfigurationError(f"filter needs --steps, a comma-separated list of: {', '.join(FILTER_STEPS)}.")
    for name in names:
        if name not in FILTER_STEPS:
            hint = did_you_mean(name, FILTER_STEPS)
            suggestion = f" Did you mean {hint!r}?" if hint else ""
            raise ConfigurationError(
                f"Unknown step {name!r} in --steps; available: {', '.join(FILTER_STEPS)}.{suggestion}"
            )
        if names.count(name) > 1:
            raise ConfigurationError(f"--steps names {name!r} twice; each step runs once.")
    return names


def _step_factory(position: int) -> Callable[[PipelineOptions], DocumentStep | None]:
    """Makes the ``position``-th step ``--steps`` names, or None past the last."""

    def make(options: PipelineOptions) -> DocumentStep | None:
        names = _chosen_steps(options)
        return FILTER_STEPS[names[position]].make(options) if position < len(names) else None

    return make


def _option_classes() -> tuple[type[PipelineOptions], ...]:
    """The steps' option classes, each once, in the order of the steps."""
    classes = [choice.options for choice in FILTER_STEPS.values() if choice.options is not None]
    return tuple(dict.fromkeys(classes))


SPEC = PipelineSpec(
    name="filter",
    description="Run the filters and formatters --steps names, in order, over JSONL/Parquet/CSV documents.",
    options=(FilterOptions, *_option_classes(), RowInputOptions),
    reader=row_reader,
    steps=tuple(_step_factory(position) for position in range(len(FILTER_STEPS))),
    sink=documents_sink,
    resumable=True,
    summary_stats=True,
)
