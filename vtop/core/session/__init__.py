"""Floor 6, session: a `Session` ingests frames and keeps, per server, the effective config,
findings, marks and chart history; `diagnosis(session, target)` is the one diagnosis every
output shares; the fleet view. Imports rules, ingest, config, the store and the leaves (never
whatif, manage or above).

Offers `Session` and `watching_session` (session), `WindowSession` and `judged_window`, the
one-shot triage's window judge (window_session), `diagnosis`, `diagnose_frames` and
`Diagnosis` (diagnose), what every view says of one server (`TargetFacts`, `TargetDetail`:
facts), the fleet rows (fleet) and their groups (fleet_groups), the fleet diagnosis by namespace
and model (fleet_verdicts), a router's
view of its backends (router), a server's own GPUs (remote_gpus), each target's summaries over
time as columns (history), the recent frames a bundle writes, held compressed (recent), and
vLLM's request spans ranked and their tail split (request_view) and the requests that made
others wait: head-of-line blocking, slot hogs, outliers (request_findings).
"""

__all__ = [
    "diagnose",
    "facts",
    "fleet",
    "fleet_groups",
    "fleet_verdicts",
    "history",
    "recent",
    "remote_gpus",
    "request_findings",
    "request_view",
    "router",
    "session",
    "unjudged",
    "window_session",
]
