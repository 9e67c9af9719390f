"""Markdown → sections: one per heading (markdown-it-py tokens, with their source line
maps), holding its paragraphs and list items, code blocks and tables, and the
`**Label:** value` field a list item may be."""

from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass
class Item:
    """A piece of text inside a section: a paragraph or list item."""

    text: str
    line: int
    in_list: bool = False
    depth: int = 0  # list nesting: 1 for a top-level bullet, 2 for a bullet inside it


@dataclass
class Table:
    header: list[str]
    rows: list[tuple[list[str], int]]
    line: int


@dataclass
class Section:
    title: str
    level: int
    line_start: int
    line_end: int
    items: list[Item] = field(default_factory=list)
    fences: list[tuple[str, str, int]] = field(default_factory=list)  # (info, content, line)
    tables: list[Table] = field(default_factory=list)
    parents: list["Section"] = field(default_factory=list)


def _md():
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable("table")


def parse_sections(text: str) -> list[Section]:
    """Split a markdown document into sections (one per heading; a preface before
    the first heading is a section with level 0)."""
    tokens = _md().parse(text)
    n_lines = text.count("\n") + 1
    sections: list[Section] = []
    stack: list[Section] = []
    current = Section(title="", level=0, line_start=1, line_end=1)
    in_list = 0
    table: Table | None = None
    row: list[str] | None = None
    row_line = 0
    in_head = False
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        t = tok.type
        if t == "heading_open":
            level = int(tok.tag[1])
            title = tokens[i + 1].content.strip()
            sections.append(current)
            while stack and stack[-1].level >= level:
                stack.pop()
            current = Section(title=title, level=level, line_start=tok.map[0] + 1,
                              line_end=tok.map[1], parents=list(stack))
            stack.append(current)
            i += 3
            continue
        if tok.map:
            current.line_end = max(current.line_end, tok.map[1])
        if t in ("bullet_list_open", "ordered_list_open"):
            in_list += 1
        elif t in ("bullet_list_close", "ordered_list_close"):
            in_list -= 1
        elif t == "inline" and table is None:
            line = tok.map[0] + 1 if tok.map else current.line_start
            current.items.append(Item(tok.content.strip(), line, in_list > 0, in_list))
        elif t in ("fence", "code_block"):
            line = tok.map[0] + 1 if tok.map else current.line_start
            current.fences.append((tok.info.strip(), tok.content.rstrip("\n"), line))
        elif t == "table_open":
            table = Table(header=[], rows=[], line=tok.map[0] + 1 if tok.map else current.line_start)
        elif t == "thead_open":
            in_head = True
        elif t == "thead_close":
            in_head = False
        elif t == "tr_open":
            row, row_line = [], (tok.map[0] + 1 if tok.map else table.line)
        elif t == "inline" and table is not None:
            row.append(tok.content.strip())
        elif t == "tr_close" and table is not None:
            if in_head:
                table.header = row
            else:
                table.rows.append((row, row_line))
        elif t == "table_close":
            current.tables.append(table)
            table = None
        i += 1
    sections.append(current)
    for s in sections:
        s.line_end = min(max(s.line_end, s.line_start), n_lines)
    return [s for s in sections if s.title or s.items or s.fences or s.tables]


FIELD = re.compile(r"^\*\*(?P<label>[^*]+?):\*\*\s*(?P<value>.*)$|^\*\*(?P<label2>[^*]+?)\*\*:\s*(?P<value2>.*)$", re.S)


def field_of(item: Item) -> tuple[str, str] | None:
    """(label in lower case, value on one line) of a `**Label:** value` item, else None."""
    m = FIELD.match(item.text)
    if not m:
        return None
    label = (m.group("label") or m.group("label2")).strip().lower()
    value = (m.group("value") if m.group("label") else m.group("value2")) or ""
    return label, " ".join(value.split())
