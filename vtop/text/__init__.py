"""Floor 9, text: what vtop prints. The diagnose report as text and JSON (report), the `--plain`
lines (plain), the what-if report (whatif) and the rules reference (rules_reference). Imports
the core; never Textual.
"""

__all__ = ["plain", "report", "rules_reference", "whatif"]
