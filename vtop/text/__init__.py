"""Floor 9, text: what vtop prints. The diagnose report as text and JSON (report), folded to
the terminal's width (fold), the `--plain` lines (plain), the probe's report (probe), the
what-if report (whatif), where the engine is and why it died (stacks), the slowest requests
(requests), the requests in flight (in_flight), and the rules and
metrics references (rules_reference,
metrics_reference). Imports the core; never Textual.
"""

__all__ = [
    "fold",
    "in_flight",
    "metrics_reference",
    "plain",
    "probe",
    "report",
    "requests",
    "rules_reference",
    "stacks",
    "whatif",
]
