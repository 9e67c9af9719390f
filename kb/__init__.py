"""kb: a tuning knowledge base for LLM inference servers.

    from kb import KnowledgeBase
    print(KnowledgeBase().diagnose(["bench.jsonl", "server.log"]).text())

The facade (kb.app) is loaded on first use: `import kb.records` or `kb ask` must not pay
for it (PEP 562 module __getattr__).
"""

from kb.version import __version__

__all__ = ["KnowledgeBase", "__version__"]


def __getattr__(name: str):
    if name == "KnowledgeBase":
        from kb.app import KnowledgeBase

        return KnowledgeBase
    raise AttributeError(f"module 'kb' has no attribute {name!r}")
