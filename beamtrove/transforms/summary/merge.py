"""Merging the summary statistics of several runs or dumps, what DataTrove's ``StatsMerger`` does."""

from __future__ import annotations

import json
import posixpath
from collections.abc import Iterable, Mapping
from typing import Any

from beamtrove.fs import filesystem, join, write_json
from beamtrove.transforms.summary.metric import MetricStats, metric_dict_from_json, metric_dict_to_json
from beamtrove.transforms.summary.transform import DEFAULT_TOP_K, METRIC_FILE, TOP_K_GROUPS, top_k

__all__ = ["merge_summary_stats"]


def _metric_files(folder: str, storage_options: Mapping[str, Any] | None) -> dict[str, str]:
    """``{"<group>/<statistic>": path}`` of the ``metric.json`` files under ``folder``.

    Raises:
        FileNotFoundError: ``folder`` holds none.
    """
    fs, root = filesystem(folder, storage_options)
    found = {}
    for path in fs.glob(f"{root.rstrip('/')}/*/*/{METRIC_FILE}"):
        group, stat = path.split("/")[-3:-1]
        found[f"{group}/{stat}"] = path
    if not found:
        raise FileNotFoundError(f"No <group>/<statistic>/{METRIC_FILE} under {folder}: is it a summary_stats folder?")
    return found


def merge_summary_stats(
    folders: Iterable[str],
    output_dir: str,
    top_k_keys: int = DEFAULT_TOP_K,
    storage_options: Mapping[str, Any] | None = None,
) -> list[str]:
    """Adds up the summary statistics of several folders into ``output_dir``, in the same layout.

    Each ``<group>/<statistic>/metric.json`` found in any folder is read with
    DataTrove's rules, added key by key (a key or a statistic found in
    some folders only is taken as it is) and written to the same place under
    ``output_dir``; ``fqdn`` and ``suffix`` keep their ``top_k_keys`` keys
    with the most documents. The sums are exact, so the order of ``folders``
    does not change the result. DataTrove's files and beamtrove's mix.

    Returns:
        The paths written, sorted.

    Raises:
        FileNotFoundError: A folder holds no statistics.
        ValueError: No folder, or a file that is not a statistics file.
    """
    folders = list(folders)
    if not folders:
        raise ValueError("Name at least one summary statistics folder to merge.")
    merged: dict[str, dict[str, MetricStats]] = {}
    for folder in folders:
        fs, _ = filesystem(folder, storage_options)
        for name, path in sorted(_metric_files(folder, storage_options).items()):
            try:
                stats = metric_dict_from_json(json.loads(fs.cat_file(path)))
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                raise ValueError(f"{path} is not a summary statistics file: {exc}") from exc
            into = merged.setdefault(name, {})
            for key, figures in stats.items():
                into[key] = into[key] + figures if key in into else figures
    written = []
    for name, stats in sorted(merged.items()):
        kept = top_k(stats, top_k_keys) if posixpath.dirname(name) in TOP_K_GROUPS else stats
        path = join(output_dir, name, METRIC_FILE)
        write_json(metric_dict_to_json(kept), path, storage_options)
        written.append(path)
    return written
