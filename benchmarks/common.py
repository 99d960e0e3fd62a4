"""What the benchmark scripts share: the data, DataTrove's venv, measuring, WARC sets, JSONL files and results.

* The real data of ``../shared`` beside the checkout (``SHARED``, ``LID_MODEL``, ...).
* A virtualenv holding DataTrove 0.10.1 apart from beamtrove's environment
  (:func:`datatrove_python`), and one for any other pinned peer
  (:func:`pinned_python`); the comparison scripts run DataTrove there, in a
  subprocess. The install follows what works offline on a machine that only
  reaches package registries: DataTrove's ``processing`` extra plus the
  modules its readers and filters import, trafilatura 2.x over the 1.11 the
  extra pins (so both tools extract with the same trafilatura), and
  ``fasttext-numpy2`` reinstalled last because another wheel the extra pulls
  in ships a ``fasttext`` module that breaks under numpy 2.
* Wall time, CPU and memory of a command's whole process tree
  (:func:`run_measured`, :class:`TreeMonitor`): GNU time misses forkserver workers.
* WARC sets built by make_warc.py from the real pages, cached per work directory (:func:`warc_set`).
* Reading and writing JSONL files, gzipped when named ``.gz`` (:func:`read_jsonl`, :func:`write_jsonl`).
* The flags every script has (``--workdir``, ``--results``, ``--datatrove_venv``)
  and its results file (:class:`Results`), which ``python -m benchmarks.tables``
  renders into docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import gzip
import hashlib
import json
import os
import pathlib
import platform
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from beamtrove.formats.charset import decode_payload
from beamtrove.transforms.extractors import Trafilatura

__all__ = [
    "ARTICLES",
    "DEFAULT_VENV",
    "GIB",
    "LID_MODEL",
    "MAKE_WARC",
    "MIB",
    "NLTK_CORPORA",
    "REPOSITORY",
    "SHARED",
    "TEXT_CORPORA",
    "TOKENIZER",
    "URL_BLOCKLIST",
    "WARC_DIR",
    "Results",
    "TreeMonitor",
    "Unfinished",
    "add_datatrove_venv_argument",
    "add_warc_set_arguments",
    "add_workdir_arguments",
    "argument_parser",
    "article_pages",
    "canonical_rows",
    "command_failed",
    "datatrove_python",
    "document_digest",
    "jaccard",
    "json_output",
    "jsonl_rows",
    "markdown_table",
    "nltk_texts",
    "only_file",
    "pinned_python",
    "prepare_as_hub_dataset",
    "read_jsonl",
    "run_measured",
    "verdict",
    "warc_set",
    "warc_set_of",
    "write_jsonl",
]

REPOSITORY = pathlib.Path(__file__).resolve().parents[1]
SHARED = REPOSITORY.parent / "shared"
MAKE_WARC = SHARED / "tools" / "make_warc.py"
WARC_DIR = SHARED / "data" / "warc"
LID_MODEL = SHARED / "data" / "models" / "lid176" / "lid.176.ftz"
URL_BLOCKLIST = SHARED / "data" / "blocklists" / "ut1"
TOKENIZER = SHARED / "data" / "tokenizers" / "gpt2" / "tokenizer.json"
ARTICLES = SHARED / "data" / "article-extraction-benchmark"
TEXT_CORPORA = SHARED / "data" / "text-corpora"
NLTK_CORPORA = TEXT_CORPORA / "nltk_data"
TRAFILATURA_EVAL = SHARED / "data" / "trafilatura-eval"

GIB = 1 << 30
MIB = 1 << 20

# --------------------------------------------------------------------------- DataTrove's venv

DEFAULT_VENV = pathlib.Path.home() / ".cache" / "beamtrove" / "datatrove-0.10.1-venv"

_INSTALL_STEPS = (
    [
        "datatrove[processing]==0.10.1",
        "orjson",
        "warcio",
        "faust-cchardet",
        "python-magic",
        "spacy",
        "lxml_html_clean",
        "tokenizers",
        "fasttext-numpy2",
        # The Hugging Face reader (readers_parity).
        "datasets",
        "pyarrow",
    ],
    ["trafilatura==2.3.1", "lxml_html_clean"],
    ["--force-reinstall", "--no-deps", "fasttext-numpy2==0.10.4"],
)


def datatrove_python(venv: pathlib.Path = DEFAULT_VENV) -> pathlib.Path:
    """The venv's python, creating the venv and installing DataTrove on first use."""
    return pinned_python("datatrove==0.10.1", venv, install_steps=_INSTALL_STEPS)


def pinned_python(
    requirement: str,
    venv: pathlib.Path,
    *,
    base_python: str | os.PathLike = sys.executable,
    install_steps: Sequence[Sequence[str]] | None = None,
) -> pathlib.Path:
    """The python of ``venv``, a virtualenv holding ``requirement`` (``name==version``), made on first use.

    The venv is made by ``base_python``; ``install_steps`` (pip install
    arguments, one list per ``pip install``; default: ``requirement`` alone)
    are installed in turn. A marker file then says the venv is complete; an
    install cut short is run again over what it left on the next use.

    Raises:
        SystemExit: ``base_python`` is not there to make the venv with.
    """
    name = re.split(r"[\[=<>~!; ]", requirement, maxsplit=1)[0]
    python = venv / "bin" / "python"
    ready = venv / f".beamtrove-{name}-ready"
    if ready.exists():
        return python
    if not shutil.which(str(base_python)):
        sys.exit(f"{base_python} is absent: it makes the venv holding {requirement}; pass another python")
    print(f"installing {requirement} into {venv} (once)", file=sys.stderr)
    subprocess.run([str(base_python), "-m", "venv", str(venv)], check=True)
    for packages in install_steps or [[requirement]]:
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", *packages], check=True)
    ready.touch()
    return python


def json_output(
    command: Sequence[str | os.PathLike], *, env: dict[str, str] | None = None, cwd: str | None = None
) -> Any:
    """Runs ``command`` (a script in DataTrove's venv, say) and parses the last line it printed as JSON.

    Raises:
        RuntimeError: The command failed; the message ends with what it wrote to stderr.
    """
    command = [str(part) for part in command]
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=env, cwd=cwd)
    if done.returncode:
        raise RuntimeError(f"{command[0]} ... exited with {done.returncode}:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------- measuring

SAMPLE_SECONDS = 0.2


class TreeMonitor:
    """Samples a process tree until stopped: peak summed PSS and RSS, and the CPU the rest of the machine used.

    Attributes:
        peak_pss: Highest summed PSS of the process and its descendants, bytes.
        peak_rss: Highest summed RSS, bytes (counts shared pages once per process).
        peak_process_pss: Highest PSS of any single process of the tree, bytes:
            the memory one worker needs.
        peak_by_command: Highest PSS of any single process, per command name
            (``/proc/<pid>/comm``): a Python worker apart from a runner's own process.
        other_cores: Mean CPU cores busy outside the tree: other work on the
            machine slows the run and makes extraction time out.
    """

    def __init__(self, root: int):
        self.root = root
        self.peak_pss = self.peak_rss = self.peak_process_pss = 0
        self.peak_by_command: dict[str, int] = {}
        self.other_cores = 0.0
        self._tree_ticks: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> TreeMonitor:
        self._start = (time.perf_counter(), _busy_ticks())
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        wall = time.perf_counter() - self._start[0]
        busy = _busy_ticks() - self._start[1]
        # Ticks of processes that ended between samples are missed, so this errs high.
        self.other_cores = max(0, busy - sum(self._tree_ticks.values())) / _TICKS / max(wall, 1e-9)

    def _tree(self) -> list[int]:
        # Scanning /proc catches workers however they were started (fork, forkserver, Popen).
        children = collections.defaultdict(list)
        ticks = {}
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/stat") as stat:
                    # The command name may hold spaces and parentheses: fields restart after the last ")".
                    fields = stat.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            pid = int(entry.name)
            children[int(fields[1])].append(pid)
            ticks[pid] = int(fields[11]) + int(fields[12])
        tree, todo = [], [self.root]
        while todo:
            pid = todo.pop()
            tree.append(pid)
            todo.extend(children.get(pid, ()))
            if pid in ticks:
                self._tree_ticks[pid] = ticks[pid]
        return tree

    @staticmethod
    def _memory(pid: int) -> tuple[int, int]:
        pss = rss = 0
        try:
            with open(f"/proc/{pid}/smaps_rollup") as rollup:
                for line in rollup:
                    if line.startswith("Pss:"):
                        pss = int(line.split()[1]) * 1024
                    elif line.startswith("Rss:"):
                        rss = int(line.split()[1]) * 1024
        except OSError:
            pass  # the process ended between listing and reading
        return pss, rss

    def _sample(self) -> None:
        while not self._stop.is_set():
            tree = self._tree()
            sizes = [self._memory(pid) for pid in tree]
            for pid, (pss, _) in zip(tree, sizes, strict=True):
                command = _command(pid)
                self.peak_by_command[command] = max(self.peak_by_command.get(command, 0), pss)
            self.peak_pss = max(self.peak_pss, sum(pss for pss, _ in sizes))
            self.peak_rss = max(self.peak_rss, sum(rss for _, rss in sizes))
            self.peak_process_pss = max(self.peak_process_pss, *(pss for pss, _ in sizes), 0)
            self._stop.wait(SAMPLE_SECONDS)


_TICKS = os.sysconf("SC_CLK_TCK")


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as comm:
            return comm.read().strip()
    except OSError:
        return "?"


def _busy_ticks() -> int:
    """CPU ticks the whole machine spent busy since boot (all but idle and iowait)."""
    with open("/proc/stat") as stat:
        values = [int(v) for v in stat.readline().split()[1:9]]
    return sum(values) - values[3] - values[4]


class Unfinished(Exception):
    """A measured command still running at its time limit, killed with every process it started.

    Attributes:
        limit: The limit, seconds: a lower bound of the command's wall time.
        monitor: Its monitor until then: lower bounds of its peaks.
    """

    def __init__(self, name: str, limit: float, monitor: TreeMonitor):
        super().__init__(f"{name} did not finish within {limit:g} s and was killed")
        self.limit = limit
        self.monitor = monitor


def run_measured(
    command: Sequence[str | os.PathLike], log: pathlib.Path, *, limit: float | None = None
) -> tuple[float, TreeMonitor]:
    """Runs ``command`` with its output in ``log``: ``(wall seconds, its monitor)``.

    Args:
        command: The command.
        log: Where its output goes.
        limit: Seconds it may run; None for no limit.

    Raises:
        RuntimeError: The command failed.
        Unfinished: It ran past ``limit``; it and its processes (its session) were killed.
    """
    with log.open("w") as out:
        start = time.perf_counter()
        process = subprocess.Popen(
            [str(part) for part in command], stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        with TreeMonitor(process.pid) as monitor:
            try:
                code = process.wait(limit)
            except subprocess.TimeoutExpired:
                code = None
            finally:
                # Past its limit, or a Ctrl-C here (its own session does not get the terminal's).
                if process.returncode is None:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
        wall = time.perf_counter() - start
    if code is None:
        raise Unfinished(str(command[0]), limit, monitor)
    if code:
        raise command_failed(str(command[0]), code, log)
    return wall, monitor


def command_failed(name: str, code: int, log: pathlib.Path) -> RuntimeError:
    """The error for a command that exited with ``code``, quoting the end of its output ``log``."""
    tail = "".join(log.read_text(errors="replace").splitlines(keepends=True)[-30:])
    return RuntimeError(f"{name} ... exited with {code}; end of {log}:\n{tail}")


# --------------------------------------------------------------------------- WARC sets


def warc_set(workdir: pathlib.Path, records: int, files: int, seed: int) -> pathlib.Path:
    """``<workdir>/warc-r<records>-f<files>-s<seed>``, built by make_warc.py unless it is already there."""
    warc_dir = workdir / f"warc-r{records}-f{files}-s{seed}"
    if not (warc_dir / "manifest.jsonl").exists():
        if not MAKE_WARC.exists():
            sys.exit(f"{MAKE_WARC} is absent: keep ../shared beside the checkout")
        print(f"building {warc_dir}", file=sys.stderr)
        command = [sys.executable, str(MAKE_WARC), str(warc_dir), "--records", str(records), "--files", str(files)]
        subprocess.run([*command, "--seed", str(seed)], check=True)
    return warc_dir


def add_warc_set_arguments(parser: argparse.ArgumentParser, *, records: int, files: int, workdir_name: str) -> None:
    """Adds ``--records``, ``--files``, ``--seed`` and :func:`add_workdir_arguments`'s flags."""
    parser.add_argument("--records", type=int, default=records, help="make_warc.py records (default: %(default)s)")
    parser.add_argument("--files", type=int, default=files, help="make_warc.py files (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=1, help="make_warc.py seed (default: %(default)s)")
    add_workdir_arguments(parser, workdir_name)


def warc_set_of(args: argparse.Namespace) -> tuple[pathlib.Path, pathlib.Path]:
    """The work directory the arguments name (created) and their WARC set in it."""
    workdir = args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    return workdir, warc_set(workdir, args.records, args.files, args.seed)


# --------------------------------------------------------------------------- real pages


def _trafilatura_eval_pages() -> list[tuple[str, bytes]]:
    """The trafilatura-eval pages in URL order: ``(file name, raw HTML)``."""
    evaluation = json.loads(gzip.decompress((TRAFILATURA_EVAL / "evaldata.json.gz").read_bytes()))
    pages = []
    for url in sorted(evaluation):
        name = evaluation[url]["file"]
        path = TRAFILATURA_EVAL / "eval" / f"{name}.gz"
        if not path.exists():
            path = TRAFILATURA_EVAL / "cache" / f"{name}.gz"
        pages.append((name, gzip.decompress(path.read_bytes())))
    return pages


def trafilatura_eval_texts(workdir: pathlib.Path) -> list[dict]:
    """The trafilatura-eval pages' main texts (``{"id": "page:<file>", "text": ...}``) as beamtrove's trafilatura
    extracts them; extracted once into ``workdir``."""
    cached = workdir / "trafilatura-eval-texts.jsonl"
    if not cached.exists():
        extractor = Trafilatura()
        extractor.setup()
        rows = []
        for name, payload in _trafilatura_eval_pages():
            decoded = decode_payload(payload)
            text = extractor.extract(decoded[0]) if decoded else ""
            if text.strip():
                rows.append({"id": f"page:{name}", "text": text})
        cached.parent.mkdir(parents=True, exist_ok=True)
        write_jsonl(cached, rows)
    return list(read_jsonl([cached]))


# --------------------------------------------------------------------------- JSONL files


def read_jsonl(paths: Iterable[pathlib.Path]) -> Iterator[dict]:
    """Every row of the given JSONL files in turn (gzipped when named ``.gz``), blank lines left out."""
    for path in paths:
        with (gzip.open if str(path).endswith(".gz") else open)(path, "rt", encoding="utf-8") as lines:
            for line in lines:
                if line.strip():
                    yield json.loads(line)


def jsonl_rows(folder: pathlib.Path, pattern: str = "*.jsonl*") -> Iterator[dict]:
    """The rows of ``folder``'s files matching ``pattern`` (``**/`` reaches subfolders), in file-name order."""
    return read_jsonl(sorted(folder.glob(pattern)))


def canonical_rows(paths: Iterable[pathlib.Path]) -> list[str]:
    """The rows of the given JSONL files as JSON with sorted keys, sorted: outputs holding the same rows are equal."""
    return sorted(json.dumps(row, sort_keys=True) for row in read_jsonl(paths))


def write_jsonl(path: pathlib.Path, rows: Iterable[dict]) -> pathlib.Path:
    """Writes ``rows`` as JSONL to ``path`` (gzipped when named ``.gz``), creating its folder; returns ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with (gzip.open if path.suffix == ".gz" else open)(path, "wt", encoding="utf-8") as out:
        out.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    return path


def only_file(folder: pathlib.Path, pattern: str) -> pathlib.Path:
    """The one file of ``folder`` matching ``pattern``.

    Raises:
        ValueError: None or several match.
    """
    (found,) = folder.glob(pattern)
    return found


def document_digest(document_id: str, text: str, metadata: dict, *, without: Iterable[str] = ()) -> list:
    """``[id, sha256 of the text, metadata without the keys named]``: a document as two readers' outputs compare."""
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    left_out = set(without)
    return [document_id, digest, {key: value for key, value in metadata.items() if key not in left_out}]


def article_pages(root: pathlib.Path = ARTICLES) -> dict[str, tuple[str, str]]:
    """The article-extraction-benchmark's pages in page-id order: ``{page id: (html, gold article text)}``."""
    gold = json.loads((root / "ground-truth.json").read_text(encoding="utf-8"))
    return {
        key: (
            gzip.decompress((root / "html" / f"{key}.html.gz").read_bytes()).decode("utf-8", "replace"),
            gold[key]["articleBody"],
        )
        for key in sorted(gold)
    }


def nltk_texts(corpus: str) -> list[str]:
    """The texts of an NLTK corpus of ../shared (``state_union``, ``inaugural``, ``movie_reviews``), in name order."""
    with zipfile.ZipFile(NLTK_CORPORA / f"{corpus}.zip") as archive:
        names = sorted(name for name in archive.namelist() if name.endswith(".txt"))
        return [archive.read(name).decode("utf-8", "replace") for name in names]


def prepare_as_hub_dataset(splits: dict[str, list[dict]], name: str, cache: pathlib.Path) -> pathlib.Path:
    """Leaves ``splits`` in the datasets cache ``cache`` as ``load_dataset(name)`` leaves a hub dataset.

    That is ``<owner>___<name>/default/0.0.0/<hash>/``; a local Parquet
    builder writes the same files, which are then moved there. Returns that folder.
    """
    # Only readers_parity and the Hugging Face reader's tests build such a cache, and they need `datasets`.
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.parquet as pq  # noqa: PLC0415
    from datasets.data_files import DataFilesDict  # noqa: PLC0415
    from datasets.packaged_modules.parquet.parquet import Parquet  # noqa: PLC0415

    owner, dataset_name = name.split("/")
    with tempfile.TemporaryDirectory(prefix="beamtrove-parquet-") as scratch:
        files = {}
        for split, rows in splits.items():
            files[split] = [str(pathlib.Path(scratch, f"{split}.parquet"))]
            pq.write_table(pa.Table.from_pylist(rows), files[split][0])
        builder = Parquet(
            cache_dir=str(cache),
            dataset_name=dataset_name,
            hash="0123456789abcdef",
            data_files=DataFilesDict.from_local_or_remote(files, base_path=scratch),
        )
        builder.download_and_prepare()
    # <cache>/<name as datasets spells it>/<config id>/0.0.0/<hash>
    prepared = pathlib.Path(builder.cache_dir)
    target = cache / f"{owner}___{prepared.parts[-4]}" / "default" / "0.0.0" / prepared.name
    target.parent.mkdir(parents=True)
    prepared.rename(target)
    return target


# --------------------------------------------------------------------------- flags


class _Parser(argparse.ArgumentParser):
    """Takes ``--name_with_underscores`` also as ``--name-with-underscores``, as beamtrove's own options do."""

    def add_argument(self, *names: str, **settings: Any) -> argparse.Action:
        dashed = [name.replace("_", "-") for name in names if name.startswith("--") and "_" in name]
        return super().add_argument(*names, *(name for name in dashed if name not in names), **settings)


def argument_parser(doc: str) -> argparse.ArgumentParser:
    """The parser of a benchmark script: ``--help`` prints the script's docstring as written.

    Flags are spelled with underscores, as beamtrove's are; each is also taken with dashes.
    """
    return _Parser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)


def add_workdir_arguments(parser: argparse.ArgumentParser, workdir_name: str) -> None:
    """Adds ``--workdir`` (default ``$TMPDIR/<workdir_name>``) and ``--results``."""
    parser.add_argument(
        "--workdir",
        type=pathlib.Path,
        default=pathlib.Path(tempfile.gettempdir()) / workdir_name,
        help="folder for inputs built once and for outputs (default: %(default)s)",
    )
    parser.add_argument(
        "--results",
        type=pathlib.Path,
        help="JSON file for the results (default: <workdir>/results/<benchmark>.json); "
        "python -m benchmarks.tables renders such files into docs/benchmarks.md",
    )


def add_datatrove_venv_argument(parser: argparse.ArgumentParser) -> None:
    """Adds ``--datatrove_venv``: where :func:`datatrove_python` finds or makes DataTrove's venv."""
    parser.add_argument(
        "--datatrove_venv",
        type=pathlib.Path,
        default=DEFAULT_VENV,
        help="virtualenv holding DataTrove 0.10.1, made on first use (default: %(default)s)",
    )


# --------------------------------------------------------------------------- results


def verdict(passed: bool) -> str:
    """``PASS`` or ``FAIL``."""
    return "PASS" if passed else "FAIL"


def jaccard(first: set, second: set) -> float:
    """The Jaccard index of two sets; 1.0 for two empty ones."""
    union = len(first | second)
    return len(first & second) / union if union else 1.0


def markdown_table(columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A markdown table; numbers align right."""
    rows = [[_cell(value) for value in row] for row in rows]
    numeric = [bool(rows) and all(_is_number(row[i]) for row in rows if row[i] != "") for i in range(len(columns))]
    lines = [
        "| " + " | ".join(_cell(column) for column in columns) + " |",
        "|" + "|".join("---:" if right else "---" for right in numeric) + "|",
    ]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    text = f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def _is_number(cell: str) -> bool:
    try:
        float(cell.replace(",", "").removesuffix("x").removesuffix("%"))
    except ValueError:
        return False
    return True


def _jsonable(value: Any) -> Any:
    if isinstance(value, pathlib.Path):
        return str(value)
    if isinstance(value, list | tuple):
        return [_jsonable(item) for item in value]
    return value


class Results:
    """What one run of a benchmark script measured and judged, written as JSON for the docs tables.

    The file holds the benchmark's name and title, the command, when and
    where it ran, its settings, and what the script recorded: tables
    (title, columns, rows of cells as printed), checks (a goal and whether
    it was met) and notes. ``python -m benchmarks.tables`` renders it.

    Args:
        script: The script's ``__file__``: its name names the benchmark.
        doc: The script's docstring: its first line is the title.
        args: The parsed flags, recorded as the settings; ``args.results``
            (or ``<args.workdir>/results/<benchmark>.json``) is where :meth:`write` writes.
    """

    def __init__(self, script: str, doc: str, args: argparse.Namespace):
        self.benchmark = pathlib.Path(script).stem
        self.title = doc.strip().splitlines()[0]
        self.path = args.results or args.workdir / "results" / f"{self.benchmark}.json"
        self.settings = {name: _jsonable(value) for name, value in vars(args).items() if name != "results"}
        self.tables: list[dict] = []
        self.checks: list[dict] = []
        self.notes: list[str] = []
        self._started = datetime.datetime.now(datetime.UTC)
        self._clock = time.perf_counter()
        self._load = os.getloadavg()

    def table(self, title: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
        """Records a table whose cells are as the script prints them; returns it as markdown."""
        rows = [list(row) for row in rows]
        self.tables.append({"title": title, "columns": list(columns), "rows": rows})
        return markdown_table(columns, rows)

    def check(self, goal: str, passed: bool) -> bool:
        """Records whether ``goal`` was met; returns ``passed``."""
        self.checks.append({"goal": goal, "passed": bool(passed)})
        return bool(passed)

    @property
    def passed(self) -> bool:
        """Whether every goal recorded so far was met."""
        return all(check["passed"] for check in self.checks)

    def note(self, text: str) -> str:
        """Records a line of the script's findings; returns it."""
        self.notes.append(text)
        return text

    def write(self) -> pathlib.Path:
        """Writes the results file and says where on stderr; returns its path."""
        # Not at the top: word_splitting loads this module in a process that then imports an earlier beamtrove.
        import beamtrove  # noqa: PLC0415

        document = {
            "benchmark": self.benchmark,
            "title": self.title,
            "command": shlex.join(["python", "-m", f"benchmarks.{self.benchmark}", *sys.argv[1:]]),
            "started": self._started.isoformat(timespec="seconds"),
            "seconds": round(time.perf_counter() - self._clock, 1),
            "machine": {
                "cores": os.cpu_count(),
                "load_average": [round(load, 2) for load in self._load],
                "python": platform.python_version(),
                "beamtrove": beamtrove.__version__,
            },
            "settings": self.settings,
            "tables": self.tables,
            "checks": self.checks,
            "notes": self.notes,
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"results: {self.path}", file=sys.stderr)
        return self.path
