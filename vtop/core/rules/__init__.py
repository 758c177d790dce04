"""Floor 5, rules: triage rules as data (`rules/*.yaml`) in a PromQL subset, the triage engine
and the Prometheus export. Imports config, the store and the leaves (never ingest or above).

Offers `Rule` (rule), `load_rules` and `PACKAGED` (loader), `Engine`, `Finding` and `Triage`
(engine), `export_rules` (export), the alerts-as-findings of `--alerts` (alerts), the rules
judged inside Prometheus (judge: `FleetJudge`); the language
is in `promql`.
"""

__all__ = [
    "alerts",
    "engine",
    "export",
    "judge",
    "loader",
    "promql",
    "records",
    "rule",
    "rule_file",
]
