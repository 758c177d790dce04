"""Floor 6, session: a `Session` ingests frames and keeps, per server, the effective config,
findings, marks and chart history; `diagnosis(session, target)` is the one diagnosis every
output shares; the fleet view. Imports rules, ingest, config, the store and the leaves (never
whatif, manage or above).

Offers `Session` (session), `diagnosis`, `diagnose_frames`, `judged_window`, `window_frames`
and `Diagnosis` (diagnose), the fleet rows (fleet), each target's summaries over time as
columns (history), and the recent frames a bundle writes, held compressed (recent).
"""

__all__ = ["diagnose", "fleet", "history", "recent", "session", "unjudged"]
