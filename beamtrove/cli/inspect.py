"""``beamtrove inspect``: read the documents of a run's output, or of JSONL/Parquet/CSV files, in the terminal.

The files are read one after the other in name order and reading stops
once ``--limit`` documents are shown, so the first page of a large folder
comes at once. On a terminal the lines go through the pager (``$PAGER``,
else ``less``) as they are made; otherwise they are written plainly.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import itertools
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TextIO

import orjson

from beamtrove.cli.pager import paged_output
from beamtrove.cli.parsing import command
from beamtrove.configuration import ConfigurationError, did_you_mean
from beamtrove.dead_letter import DeadLetter
from beamtrove.document import document_row
from beamtrove.formats import SUFFIXES, input_format
from beamtrove.fs import InputFile, filesystem, has_glob, is_glob
from beamtrove.layout import DEAD_LETTERS_DIR, DOCUMENTS_DIR, EXCLUDED_DIR, FILTER_REASON_KEY, RUN_MARKS
from beamtrove.run_output import OutputRecord, Records, RunOutput, read_documents, ready_to_read

__all__ = ["add_commands"]

_DEFAULT_LIMIT = 20
_SNIPPET_CHARS = 300
_VALUE_CHARS = 80
_NEWLINES = re.compile(r"\s*\n\s*")
_NEWLINE_MARK = " ⏎ "
#: Metadata shown by default besides the URL, the filter reason and the source.
_KEY_METADATA = ("language", "language_score", "date", "dump", "token_count", "minhash_cluster_size")
_SHOWN_APART = ("url", FILTER_REASON_KEY, "file_path", "offset")
_ALL_FIELDS = "all"
_CONTENTS_LISTED = 12
_FORMATS = ("auto", "jsonl", "parquet", "csv")


@dataclasses.dataclass(frozen=True)
class _Selection:
    """What to read.

    Attributes:
        records: The records, files in the order to read them.
        title: The header's first line.
        dead_letters: The records are dead letters, not documents.
        details: More header lines (per-reason counts).
    """

    records: Records
    title: str
    dead_letters: bool = False
    details: tuple[str, ...] = ()


def _inspect(args: argparse.Namespace, _: list[str]) -> int:
    """Show documents of a run's output, or of JSONL/Parquet/CSV files, in the terminal.

    PATH is a run's output folder (its documents/, or with --excluded what
    its filters dropped, with --dead-letters the records it could not read or
    process), or a file, folder or glob of JSONL (.gz, .zst, ...), Parquet or
    CSV documents. Each document shows its id, URL, the step and reason that
    excluded it, key metadata and the start of its text (newlines as ⏎).
    Files are read in name order and reading stops at --limit; on a terminal
    the output goes through $PAGER (else less). Unreadable records are shown
    as such and skipped.
    """
    grep = _pattern(args.grep)
    selection = _select(args)
    with paged_output(sys.stdout.isatty()) as out:
        unreadable = functools.partial(_report_unreadable, *((sys.stderr, "") if args.json else (out, "\n")))
        records = (
            record
            for record in _readable(selection.records, unreadable)
            if _matches(record, args.reason, args.id, grep, selection.dead_letters)
        )
        shown = itertools.islice(records, args.skip, args.skip + args.limit if args.limit else None)
        if args.json:
            for record in shown:
                row = record.document.metadata if selection.dead_letters else document_row(record.document)
                out.write(orjson.dumps(row).decode() + "\n")
        else:
            _write_text(out, selection, shown, args)
    return 0


def _write_text(out: TextIO, selection: _Selection, records: Iterable[OutputRecord], args: argparse.Namespace) -> None:
    out.write("\n".join((selection.title, *selection.details)) + "\n")
    label = "excerpt" if selection.dead_letters else "text"
    count = 0
    for count, record in enumerate(records, start=1):
        lines = _dead_letter_lines(record) if selection.dead_letters else _document_lines(record, args.fields)
        out.write("\n" + "\n".join(_numbered(args.skip + count, lines, record.document.text, label, args.full)) + "\n")
        out.flush()
    out.write("\n" + _footer(count, args) + "\n")


def _footer(count: int, args: argparse.Namespace) -> str:
    filters = " ".join(
        f"{option} {value}"
        for option, value in (("--reason", args.reason), ("--id", args.id), ("--grep", args.grep))
        if value is not None
    )
    if count == 0:
        return f"nothing matches {filters}" if filters else "nothing to show"
    if args.limit and count == args.limit:
        return f"{count} shown (--limit {args.limit}); the next ones: --skip {args.skip + count}"
    return f"{count} shown, all that match {filters}" if filters else f"{count} shown, all there are"


def _numbered(number: int, lines: list[tuple[str, str]], text: str, label: str, full: bool) -> Iterator[str]:
    (_, head), *fields = lines
    yield f"[{number}] {head}"
    for name, value in fields:
        yield f"    {name:<9} {value}"
    if not text:
        return
    if full:
        yield f"    {label:<9} {len(text):,} chars:"
        yield "      " + text.replace("\n", "\n      ")
    else:
        yield f"    {label:<9} {len(text):,} chars: {_snippet(text)}"


def _document_lines(record: OutputRecord, fields: str | None) -> list[tuple[str, str]]:
    metadata = record.document.metadata
    lines = [("id", record.document.id or "(no id)")]
    if "url" in metadata:
        lines.append(("url", str(metadata["url"])))
    if record.reason is not None or record.step is not None:
        lines.append(("excluded", ": ".join(filter(None, (record.step, record.reason)))))
    shown = _chosen_metadata(metadata, fields)
    if shown:
        lines.append(("metadata", " · ".join(f"{key}={_value(value)}" for key, value in shown.items())))
    if "file_path" in metadata:
        lines.append(("source", _where(metadata["file_path"], metadata.get("offset"), None)))
    return lines


def _dead_letter_lines(record: OutputRecord) -> list[tuple[str, str]]:
    letter = record.document.metadata
    lines = [("reason", f"{letter.get('reason', '?')} (step {letter.get('step', '?')})")]
    lines.append(("message", str(letter.get("message", ""))))
    if "file" in letter:
        lines.append(("source", _where(letter["file"], letter.get("offset"), letter.get("line"))))
    lines.extend((key, str(letter[key])) for key in ("record_id", "url") if key in letter)
    return lines


def _chosen_metadata(metadata: Mapping[str, Any], fields: str | None) -> dict[str, Any]:
    if fields == _ALL_FIELDS:
        return {key: value for key, value in metadata.items() if key not in _SHOWN_APART}
    keys = _KEY_METADATA if fields is None else [key.strip() for key in fields.split(",") if key.strip()]
    return {key: metadata[key] for key in keys if key in metadata}


def _value(value: Any) -> str:
    if isinstance(value, float):
        text = f"{value:.4g}"
    else:
        text = value if isinstance(value, str) else orjson.dumps(value, default=str).decode()
    return text if len(text) <= _VALUE_CHARS else text[: _VALUE_CHARS - 1] + "…"


def _where(file: Any, offset: Any, line: Any) -> str:
    return " ".join(
        (str(file), *(f"{name} {value}" for name, value in (("offset", offset), ("line", line)) if value is not None))
    )


def _snippet(text: str) -> str:
    compact = _NEWLINES.sub(_NEWLINE_MARK, text.strip()).replace("\t", " ").replace("\r", " ")
    return compact if len(compact) <= _SNIPPET_CHARS else compact[: _SNIPPET_CHARS - 1] + "…"


def _matches(
    record: OutputRecord, reason: str | None, doc_id: str | None, grep: re.Pattern | None, letters: bool
) -> bool:
    if reason is not None and not (record.reason or "").startswith(reason):
        return False
    if doc_id is not None and record.document.id != doc_id:
        return False
    if grep is None:
        return True
    searched = record.document.text
    if letters:
        searched = f"{record.document.metadata.get('message', '')}\n{searched}"
    return grep.search(searched) is not None


def _report_unreadable(out: TextIO, separator: str, letter: DeadLetter) -> None:
    where = _where(letter.file, letter.offset, letter.line)
    out.write(f"{separator}[unreadable] {where}: {letter.reason}: {letter.message}\n")


def _readable(records: Records, unreadable: Callable[[DeadLetter], None]) -> Iterator[OutputRecord]:
    """``records``, what cannot be read told to ``unreadable`` in its place."""
    for record in records:
        if isinstance(record, DeadLetter):
            unreadable(record)
        else:
            yield record


def _pattern(grep: str | None) -> re.Pattern | None:
    try:
        return None if grep is None else re.compile(grep)
    except re.error as exc:
        raise ConfigurationError(f"--grep {grep!r} is not a regular expression: {exc}") from None


def _select(args: argparse.Namespace) -> _Selection:
    """What the paths and the options ask to read."""
    for path in args.paths:
        fs, fs_path = filesystem(path)
        if not has_glob(fs_path) and not fs.exists(fs_path):
            raise ConfigurationError(
                f"{path} does not exist: pass a run's output folder, or JSONL, Parquet or CSV files, folders or globs"
            )
        ready_to_read(path)
    first, *others = args.paths
    run = None if others else RunOutput.at(first)
    if run is not None:
        if args.dead_letters:
            return _dead_letters(run, _stats(run))
        if args.excluded is not None or args.reason is not None:
            return _excluded(run, args.excluded or None, _stats(run))
        return _documents(run)
    if args.excluded is not None or args.dead_letters:
        option = "--dead-letters" if args.dead_letters else "--excluded"
        raise ConfigurationError(
            f"{option} reads a run's output folder, and {_named(args.paths)} is not one (it holds no "
            f"{' or '.join(RUN_MARKS)}); pass the --output of a run"
        )
    records = _records_of_files(args.paths, args.input_format)
    return _Selection(records, _title(_named(args.paths), records.files))


def _named(paths: list[str]) -> str:
    return paths[0] if len(paths) == 1 else f"{paths[0]} and {len(paths) - 1} more"


def _documents(run: RunOutput) -> _Selection:
    records = run.documents()
    if not records.files:
        raise ConfigurationError(
            f"{run.folder} holds no {DOCUMENTS_DIR}/: the run kept no document. It holds {_contents(run.folder)}; "
            "pass --excluded to see what its filters dropped, --dead-letters what it could not read"
        )
    return _Selection(records, _title(run.documents_folder, records.files))


def _excluded(run: RunOutput, step: str | None, stats: Mapping[str, Any]) -> _Selection:
    folder = run.path(EXCLUDED_DIR)
    present = run.excluded_steps()
    if not present:
        raise ConfigurationError(f"{run.folder} holds no {EXCLUDED_DIR}/ folder: its run excluded no document")
    if step is not None and step not in present:
        suggestion = did_you_mean(step, present)
        known = step in stats.get("steps", {})
        raise ConfigurationError(
            f"{folder} holds nothing excluded by {'the' if known else 'a'} step {step!r}"
            + (" (it excluded no document)" if known else f" (did you mean {suggestion!r}?)" if suggestion else "")
            + f"; the steps that excluded documents are {', '.join(present)}"
        )
    funnel = list(stats.get("funnel", ()))
    steps = [step] if step is not None else sorted(present, key=lambda name: (_position(funnel, name), name))
    records = run.excluded(steps)
    details = tuple(f"  {name}: {_counts(stats, name, 'dropped.')}" for name in steps)
    where = folder if step is None else run.path(EXCLUDED_DIR, step)
    return _Selection(records, _title(where, records.files), details=details if stats else ())


def _position(funnel: list[str], step: str) -> int:
    return funnel.index(step) if step in funnel else len(funnel)


def _dead_letters(run: RunOutput, stats: Mapping[str, Any]) -> _Selection:
    folder = run.path(DEAD_LETTERS_DIR)
    if not run.holds(DEAD_LETTERS_DIR):
        raise ConfigurationError(
            f"{run.folder} holds no {DEAD_LETTERS_DIR}/ folder: its run read and processed every record"
        )
    records = run.dead_letters()
    if not records.files:
        raise ConfigurationError(
            f"{folder} holds no dead letters ({', '.join(SUFFIXES['jsonl'])} files): it holds {_contents(folder)}"
        )
    steps = stats.get("steps", {})
    details = tuple(
        f"  {name}: {_counts(stats, name, 'errors.')}"
        for name in steps
        if any(counter.startswith("errors.") for counter in steps[name].get("counters", {}))
    )
    return _Selection(records, _title(folder, records.files), dead_letters=True, details=details)


def _records_of_files(paths: list[str], requested_format: str) -> Records:
    """The documents ``paths`` hold; refuses paths that hold none."""
    try:
        file_format = input_format(requested_format, paths)
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from None
    except FileNotFoundError:
        folders = [path for path in paths if _is_folder(path)]
        raise ConfigurationError(
            f"no JSONL, Parquet or CSV files under {', '.join(folders)}: "
            + "; ".join(f"{folder} holds {_contents(folder)}" for folder in folders)
        ) from None
    if file_format == "warc":
        raise ConfigurationError(
            f"{_named(paths)}: WARC files hold pages rather than documents; extract their text first "
            "(beamtrove run extract --input ... --output OUT) and inspect OUT"
        )
    try:
        return read_documents(paths, file_format)
    except (FileNotFoundError, ValueError) as exc:
        raise ConfigurationError(str(exc)) from None


def _stats(run: RunOutput) -> dict[str, Any]:
    """The run's stats, or nothing when it has none it can read: its records can still be shown, with a warning."""
    try:
        return run.stats()
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        print(f"beamtrove: warning: {exc}; the counts per step and reason are not shown", file=sys.stderr)
        return {}


def _counts(stats: Mapping[str, Any], step: str, prefix: str) -> str:
    """``reason count, ...`` of the step's counters named ``<prefix><reason>``."""
    counters = stats.get("steps", {}).get(step, {}).get("counters", {})
    found = [f"{name[len(prefix) :]} {count:,}" for name, count in sorted(counters.items()) if name.startswith(prefix)]
    return ", ".join(found) or "none counted"


def _title(where: str, files: Iterable[InputFile]) -> str:
    files = list(files)
    size = sum(file.size for file in files)
    return f"{where}: {len(files):,} file{'s' if len(files) != 1 else ''}, {_size(size)}"


def _size(size: int) -> str:
    return f"{size / 1e3:,.1f} kB" if size < 1e6 else f"{size / 1e6:,.1f} MB"


def _is_folder(url: str) -> bool:
    fs, path = filesystem(url)
    return not is_glob(fs, path) and fs.isdir(path)


def _contents(url: str) -> str:
    """What a folder holds, for a message: its first entries, folders ending in ``/``."""
    fs, path = filesystem(url)
    names = sorted(
        entry["name"].rstrip("/").rsplit("/", 1)[-1] + ("/" if entry["type"] == "directory" else "")
        for entry in fs.ls(path, detail=True)
    )
    if not names:
        return "nothing"
    more = f" and {len(names) - _CONTENTS_LISTED} more" if len(names) > _CONTENTS_LISTED else ""
    return ", ".join(names[:_CONTENTS_LISTED]) + more


def _count(value: str) -> int:
    number = int(value)
    if number < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative")
    return number


def add_commands(commands) -> None:
    """Adds ``inspect`` to the tree."""
    inspect = command(commands, "inspect", _inspect)
    inspect.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="a run's output folder, or JSONL (.gz, .zst, ...), Parquet or CSV files, folders or globs",
    )
    which = inspect.add_mutually_exclusive_group()
    which.add_argument(
        "--excluded",
        nargs="?",
        const="",
        metavar="STEP",
        help="what STEP dropped (excluded/STEP/ of a run's output); without STEP, what every step dropped",
    )
    which.add_argument(
        "--dead-letters",
        "--dead_letters",
        action="store_true",
        help="the records the run could not read or process (dead_letters/): reason, step, source and offset",
    )
    inspect.add_argument(
        "--reason",
        help=f"only documents whose {FILTER_REASON_KEY} (a dead letter's reason) is REASON or starts with it; "
        "on a run's output it implies --excluded",
    )
    inspect.add_argument("--id", help="only the documents with this id")
    inspect.add_argument("--grep", metavar="REGEX", help="only documents whose text matches REGEX, e.g. '(?i)cookie'")
    inspect.add_argument(
        "--limit",
        type=_count,
        metavar="N",
        default=_DEFAULT_LIMIT,
        help=f"documents to show; 0 shows all. Default: {_DEFAULT_LIMIT}",
    )
    inspect.add_argument("--skip", type=_count, metavar="N", default=0, help="matching documents to pass over first")
    inspect.add_argument(
        "--full", action="store_true", help=f"the whole text instead of its first {_SNIPPET_CHARS} characters"
    )
    inspect.add_argument(
        "--json",
        action="store_true",
        help="one JSON object per line, the document as beamtrove writes it (a dead letter as it was written)",
    )
    inspect.add_argument(
        "--fields",
        metavar="KEYS",
        help=f"metadata keys to show, comma-separated, or {_ALL_FIELDS}. Default: {', '.join(_KEY_METADATA)}",
    )
    inspect.add_argument(
        "--input_format",
        "--input-format",
        choices=_FORMATS,
        default="auto",
        help="the format of the files named; auto tells it from their names, as it always does for a run's output "
        "folder, whose writers name their files by format. Default: auto",
    )
