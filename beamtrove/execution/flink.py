"""A standalone Flink cluster from a distribution without launch scripts: its configuration and processes.

The PyPI package ``apache-flink-libraries`` ships Flink's jars but not its
``bin/*.sh`` scripts, so beamtrove starts Flink's JobManager and TaskManager
entry points with ``java`` itself, sized by Flink's own ``BashJavaUtils`` as
the scripts would, and watches the cluster through the JobManager's REST
API. ``beamtrove runners flink ...`` and the Slurm job of
:mod:`beamtrove.execution.slurm_flink` use these.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable

from beamtrove.configuration import ConfigurationError

__all__ = [
    "FlinkProcess",
    "flink_process",
    "flink_taskmanagers",
    "is_flink_home",
    "java_executable",
    "java_version",
    "parse_properties",
    "wait_for_taskmanagers",
    "write_flink_config",
]

_BASH_JAVA_UTILS = "org.apache.flink.runtime.util.bash.BashJavaUtils"
_BASH_JAVA_UTILS_PREFIX = "BASH_JAVA_UTILS_EXEC_RESULT:"
_ENTRY_POINTS = {
    "jobmanager": ("org.apache.flink.runtime.entrypoint.StandaloneSessionClusterEntrypoint", "GET_JM_RESOURCE_PARAMS"),
    "taskmanager": ("org.apache.flink.runtime.taskexecutor.TaskManagerRunner", "GET_TM_RESOURCE_PARAMS"),
}

# JDK packages Flink and its serializers reach into by reflection; on Java 17 they must be opened explicitly.
_OPENED_PACKAGES = (
    "java.io",
    "java.lang",
    "java.lang.reflect",
    "java.math",
    "java.net",
    "java.nio",
    "java.text",
    "java.time",
    "java.util",
    "java.util.concurrent",
    "java.util.concurrent.atomic",
    "java.util.concurrent.locks",
    "sun.nio.ch",
)
_JAVA_MODULE_FLAGS = (
    *(f"--add-opens=java.base/{package}=ALL-UNNAMED" for package in _OPENED_PACKAGES),
    "--add-exports=java.base/sun.net.util=ALL-UNNAMED",
)
_SIZING_ERROR_TAIL = 1500


def is_flink_home(path: str | os.PathLike) -> bool:
    """Tells whether ``path`` holds what beamtrove needs to start Flink: ``lib/flink-dist-*.jar`` and BashJavaUtils."""
    home = pathlib.Path(path)
    return any((home / "lib").glob("flink-dist*.jar")) and (home / "bin" / "bash-java-utils.jar").is_file()


def java_executable() -> str:
    """The ``java`` of ``$JAVA_HOME``, else the one on ``PATH``."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (pathlib.Path(java_home) / "bin" / "java").is_file():
        return str(pathlib.Path(java_home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise FileNotFoundError("No java found (neither $JAVA_HOME/bin/java nor java on PATH): Flink needs Java 11+.")
    return found


def java_version(java: str) -> str:
    """The first line of ``java -version``, e.g. ``openjdk version "17.0.15" 2025-04-15``."""
    result = subprocess.run([java, "-version"], capture_output=True, text=True, check=False)
    lines = (result.stderr or result.stdout).strip().splitlines()
    return lines[0] if lines else "unknown"


def parse_properties(values: list[str] | None) -> dict[str, str]:
    """``KEY=VALUE`` settings (as ``-D`` takes them) as a dict.

    Raises:
        ConfigurationError: A value without ``=`` or without a key.
    """
    properties = {}
    for value in values or []:
        key, sep, setting = value.partition("=")
        if not sep or not key:
            raise ConfigurationError(f"-D takes key=value, not {value!r}")
        properties[key] = setting
    return properties


def write_flink_config(
    conf_dir: str | os.PathLike,
    *,
    jobmanager: str = "localhost",
    rest_port: int = 8081,
    rpc_port: int = 6123,
    slots: int = 1,
    parallelism: int | None = None,
    tmp_dir: str | os.PathLike | None = None,
    jobmanager_memory: str = "1600m",
    taskmanager_memory: str = "1728m",
    extra: dict[str, str | int] | None = None,
) -> pathlib.Path:
    """Writes a standalone-cluster ``config.yaml`` and a ``log4j.properties`` into ``conf_dir``.

    Args:
        conf_dir: The configuration directory to create or overwrite.
        jobmanager: Host name every TaskManager and client reaches the JobManager at.
        rest_port: The JobManager's REST and web port.
        rpc_port: The JobManager's RPC port.
        slots: Task slots per TaskManager.
        parallelism: Default job parallelism; defaults to ``slots``.
        tmp_dir: Flink's temporary directories (``io.tmp.dirs``, blob and web
            uploads); Java's temporary directory when None.
        jobmanager_memory: ``jobmanager.memory.process.size``.
        taskmanager_memory: ``taskmanager.memory.process.size``.
        extra: More ``key: value`` settings, applied last.

    Returns:
        The path of ``config.yaml``.
    """
    conf = pathlib.Path(conf_dir)
    conf.mkdir(parents=True, exist_ok=True)
    settings: dict[str, str | int] = {
        "jobmanager.rpc.address": jobmanager,
        "jobmanager.rpc.port": rpc_port,
        "jobmanager.bind-host": "0.0.0.0",
        "jobmanager.memory.process.size": jobmanager_memory,
        "rest.address": jobmanager,
        "rest.port": rest_port,
        "rest.bind-address": "0.0.0.0",
        "taskmanager.bind-host": "0.0.0.0",
        "taskmanager.numberOfTaskSlots": slots,
        "taskmanager.memory.process.size": taskmanager_memory,
        "parallelism.default": parallelism or slots,
    }
    if tmp_dir is not None:
        tmp = str(pathlib.Path(tmp_dir).resolve())
        settings.update({"io.tmp.dirs": tmp, "blob.storage.directory": tmp, "web.tmpdir": tmp})
    settings.update(extra or {})
    # Every value is written as a JSON scalar, which is valid YAML and keeps host names and paths strings.
    lines = [f"{key}: {json.dumps(value)}" for key, value in settings.items()]
    path = conf / "config.yaml"
    path.write_text("# Written by beamtrove.\n" + "\n".join(lines) + "\n", encoding="utf-8")
    (conf / "log4j.properties").write_text(
        "# Written by beamtrove: each Flink process logs to the file its -Dlog.file names.\n"
        "rootLogger.level = INFO\n"
        "rootLogger.appenderRef.main.ref = MainFile\n"
        "appender.main.name = MainFile\n"
        "appender.main.type = File\n"
        "appender.main.append = true\n"
        "appender.main.fileName = ${sys:log.file}\n"
        "appender.main.layout.type = PatternLayout\n"
        "appender.main.layout.pattern = %d{yyyy-MM-dd HH:mm:ss,SSS} %-5p %c - %m%n\n",
        encoding="utf-8",
    )
    return path


@dataclasses.dataclass(frozen=True)
class FlinkProcess:
    """A Flink JobManager or TaskManager to start: its command line and environment.

    Attributes:
        command: ``java`` and its arguments.
        env: The process environment (this one plus Flink's directory variables).
    """

    command: list[str]
    env: dict[str, str]


def flink_process(
    role: str,
    flink_home: str | os.PathLike,
    conf_dir: str | os.PathLike,
    log_file: str | os.PathLike,
    properties: dict[str, str] | None = None,
    java: str | None = None,
) -> FlinkProcess:
    """Builds the ``java`` command of a standalone JobManager or TaskManager.

    Flink's ``BashJavaUtils`` derives the JVM memory flags and the memory
    settings the process must be given from ``conf_dir/config.yaml``, as
    Flink's own launch scripts have it do.

    Args:
        role: ``"jobmanager"`` or ``"taskmanager"``.
        flink_home: A Flink distribution (see :func:`is_flink_home`).
        conf_dir: Directory holding ``config.yaml`` (and ``log4j.properties``).
        log_file: The process's log file.
        properties: Settings for this process only (``-D key=value``), e.g.
            ``io.tmp.dirs`` of one node.
        java: The ``java`` executable; defaults to :func:`java_executable`.

    Returns:
        The :class:`FlinkProcess`.

    Raises:
        ValueError: An unknown role or a directory that is no Flink distribution.
        FileNotFoundError: No ``java``.
        RuntimeError: Flink could not size the process from the configuration.
    """
    if role not in _ENTRY_POINTS:
        raise ValueError(f"Unknown Flink process {role!r}: choose jobmanager or taskmanager.")
    home = pathlib.Path(flink_home).resolve()
    if not is_flink_home(home):
        raise ValueError(f"{home} is no Flink distribution: it lacks lib/flink-dist-*.jar or bin/bash-java-utils.jar.")
    conf = pathlib.Path(conf_dir).resolve()
    if not (conf / "config.yaml").is_file():
        raise ValueError(f"{conf} holds no config.yaml.")
    java = java or java_executable()
    main_class, query = _ENTRY_POINTS[role]
    classpath = os.pathsep.join(str(jar) for jar in sorted((home / "lib").glob("*.jar")))
    dynamic = [argument for key, value in (properties or {}).items() for argument in ("-D", f"{key}={value}")]
    sizing = subprocess.run(
        [
            java, "-cp", f"{home / 'bin' / 'bash-java-utils.jar'}{os.pathsep}{classpath}", _BASH_JAVA_UTILS, query,
            "--configDir", str(conf), *dynamic,
        ],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    prefix = len(_BASH_JAVA_UTILS_PREFIX)
    results = [line[prefix:] for line in sizing.stdout.splitlines() if line.startswith(_BASH_JAVA_UTILS_PREFIX)]
    if sizing.returncode or len(results) < 2:
        raise RuntimeError(
            f"Flink's BashJavaUtils could not size the {role} from {conf / 'config.yaml'} "
            f"(exit {sizing.returncode}): {(sizing.stdout + sizing.stderr).strip()[-_SIZING_ERROR_TAIL:]}"
        )
    jvm_flags, memory_settings = results[-2].split(), results[-1].split()
    log = pathlib.Path(log_file).resolve()
    log.parent.mkdir(parents=True, exist_ok=True)
    command = [
        java, *jvm_flags, *_JAVA_MODULE_FLAGS, f"-Dlog.file={log}",
        *([f"-Dlog4j.configurationFile=file:{conf / 'log4j.properties'}"] if (conf / "log4j.properties").is_file()
          else []),
        "-cp", classpath, main_class, "--configDir", str(conf), *memory_settings, *dynamic,
    ]  # fmt: skip
    env = {
        **os.environ,
        "FLINK_HOME": str(home),
        "FLINK_CONF_DIR": str(conf),
        "FLINK_LIB_DIR": str(home / "lib"),
        "FLINK_OPT_DIR": str(home / "opt"),
        "FLINK_PLUGINS_DIR": str(home / "plugins"),
        "FLINK_BIN_DIR": str(home / "bin"),
    }
    return FlinkProcess(command, env)


def flink_taskmanagers(rest_url: str, timeout: float = 5.0) -> list[dict]:
    """The TaskManagers registered with a JobManager, from its REST API (``GET /taskmanagers``)."""
    # Only asking a running cluster needs the HTTP client: the `runners` and `slurm` commands start without it.
    import urllib.request  # noqa: PLC0415

    with urllib.request.urlopen(f"{rest_url.rstrip('/')}/taskmanagers", timeout=timeout) as response:
        return json.load(response)["taskmanagers"]


def _process_gone(pid: int) -> bool:
    try:
        state = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return True
    return state in ("Z", "X")


def wait_for_taskmanagers(
    rest_url: str,
    count: int,
    timeout: float = 300.0,
    interval: float = 1.0,
    watch_pids: Iterable[int] = (),
    on_wait: Callable[[str], None] | None = None,
) -> list[dict]:
    """Polls the JobManager's REST API until ``count`` TaskManagers are registered.

    Args:
        rest_url: ``http://host:port`` of the JobManager.
        count: How many TaskManagers to wait for.
        timeout: Seconds to wait.
        interval: Seconds between polls.
        watch_pids: Processes (JobManager, TaskManager launcher) whose exit ends the wait early.
        on_wait: Called with a progress line every 30 seconds.

    Returns:
        The registered TaskManagers (the REST API's records).

    Raises:
        TimeoutError: Fewer than ``count`` registered in time, or a watched process exited.
    """
    deadline = time.monotonic() + timeout
    next_report = time.monotonic() + 30
    registered: list[dict] = []
    last_error = "no answer yet"
    while True:
        try:
            # A TaskManager shows up before it has reported its slots; count it once it has.
            registered = [manager for manager in flink_taskmanagers(rest_url) if manager.get("slotsNumber", 0) > 0]
            last_error = f"{len(registered)} of {count} TaskManager(s) registered with their slots"
        except (OSError, ValueError, KeyError) as exc:
            last_error = f"{rest_url} does not answer: {exc}"
        if len(registered) >= count:
            return registered
        gone = [pid for pid in watch_pids if _process_gone(pid)]
        if gone:
            raise TimeoutError(
                f"process(es) {', '.join(map(str, gone))} exited before the cluster came up ({last_error})"
            )
        if time.monotonic() >= deadline:
            raise TimeoutError(f"the Flink cluster did not come up within {timeout:.0f} s ({last_error})")
        if on_wait and time.monotonic() >= next_report:
            on_wait(last_error)
            next_report += 30
        time.sleep(interval)
