"""Dashboard screens (help, explanation, full diagnosis)."""
