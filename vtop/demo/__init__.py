"""The demo recording shipped with vtop (see scripts/record_demo.py)."""
