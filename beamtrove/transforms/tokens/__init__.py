"""Tokenization into DataTrove-compatible ``.ds`` shards or Megatron-LM datasets, and reading ``.ds`` shards back."""

from beamtrove.transforms.tokens.format import (
    ShardFileWriter,
    TokenizedDocument,
    TokenizedDocumentCoder,
    humanized_token_count,
    parse_metadata,
    read_doc_ends,
    token_dtype,
)
from beamtrove.transforms.tokens.megatron import MegatronFileWriter, megatron_dtype_code
from beamtrove.transforms.tokens.reader import ReadTokenShards, TokenShardParser, shard_tokenizer
from beamtrove.transforms.tokens.tokenize import DEFAULT_EOS_TOKEN, NO_LOSS_RANGES_KEY, Tokenize, load_tokenizer
from beamtrove.transforms.tokens.writer import TOKEN_FILE_FORMATS, ChunkShuffle, WriteTokenShards, shard_file_name

__all__ = [
    "DEFAULT_EOS_TOKEN",
    "NO_LOSS_RANGES_KEY",
    "TOKEN_FILE_FORMATS",
    "ChunkShuffle",
    "MegatronFileWriter",
    "ReadTokenShards",
    "ShardFileWriter",
    "TokenShardParser",
    "Tokenize",
    "TokenizedDocument",
    "TokenizedDocumentCoder",
    "WriteTokenShards",
    "humanized_token_count",
    "load_tokenizer",
    "megatron_dtype_code",
    "parse_metadata",
    "read_doc_ends",
    "shard_file_name",
    "shard_tokenizer",
    "token_dtype",
]
