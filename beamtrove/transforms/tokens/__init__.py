"""Tokenization into DataTrove-compatible ``.ds`` shards, and reading them back."""

from beamtrove.transforms.tokens.format import (
    ShardFileWriter,
    TokenizedDocument,
    TokenizedDocumentCoder,
    humanized_token_count,
    parse_metadata,
    read_doc_ends,
    token_dtype,
)
from beamtrove.transforms.tokens.reader import ReadTokenShards, TokenShardParser, shard_tokenizer
from beamtrove.transforms.tokens.tokenize import DEFAULT_EOS_TOKEN, NO_LOSS_RANGES_KEY, Tokenize, load_tokenizer
from beamtrove.transforms.tokens.writer import WriteTokenShards, shard_file_name

__all__ = [
    "DEFAULT_EOS_TOKEN",
    "NO_LOSS_RANGES_KEY",
    "ReadTokenShards",
    "ShardFileWriter",
    "TokenShardParser",
    "Tokenize",
    "TokenizedDocument",
    "TokenizedDocumentCoder",
    "WriteTokenShards",
    "humanized_token_count",
    "load_tokenizer",
    "parse_metadata",
    "read_doc_ends",
    "shard_file_name",
    "shard_tokenizer",
    "token_dtype",
]
