#!/usr/bin/env python3
"""Write docs/RULES.md from the rule registry (kb/rules/registry.py).

    python scripts/gen_rules_doc.py          # rewrite docs/RULES.md
    python scripts/gen_rules_doc.py --check  # exit 1 if docs/RULES.md is stale

tests/test_rule_registry.py fails when the file differs from what this prints.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kb.rules.describe import markdown  # noqa: E402

OUT = ROOT / "docs" / "RULES.md"


def main(argv: list[str]) -> int:
    text = markdown()
    if "--check" in argv:
        if not OUT.exists() or OUT.read_text() != text:
            print(f"{OUT.relative_to(ROOT)} is stale: run python scripts/gen_rules_doc.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(ROOT)} ({len(text.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
