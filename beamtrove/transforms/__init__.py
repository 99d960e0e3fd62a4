"""What the steps of a pipeline do, one folder per role: readers, extractors, filters, formatters, dedup,
tokens and writers; each a thin PTransform over plain functions, counting into its own stats namespace."""

# Every step's PCollections of documents cross shuffles with beamtrove's coder: importing any transform
# registers it.
import beamtrove.coders  # noqa: F401
