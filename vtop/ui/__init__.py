"""Textual UI (the live dashboard). The core never imports this package."""
