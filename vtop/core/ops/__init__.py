"""Floor 8, ops: orchestrations over every stage below. `vtop tune` (tune), a finding"s fixes
ranked by prediction (rank), the rule unit tests (rule_unittest) and their promtool export
(export_unittest), and what a server's processes and log add to a diagnosis
(process_evidence), the evidence of servers judged in Prometheus (drill_down). Imports any
core floor; nothing in the core imports it.
"""

__all__ = [
    "drill_down",
    "export_unittest",
    "front_door",
    "process_evidence",
    "rank",
    "rule_unittest",
    "tune",
]
