"""Floor 5, the PromQL subset: parser, syntax tree, printer and an evaluator that means what
Prometheus means (checked against promtool). Imports the store and the leaves.

Offers `parse` and `parse_duration` (parser), the tree (ast), `to_text` (printer), and
`evaluate` with its `Context` (evaluator).
"""

__all__ = ["ast", "binary", "evaluator", "functions", "parser", "printer", "samples"]
