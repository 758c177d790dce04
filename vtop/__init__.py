"""vtop: top for vLLM."""

__version__ = "0.1.0"
