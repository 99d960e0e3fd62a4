"""Rules whose settings depend on each document's language: FineWeb-2's per-language configs.

FineWeb-2 (Penedo et al. 2025) filters every language with its own
thresholds and stop words, published as one YAML file per language-script
pair (``configs/tha_Thai.yml`` in ``huggingface/fineweb-2``): the minimum
GlotLID ``language_score``, the Gopher repetition fractions, FineWeb quality's
``line_punct_thr`` and ``new_line_ratio``, Gopher quality's word lengths,
alphabetic ratio and stop words. :class:`LanguageConfigs` reads such a folder;
:class:`LanguageScoreFilter` keeps the documents of the languages it has a
config for, above their minimum score; :class:`PerLanguageFilter` applies a
rule built from each document's config, with words split the document's
language's way (``word_splitter="language"``).

A config is found by the document's :func:`~beamtrove.languages.language_key`
(``tha_Thai``). A language with no config of its own is dropped as
``no_language_config``, unless the configs are given a ``fallback`` language
whose config it borrows (its words are still split its own way).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import yaml

from beamtrove.document import Document
from beamtrove.fs import filesystem, open_url
from beamtrove.languages import LANGUAGE_SCORE, language_key, split_language
from beamtrove.transforms.filters.base import DocumentFilter, Drop, Verdict

__all__ = ["FINEWEB2_CONFIGS_SOURCE", "LanguageConfigs", "LanguageScoreFilter", "PerLanguageFilter"]

_SUFFIX = ".yml"
#: Where FineWeb-2 publishes its configs, for the messages that say how to get them.
FINEWEB2_CONFIGS_SOURCE = "https://github.com/huggingface/fineweb-2/tree/main/configs"
# Fields each FineWeb-2 config holds, checked when it is read so a damaged file fails with its name.
_REQUIRED = (
    "language_score",
    "dup_line_frac",
    "top_n_grams",
    "dup_n_grams",
    "line_punct_thr",
    "new_line_ratio",
    "min_avg_word_length",
    "max_avg_word_length",
    "max_non_alpha_words_ratio",
    "stopwords",
)


@functools.lru_cache(maxsize=512)
def _read_config(url: str) -> Mapping[str, Any]:
    """One config file's settings, read once per process."""
    with open_url(url) as file:
        settings = yaml.safe_load(file.read().decode("utf-8"))
    if not isinstance(settings, dict):
        raise ValueError(f"{url} is not a FineWeb-2 config: it holds no mapping of settings.")
    missing = [name for name in _REQUIRED if name not in settings]
    if missing:
        raise ValueError(f"{url} is not a FineWeb-2 config: it lacks {', '.join(missing)}.")
    return settings


class LanguageConfigs:
    """A folder of per-language settings: one ``<language>_<Script>.yml`` per language, as FineWeb-2 publishes them.

    The folder is listed once, when this is made; each file is read when a
    worker first meets its language. Instances pickle as the folder, its list
    of languages and the fallback.

    Args:
        folder: Local path or fsspec URL of the configs (FineWeb-2's ``configs/``).
        fallback: The language whose config a language without one borrows;
            None drops those languages' documents.

    Raises:
        FileNotFoundError: There is no such folder, or it holds no ``.yml`` file.
        ValueError: ``fallback`` has no config in the folder.
    """

    def __init__(self, folder: str, fallback: str | None = None):
        fs, path = filesystem(folder)
        if not fs.isdir(path):
            raise FileNotFoundError(
                f"No per-language config folder at {folder}: pass the configs/ folder of FineWeb-2 "
                f"({FINEWEB2_CONFIGS_SOURCE}; `git clone https://github.com/huggingface/fineweb-2`)."
            )
        names = (entry.rsplit("/", 1)[-1] for entry in fs.ls(path, detail=False))
        self.folder = folder.rstrip("/")
        self.languages: frozenset[str] = frozenset(name[: -len(_SUFFIX)] for name in names if name.endswith(_SUFFIX))
        if not self.languages:
            raise FileNotFoundError(f"{folder} holds no <language>_<Script>.yml config.")
        if fallback is not None and fallback not in self.languages:
            raise ValueError(f"The fallback language {fallback} has no config in {folder}: {self._hint(fallback)}")
        self.fallback = fallback

    def _hint(self, language: str) -> str:
        code, _ = split_language(language)
        same_code = sorted(known for known in self.languages if split_language(known)[0] == code)
        if same_code:
            return f"it has {', '.join(same_code)}."
        return "name a language as its files do, e.g. deu_Latn."

    def config_language(self, language: str | None) -> str | None:
        """The language whose config applies to ``language``: its own, the fallback, or None."""
        if language in self.languages:
            return language
        return self.fallback

    def settings(self, language: str) -> Mapping[str, Any]:
        """The settings of ``language``'s config (one of :attr:`languages`).

        Raises:
            ValueError: The file is not a FineWeb-2 config.
        """
        return _read_config(f"{self.folder}/{language}{_SUFFIX}")

    def check(self, languages: Iterable[str]) -> None:
        """Reads the configs of ``languages`` now, so that a missing or damaged one fails before a run.

        Raises:
            ValueError: One has no config (and there is no fallback), or its file is not a FineWeb-2 config.
        """
        for language in languages:
            found = self.config_language(language)
            if found is None:
                raise ValueError(f"{language} has no config in {self.folder}: {self._hint(language)}")
            self.settings(found)


class LanguageScoreFilter(DocumentFilter):
    """Keeps the documents of the languages that have a config, whose ``language_score`` reaches its minimum.

    FineWeb-2's step after GlotLID: a document is kept when its language has
    a config (its own or the fallback's) and its ``language_score`` is at
    least that config's ``language_score``. Drop reasons:
    ``no_language_config``, ``language`` (not one of ``languages``) and
    ``language_score``.

    Args:
        configs: The per-language configs.
        languages: Language keys (``tha_Thai``) or codes (``tha``, every
            script of it) to keep; None keeps every language with a config.
    """

    name = "language_score"
    counts_by_language = True

    def __init__(self, configs: LanguageConfigs, languages: Iterable[str] | None = None):
        self.configs = configs
        self.languages = None if languages is None else frozenset(languages)
        if self.languages is not None:
            configs.check(language for language in self.languages if split_language(language)[1] is not None)

    def _wanted(self, language: str) -> bool:
        return self.languages is None or not self.languages.isdisjoint((language, split_language(language)[0]))

    def filter(self, document: Document) -> Verdict:
        language = language_key(document.metadata)
        if language is None or not self._wanted(language):
            return Drop("language")
        found = self.configs.config_language(language)
        if found is None:
            return Drop("no_language_config")
        score = document.metadata.get(LANGUAGE_SCORE)
        if not isinstance(score, int | float) or score < self.configs.settings(found)["language_score"]:
            return Drop("language_score")
        return document


class PerLanguageFilter(DocumentFilter):
    """Applies to each document the rule built from its language's config.

    Each language's rule is built once per worker, the first time a document
    of that language comes: ``make(settings)`` with the settings of its
    config. A document whose language has none is dropped as
    ``no_language_config`` (:class:`LanguageScoreFilter`, run first, lets none
    through).

    Args:
        name: The step's name: the rule's own, so the counters and the
            ``excluded/<name>/`` folder read as the one-language rule's.
        configs: The per-language configs.
        make: Builds the rule from a config's settings; picklable (a module-level function or a
            ``functools.partial`` of one).
    """

    counts_by_language = True

    def __init__(self, name: str, configs: LanguageConfigs, make: Callable[[Mapping[str, Any]], DocumentFilter]):
        self.name = name
        self.configs = configs
        self.make = make
        self._rules: dict[str, DocumentFilter] = {}

    def __getstate__(self):
        return {**self.__dict__, "_rules": {}}

    def check(self, languages: Iterable[str]) -> None:
        """Builds the rules of ``languages`` now, so that bad settings fail before a run."""
        for language in languages:
            found = self.configs.config_language(language)
            if found is not None:
                self.make(self.configs.settings(found))

    def filter(self, document: Document) -> Verdict:
        found = self.configs.config_language(language_key(document.metadata))
        if found is None:
            return Drop("no_language_config")
        rule = self._rules.get(found)
        if rule is None:
            rule = self._rules[found] = self.make(self.configs.settings(found))
            rule.setup()
        return rule.filter(document)
