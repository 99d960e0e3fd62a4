"""The files a part of a token shard becomes, by format: their names, their companions, their writers.

A part is one output file, ``<prefix>_<shard>_<part>`` with the format's
main suffix: DataTrove's ``.ds`` with its ``.ds.index``, ``.ds.metadata``
and, when documents carry loss masks, ``.ds.loss``
(:mod:`beamtrove.transforms.tokens.format`), or Megatron-LM's ``.bin`` with
its ``.idx`` (:mod:`beamtrove.transforms.tokens.megatron`).
:class:`~beamtrove.transforms.tokens.writer.WriteTokenShards` writes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from beamtrove.fs import filesystem, join, move
from beamtrove.transforms.tokens.format import (
    INDEX_SUFFIX,
    LOSS_SUFFIX,
    METADATA_SUFFIX,
    TOKENS_SUFFIX,
    ShardFileWriter,
)
from beamtrove.transforms.tokens.megatron import BIN_SUFFIX, IDX_SUFFIX, MegatronFileWriter

__all__ = [
    "TOKEN_FILE_FORMATS",
    "existing_shard_files",
    "move_part",
    "open_shard_file",
    "part_files",
    "shard_file_name",
]

#: Token file layouts: DataTrove's ``.ds`` shards, Megatron-LM's ``.bin`` + ``.idx`` datasets.
TOKEN_FILE_FORMATS = ("ds", "megatron")

# Every file of one output file, by format: the main file's suffix last, so a
# reader that looks for main files finds one only once its companions are in place.
_SUFFIXES = {
    "ds": (TOKENS_SUFFIX + INDEX_SUFFIX, TOKENS_SUFFIX + LOSS_SUFFIX, TOKENS_SUFFIX + METADATA_SUFFIX, TOKENS_SUFFIX),
    "megatron": (IDX_SUFFIX, BIN_SUFFIX),
}
_OPTIONAL_SUFFIX = TOKENS_SUFFIX + LOSS_SUFFIX


def shard_file_name(prefix: str, shard: int, part: int, file_format: str = "ds") -> str:
    """``<prefix>_<shard>_<part>`` with 5-digit numbers and the format's main suffix, e.g. ``tokens_00003_00000.ds``."""
    return f"{prefix}_{shard:05d}_{part:05d}{_SUFFIXES[file_format][-1]}"


def part_files(main: str, file_format: str) -> list[str]:
    """Every file of the part whose main file is ``main``, the main file last."""
    stem = main.removesuffix(_SUFFIXES[file_format][-1])
    return [stem + suffix for suffix in _SUFFIXES[file_format]]


def move_part(temp: str, final: str, file_format: str, storage_options: Mapping[str, Any]) -> None:
    """Moves every file of the part ``temp`` (its main file) to the names of ``final``, the main file last.

    Raises:
        FileNotFoundError: A file the part must have is at neither name.
    """
    fs, _ = filesystem(final, storage_options)
    for source, destination in zip(part_files(temp, file_format), part_files(final, file_format), strict=True):
        if fs.exists(filesystem(source, storage_options)[1]):
            move(source, destination, storage_options)
        elif not source.endswith(_OPTIONAL_SUFFIX) and not fs.exists(filesystem(destination, storage_options)[1]):
            # A retried finalize finds the files it moved before in place.
            raise FileNotFoundError(f"Temporary file {source} vanished before it reached {final}.")


def open_shard_file(
    path: str,
    file_format: str,
    *,
    tokenizer: str,
    token_size: int,
    with_loss: bool,
    storage_options: Mapping[str, Any],
) -> ShardFileWriter | MegatronFileWriter:
    """The writer of the part named ``path`` (its main file) in ``file_format``, each token ``token_size`` bytes.

    ``tokenizer`` and ``with_loss`` (whether the part has a loss mask) apply to ``.ds`` parts only.
    """
    if file_format == "megatron":
        return MegatronFileWriter(
            path.removesuffix(BIN_SUFFIX), token_size=token_size, storage_options=dict(storage_options)
        )
    return ShardFileWriter(
        path,
        tokenizer=tokenizer,
        token_size=token_size,
        with_loss=with_loss,
        storage_options=dict(storage_options),
    )


def existing_shard_files(
    output_dir: str, prefix: str, file_format: str, storage_options: Mapping[str, Any]
) -> list[str]:
    """The files ``output_dir`` holds of parts named ``<prefix>_<shard>_<part>`` in ``file_format``, sorted."""
    fs, path = filesystem(output_dir, storage_options)
    if not fs.isdir(path):
        return []
    # Only names this sink writes: another prefix that starts like this one is not ours.
    digits = "[0-9]" * 5
    patterns = (join(path, f"{prefix}_{digits}_{digits}{suffix}") for suffix in _SUFFIXES[file_format])
    return sorted(found for pattern in patterns for found in fs.glob(pattern))
