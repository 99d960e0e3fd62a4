"""The documentation's commands work, its links lead somewhere, and its code map matches the tree.

Every fenced ``bash`` or ``console`` block of README.md and docs/*.md is read. A command is a segment of a
line (between ``&&``, ``|``, ``;`` and redirections; ``\\`` continuations joined; in a ``console`` block, a
line after ``$``) whose first word is ``beamtrove``. The default suite parses every command as ``beamtrove``
does before it runs anything (the command tree, then the pipeline's options as ``beamtrove run`` checks
them), and runs the cheap ones (help, ``assets path``, ``stats``, ``inspect``, ``report``, ...) in this
process on a run folder the README's quick start makes once. The slow set runs every block, command by
command, in a folder of tiny real inputs named as the docs name them: ``warcs/`` (one WARC file),
``dumps/CC-MAIN-2024-10/`` and ``dumps/CC-MAIN-2024-18/`` (pages of make_warc.py's real-page WARC files,
extracted), ``reference/``, ``evals/answers.txt``, ``gpt2/tokenizer.json``, ``../shared`` (the real data)
and ``/shared/`` (the folder every node sees: ``crawl/``, ``docs/`` and the assets).

An HTML comment right before a block says what it needs:

* ``<!-- docs-test: parse-only (why) -->``: a service absent here (Dataflow, a Slurm cluster): parsed only;
* ``<!-- docs-test: needs PART ... -->``: run only when these runner parts are present (``runners path``);
* ``<!-- docs-test: run-folder PATH ... -->``: it reads a run folder made beforehand at PATH.
"""

from __future__ import annotations

import dataclasses
import gzip
import importlib
import json
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Sequence

import pytest

from beamtrove import cli
from beamtrove.assets import ASSET_NAMES, asset_path, asset_present
from beamtrove.cli import main
from beamtrove.execution.runner_parts import part_present
from beamtrove.option_parsing import parse
from beamtrove.options import ConfigurationError
from beamtrove.pipelines import all_pipeline_specs, pipeline_spec
from tests.conftest import DATA, SHARED, jsonl_rows, make_warc_set, require, zip_texts

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGES = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
README_LINES = 250

_FENCE = re.compile(r"^\s*```(?P<language>[\w-]*)\s*$")
_TAG = re.compile(r"^\s*<!--\s*docs-test:\s*(?P<kind>[\w-]+)\s*(?P<value>.*?)\s*-->\s*$")
_SHELL_OPERATORS = frozenset("&|;<>()")
_HELP_FLAGS = frozenset(("-h", "--help", "--version"))
# Commands that only read, or print what they hold: run in the default suite.
_CHEAP = frozenset((("assets", "path"), ("runners", "path"), ("elastic", "slurm-template")))
_READERS = frozenset(("stats", "inspect", "report"))
# Commands that fill caches outside the working folder: nothing after them in a block reads what they write there.
_SETUP = frozenset((("assets", "fetch"), ("runners", "setup")))
# What the docs call the folder every node sees.
_NODES_SEE = "/shared/"


@dataclasses.dataclass(frozen=True)
class Command:
    """One ``beamtrove`` command of a block: its arguments after ``beamtrove``, and where it is written."""

    argv: tuple[str, ...]
    where: str

    @property
    def words(self) -> tuple[str, ...]:
        """Its arguments before ``--`` (those after it are pipeline options)."""
        return self.argv[: self.argv.index("--")] if "--" in self.argv else self.argv

    @property
    def cheap(self) -> bool:
        return bool(_HELP_FLAGS & set(self.words)) or self.words[:2] in _CHEAP or self.words[0] in _READERS

    @property
    def setup(self) -> bool:
        return self.words[:2] in _SETUP

    def __str__(self) -> str:
        return f"{self.where}: `beamtrove {shlex.join(self.argv)}`"


@dataclasses.dataclass(frozen=True)
class Block:
    """A fenced block: its commands, and what its docs-test comments say it needs."""

    where: str
    commands: tuple[Command, ...]
    parse_only: str | None = None
    needs: tuple[str, ...] = ()
    run_folders: tuple[str, ...] = ()

    def standalone(self) -> list[Command]:
        """Its cheap commands that read nothing an earlier command of the block writes."""
        commands = []
        for command in self.commands:
            if not (command.cheap or command.setup):
                break
            if command.cheap:
                commands.append(command)
        return commands


def _segments(line: str) -> list[list[str]]:
    """The words of each simple command of a shell line, without its comment."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    segments: list[list[str]] = [[]]
    for word in lexer:
        if word and set(word) <= _SHELL_OPERATORS:  # an operator; '' is a quoted empty word
            segments.append([])
        else:
            segments[-1].append(word)
    return [segment for segment in segments if segment]


def _shell_lines(language: str, lines: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """A block's shell lines with their line numbers, continuations joined; in a console block, those after ``$``."""
    joined: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for number, line in lines:
        text = line.rstrip()
        if pending is None:
            if language == "console":
                if not text.lstrip().startswith("$ "):
                    continue
                text = text.lstrip()[2:]
            pending = (number, "")
        pending = (pending[0], pending[1] + text.removesuffix("\\"))
        if not text.endswith("\\"):
            joined.append(pending)
            pending = None
    return joined


def _tags(lines: list[str], fence: int) -> dict:
    """What the docs-test comments on the lines right before ``lines[fence]`` say."""
    tags: dict = {}
    at = fence - 1
    while at >= 0 and (tag := _TAG.match(lines[at])):
        if tag["kind"] == "parse-only":
            tags["parse_only"] = tag["value"].strip("() ") or "parse-only"
        elif tag["kind"] == "needs":
            tags["needs"] = tuple(tag["value"].split())
        elif tag["kind"] == "run-folder":
            tags["run_folders"] = tuple(tag["value"].split())
        else:
            raise ValueError(f"unknown docs-test comment {lines[at]!r} before line {fence + 1}")
        at -= 1
    return tags


def blocks(name: str, text: str) -> list[Block]:
    """The bash and console blocks of the markdown ``text`` of the page ``name``."""
    lines = text.splitlines()
    found, at = [], 0
    while at < len(lines):
        fence = _FENCE.match(lines[at])
        if not fence:
            at += 1
            continue
        end = next(i for i in range(at + 1, len(lines)) if _FENCE.match(lines[i]))
        if fence["language"] in ("bash", "console"):
            body = [(number + 1, lines[number]) for number in range(at + 1, end)]
            commands = tuple(
                Command(tuple(segment[1:]), f"{name}:{number}")
                for number, line in _shell_lines(fence["language"], body)
                for segment in _segments(line)
                if segment[0] == "beamtrove" and len(segment) > 1
            )
            found.append(Block(f"{name}:{at + 1}", commands, **_tags(lines, at)))
        at = end + 1
    return found


BLOCKS = [block for page in PAGES for block in blocks(page.relative_to(ROOT).as_posix(), page.read_text("utf-8"))]
COMMANDS = [command for block in BLOCKS for command in block.commands]
STANDALONE = [(block, command) for block in BLOCKS if not block.parse_only for command in block.standalone()]
RUNNABLE = [block for block in BLOCKS if not block.parse_only and not all(c.cheap for c in block.commands)]
# The README's quick start: the FineWeb run whose folder the cheap commands read.
_README_RUNS = [command for command in COMMANDS if command.where.startswith("README.md:") and command.words[0] == "run"]
QUICK_START = next((command for command in _README_RUNS if command.words[1:2] == ("fineweb",)), None)


def _option(argv: Sequence[str], flag: str) -> str | None:
    """The value of ``flag`` in ``argv`` (``--flag VALUE`` or ``--flag=VALUE``), or None."""
    for at, word in enumerate(argv):
        if word == flag and at + 1 < len(argv):
            return argv[at + 1]
        if word.startswith(f"{flag}="):
            return word.split("=", 1)[1]
    return None


def check_parses(argv: Sequence[str]) -> None:
    """Parses ``argv`` as ``beamtrove`` does before it runs anything.

    Raises:
        SystemExit: The command tree refuses it (argparse's message went to stderr).
        ConfigurationError: The pipeline options refuse it, or an argument is left over.
    """
    argv = list(argv)
    separated: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, separated = argv[:at], argv[at + 1 :]
    try:
        args, rest = cli._parser().parse_known_args(argv)
    except SystemExit as exit_:
        if exit_.code == 0:  # --help or --version: answered, and nothing is run
            return
        raise
    if args.command != "run" and rest:
        raise ConfigurationError(f"unrecognized arguments: {' '.join(rest)}")
    if separated and not args.pipeline_options:
        raise ConfigurationError(f"`beamtrove {args.command}` takes no pipeline options after --")
    pipeline_argv = [*rest, *separated]
    name = getattr(args, "pipeline", None)
    if _HELP_FLAGS & set(pipeline_argv):
        return
    if name is None:
        if args.command == "run":
            raise ConfigurationError("`beamtrove run` needs a pipeline")
        return
    spec = pipeline_spec(name)
    if args.command == "run" or args.pipeline_options:
        parse(spec, pipeline_argv)


def test_a_command_line_is_read_as_the_shell_reads_it():
    text = (
        "```bash\n"
        "pip install -e . && beamtrove assets fetch && beamtrove run x --input 'a b/*.gz' \\\n"
        "    --eos_token '' # a comment\n"
        "beamtrove elastic slurm-template > out.sbatch  # then: sbatch out.sbatch\n"
        "```\n"
        "<!-- docs-test: run-folder out -->\n"
        "<!-- docs-test: parse-only (no cluster) -->\n"
        "```console\n$ beamtrove stats out\nbeamtrove: error: not a command\n```\n"
        "```python\nbeamtrove = 1\n```\n"
    )
    first, second = blocks("t.md", text)
    assert [(command.argv, command.where) for command in first.commands] == [
        (("assets", "fetch"), "t.md:2"),
        (("run", "x", "--input", "a b/*.gz", "--eos_token", ""), "t.md:2"),
        (("elastic", "slurm-template"), "t.md:4"),
    ]
    # The template comes after a run, whose outputs it might read: it runs in the slow set only.
    assert (first.standalone(), first.parse_only, first.run_folders) == ([], None, ())
    assert [command.argv for command in second.commands] == [("stats", "out")]
    assert second.standalone() == list(second.commands)
    assert (second.parse_only, second.run_folders) == ("no cluster", ("out",))


def test_the_docs_show_every_pipeline_and_command():
    assert len(PAGES) >= 10, [page.name for page in PAGES]
    shown = {command.words[1].replace("-", "_") for command in COMMANDS if command.words[:1] == ("run",)}
    assert shown >= {spec.name for spec in all_pipeline_specs()}
    assert {command.words[0] for command in COMMANDS} >= {"run", "stats", "inspect", "report", "elastic", "runners"}


@pytest.mark.parametrize("command", COMMANDS, ids=str)
def test_every_command_parses(command, capsys):
    try:
        check_parses(command.argv)
    except SystemExit:
        pytest.fail(f"{command} is refused: {capsys.readouterr().err}")
    except ConfigurationError as exc:
        pytest.fail(f"{command} is refused: {exc}")


def test_parsing_refuses_what_beamtrove_refuses(capsys):
    with pytest.raises(ConfigurationError, match="did you mean --input"):
        check_parses(["run", "fineweb", "--inptu", "x"])
    with pytest.raises(ConfigurationError, match="--minhash_threshold must be"):
        check_parses(["run", "dedup", "--minhash_threshold", "2"])
    with pytest.raises(ConfigurationError, match="option of the tokenize pipeline"):
        check_parses(["run", "fineweb", "--tokenizer", "gpt2/tokenizer.json"])
    with pytest.raises(ConfigurationError, match="expected one argument"):
        check_parses(["run", "dedup", "--keep_by", "-date"])
    with pytest.raises(ConfigurationError, match="Unknown pipeline 'finweb'"):
        check_parses(["dataflow", "graph", "finweb", "--", "--input", "x"])
    with pytest.raises(ConfigurationError, match="unrecognized arguments: extra"):
        check_parses(["stats", "out", "extra"])
    with pytest.raises(ConfigurationError, match="takes no pipeline options"):
        check_parses(["elastic", "status", "--job-dir", "jobs", "--", "--dedup", "exact"])
    with pytest.raises(SystemExit):
        check_parses(["elastic", "prepare", "--pipeline", "fineweb"])
    assert "--input" in capsys.readouterr().err
    check_parses(["elastic", "prepare", "--pipeline", "dedup", "--input", "d", "--job-dir", "j", "--num-shards", "2"])


def _working_folder(root: pathlib.Path, inputs: pathlib.Path | None = None) -> pathlib.Path:
    """``root/main``, with ``root/shared`` (the real data) beside it and ``inputs``'s entries in it; returns it."""
    work = root / "main"
    work.mkdir(parents=True)
    if SHARED.exists():
        (root / "shared").symlink_to(SHARED)
    for entry in sorted(inputs.iterdir()) if inputs else ():
        if not entry.name.startswith("."):
            (work / entry.name).symlink_to(entry)
    return work


def _in_folder(argv: Sequence[str], work: pathlib.Path) -> list[str]:
    """``argv``, with the folder every node sees (``/shared/``) inside the working folder."""
    nodes = f"{work / 'nodes-see'}/"
    return [nodes + word.removeprefix(_NODES_SEE) if word.startswith(_NODES_SEE) else word for word in argv]


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory) -> pathlib.Path:
    """The run folder the README's quick start writes: its FineWeb run over the real WARC files in ../shared."""
    assert QUICK_START, "the README's quick start shows no `beamtrove run fineweb`"
    require(DATA / "warc")
    for name in ASSET_NAMES:
        if not asset_present(name):
            pytest.skip(f"the {name} asset is absent: `beamtrove assets fetch` downloads it")
    work = _working_folder(tmp_path_factory.mktemp("quick-start"))
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(work)
        assert main(list(QUICK_START.argv)) == 0, f"{QUICK_START} failed"
    return work / _option(QUICK_START.argv, "--output")


def _place_run_folders(block: Block, work: pathlib.Path, run_folder: pathlib.Path) -> None:
    for path in block.run_folders:
        shutil.copytree(run_folder, work / path)


@pytest.mark.parametrize(("block", "command"), STANDALONE, ids=[str(command) for _, command in STANDALONE])
def test_cheap_commands_run(block, command, run_folder, tmp_path, monkeypatch, capsys):
    work = _working_folder(tmp_path)
    _place_run_folders(block, work, run_folder)
    monkeypatch.chdir(work)
    status = main(_in_folder(command.argv, work))
    assert status == 0, f"{command} exited {status}: {capsys.readouterr().err[-3000:]}"


@pytest.fixture(scope="session")
def docs_inputs(tmp_path_factory) -> pathlib.Path:
    """The tiny real inputs the docs' examples name, in one folder (see the module's docstring)."""
    root = tmp_path_factory.mktemp("docs-inputs")
    (root / "warcs").mkdir()
    shutil.copy(require(DATA / "warc" / "dolma_wget_sample-0000.warc.gz"), root / "warcs")
    # Real pages with exact and near copies of each other, so that every dedup step has something to remove.
    crawl = tmp_path_factory.mktemp("docs-crawl")
    make_warc_set(crawl, "--records", "300", "--files", "2", "--seed", "5")
    extracted = root / ".extracted"
    argv = ["run", "extract", "--input", str(crawl / "*.warc.gz"), "--output", str(extracted), "--extractor"]
    result = _beamtrove([*argv, "resiliparse"], root)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = jsonl_rows(extracted / "documents")
    assert len(rows) > 200, len(rows)
    for number, dump in enumerate(("CC-MAIN-2024-10", "CC-MAIN-2024-18")):
        (root / "dumps" / dump).mkdir(parents=True)
        with gzip.open(root / "dumps" / dump / "part-0.jsonl.gz", "wt", encoding="utf-8") as documents:
            documents.writelines(json.dumps(row) + "\n" for row in rows[number::2])
    addresses = zip_texts(DATA / "text-corpora" / "nltk_data" / "state_union.zip")
    (root / "reference").mkdir()
    (root / "reference" / "state_union.jsonl").write_text(
        "".join(json.dumps({"text": text, "id": name}) + "\n" for name, text in addresses.items())
    )
    inaugural = zip_texts(DATA / "text-corpora" / "nltk_data" / "inaugural.zip")
    (root / "evals").mkdir()
    (root / "evals" / "answers.txt").write_text("".join(" ".join(text.split()) + "\n" for text in inaugural.values()))
    (root / "gpt2").mkdir()
    (root / "gpt2" / "tokenizer.json").symlink_to(require(DATA / "tokenizers" / "gpt2" / "tokenizer.json"))
    nodes = root / ".nodes-see"
    (nodes / "crawl").mkdir(parents=True)
    for warc in sorted((DATA / "warc").glob("*.warc.gz")):
        shutil.copy(warc, nodes / "crawl")
    (nodes / "docs").mkdir()
    (nodes / "docs" / "part-0.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows[1::2]))
    return root


def _nodes_see(work: pathlib.Path, inputs: pathlib.Path) -> None:
    """The folder every node sees: the inputs read from it, the assets, and room for jobs and outputs."""
    nodes = work / "nodes-see"
    (nodes / "out").mkdir(parents=True)
    for name in ("crawl", "docs"):
        (nodes / name).symlink_to(inputs / ".nodes-see" / name)
    (nodes / "lid.176.ftz").symlink_to(asset_path("lid176"))
    (nodes / "ut1").symlink_to(asset_path("ut1"))


def _beamtrove(argv: Sequence[str], cwd: pathlib.Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "beamtrove", *argv], cwd=cwd, capture_output=True, text=True, timeout=900, check=False
    )


@pytest.mark.slow
@pytest.mark.parametrize("block", RUNNABLE, ids=lambda block: block.where)
def test_every_block_runs(block, run_folder, docs_inputs, tmp_path):
    absent = [part for part in block.needs if not part_present(part)]
    if absent:
        pytest.skip(f"{block.where} needs {', '.join(absent)}: `beamtrove runners setup` obtains them")
    work = _working_folder(tmp_path, docs_inputs)
    _place_run_folders(block, work, run_folder)
    _nodes_see(work, docs_inputs)
    # The default suite runs the quick start and the cheap commands no earlier command of their block writes for.
    for command in (command for command in block.commands if command not in (QUICK_START, *block.standalone())):
        result = _beamtrove(_in_folder(command.argv, work), work)
        assert result.returncode == 0, f"{command} exited {result.returncode}: {result.stderr[-3000:]}"
        output = None if command.cheap else _option(command.words, "--output")
        if output is None or "://" in output:
            continue
        written = work / _in_folder([output], work)[0]
        assert written.exists(), f"{command} wrote no {output}"
        if command.words[0] == "run":
            assert next(written.rglob("stats.json"), None), f"{command} wrote no stats.json under {output}"


# The code map is a text block of `names  description` lines: the names (files, or folders ending in /,
# separated by single spaces) sit two spaces deeper per folder below beamtrove/; a line whose first words are
# not names goes on with the description above it.
_NAME = re.compile(r"[\w.-]+(?:/|\.py|\.sbatch)")


def code_map(text: str) -> list[str]:
    """The paths the code map of the library page ``text`` names, relative to the project."""
    section = text.split("## How the code is laid out", 1)[1]
    lines = section.split("```text\n", 1)[1].split("```", 1)[0].splitlines()
    named, folders = [], {}
    for line in lines:
        names = line.strip().split("  ", 1)[0].split(" ")
        if not all(_NAME.fullmatch(name) for name in names):
            continue
        indent = len(line) - len(line.lstrip(" "))
        assert indent % 2 == 0, f"code map line {line!r}: two spaces of indentation per folder"
        level = indent // 2
        for name in names:
            path = folders[level - 1] + name if level else name
            named.append(path.rstrip("/"))
            if name.endswith("/"):
                folders[level] = path
    return named


def test_the_code_map_matches_the_tree():
    named = code_map((ROOT / "docs" / "library.md").read_text("utf-8"))
    assert named[0] == "beamtrove", "the code map starts at beamtrove/"
    missing = [path for path in named if not (ROOT / path).exists()]
    assert not missing, f"docs/library.md's code map names paths that do not exist: {missing}"
    tree = ROOT / "beamtrove"
    packages = {init.parent.relative_to(ROOT).as_posix() for init in tree.rglob("__init__.py")}
    modules = {path.relative_to(ROOT).as_posix() for path in tree.rglob("*.py") if path.name != "__init__.py"}
    unnamed = sorted((packages | modules) - set(named))
    assert not unnamed, f"docs/library.md's code map leaves out {unnamed}: give each a line"


def test_the_readme_is_a_front_door():
    readme = (ROOT / "README.md").read_text("utf-8")
    assert len(readme.splitlines()) <= README_LINES
    table = readme.split("\n## Pipelines\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \|", table, flags=re.MULTILINE)
    assert sorted(rows) == sorted(spec.name for spec in all_pipeline_specs())
    assert "(docs/report.png)" in readme
    assert (ROOT / "docs" / "report.png").stat().st_size > 0
    benchmarks = (ROOT / "docs" / "benchmarks.md").read_text("utf-8")
    begin, end = "<!-- results:begin -->", "<!-- results:end -->"
    assert benchmarks.count(begin) == benchmarks.count(end) == 1
    assert benchmarks.index(begin) < benchmarks.index(end)


def _anchor(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_the_python_examples_import_what_exists():
    missing = []
    for page in PAGES:
        text = page.read_text("utf-8")
        for block in re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL):
            for module, names in re.findall(r"^\s*from (beamtrove[\w.]*) import (.+)$", block, flags=re.MULTILINE):
                imported = importlib.import_module(module)
                missing += [f"{page.name}: {module}.{n}" for n in names.split(", ") if not hasattr(imported, n)]
    assert not missing


def test_every_relative_link_leads_somewhere():
    broken = []
    for page in (*PAGES, ROOT / "CHANGELOG.md"):
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text("utf-8")):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if not linked.exists():
                broken.append(f"{page.name}: {target}")
            elif anchor:
                headings = re.findall(r"^#+ (.*)$", linked.read_text("utf-8"), flags=re.MULTILINE)
                if anchor not in {_anchor(heading) for heading in headings}:
                    broken.append(f"{page.name}: {target}")
    assert not broken
