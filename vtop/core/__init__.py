"""The core: everything vtop knows and does without a screen (no Textual, plotext or vtop.ui
here; an import contract keeps it). Its folders are floors, each importing only those below:

    ops > manage > session | whatif > rules | ingest > forensics > config > store
    > catalog, managed_server > frame, histogram, redact, strict_json, status

Offers, by floor: the orchestrations (`ops`), the managed process and the apply flow
(`manage`), the session and the one diagnosis (`session`), the scheduler model (`whatif`),
rules as data (`rules`), frames from the world (`ingest`), the server's processes and log
(`forensics`), the server"s config and vtop"s settings (`config`), the series store (`store`),
and the shared data (`frame` and the leaves).
"""

__all__ = [
    "catalog",
    "config",
    "forensics",
    "frame",
    "histogram",
    "ingest",
    "manage",
    "managed_server",
    "ops",
    "redact",
    "rules",
    "session",
    "status",
    "store",
    "strict_json",
    "whatif",
]
