"""kb: a tuning knowledge base for LLM inference servers.

Kept import-light on purpose: `kb ask` must start fast, so submodules are imported
where they are used.
"""

__version__ = "0.1.0"
