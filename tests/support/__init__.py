"""Helpers of the test suite (scripts and benchmarks may use these, never test modules)."""
