"""Floor 5, rules: triage rules as data (`rules/*.yaml`) in a PromQL subset, the triage engine
and the Prometheus export. Imports config, the store and the leaves (never ingest or above).

Offers `Rule` (rule), `load_rules` and `PACKAGED` (loader), `Engine`, `Finding` and `Triage`
(engine), `export_rules` (export), the alerts-as-findings of `--alerts` (alerts); the language
is in `promql`.
"""

__all__ = ["alerts", "engine", "export", "loader", "promql", "records", "rule", "rule_file"]
