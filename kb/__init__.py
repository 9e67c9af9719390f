"""kb: a tuning knowledge base for LLM inference servers.

Kept import-light on purpose: `kb ask` must start fast, so submodules are imported
where they are used.
"""

from kb.version import __version__

__all__ = ["__version__"]
