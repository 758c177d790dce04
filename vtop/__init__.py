"""vtop: top for vLLM."""

__version__ = "0.2.0"
