"""Floor 4½ (below ingest and rules, above config), forensics: evidence from the server's own
processes and log, for "where is it stuck" and "why did it die". Imports config (the startup
failures) and the leaves (never the store, rules, ingest, session or above); writes nothing to
any process.

Offers which processes serve a URL (processes), their Python stacks taken with py-spy
(pyspy, stacks), what each is doing and where the engine is stuck (classify), both at once
(look), and the last words of an engine that died, from its log (last_words).
"""

__all__ = ["classify", "last_words", "look", "processes", "pyspy", "stacks"]
