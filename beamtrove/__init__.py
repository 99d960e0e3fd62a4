"""beamtrove: LLM pretraining data from web crawls, on Apache Beam."""

import os

# gRPC's fork handlers would make gRPC usable in a forked child; extraction children never use it. With them on,
# each fork while gRPC's threads are mid-call (always, under the local and portable runners) prints
# "fork_posix.cc:71 Other threads are currently calling into gRPC, skipping fork() handlers" and skips them anyway.
# gRPC reads this once it starts in a process, which importing Beam can do: so it is set before anything else, and
# reaches the worker processes a local run starts. A worker image sets it too; an explicit setting is kept.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

from beamtrove.dead_letter import DeadLetter
from beamtrove.document import Document, Media, Origin
from beamtrove.exports import exported_from

__version__ = "0.14.0"

__all__ = ["DeadLetter", "Document", "DocumentCoder", "Media", "Origin", "__version__"]

# The coder is Beam's kind of object: importing it imports Beam, which commands that run no pipeline skip.
__getattr__ = exported_from(__name__, {"DocumentCoder": "beamtrove.coders"})
