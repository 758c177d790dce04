"""A real vLLM (CPU build) for end-to-end tests: tiny offline model, server lifecycle."""
