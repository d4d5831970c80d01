"""A small Dockerfile reader for the checks: stages with their instructions, ARG defaults applied
to FROM lines. Enough for this repository's Dockerfile, not a general parser."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Instruction:
    keyword: str
    arguments: str

    def exec_form(self) -> list[str] | None:
        """The JSON array of an exec-form instruction, or None for the shell form."""
        text = self.arguments.strip()
        if not text.startswith("["):
            return None
        loaded = json.loads(text)
        return [str(item) for item in loaded]


@dataclass(slots=True)
class Stage:
    name: str
    base: str
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]

    def last(self, keyword: str) -> Instruction | None:
        found = self.all(keyword)
        return found[-1] if found else None


def _logical_lines(text: str) -> list[str]:
    lines: list[str] = []
    current = ""
    for raw in text.splitlines():
        stripped = raw.strip()
        if stripped.startswith("#") or not stripped:
            continue  # comments and blank lines may sit inside a continued instruction
        if stripped.endswith("\\"):
            current += stripped[:-1].rstrip() + " "
            continue
        lines.append(current + stripped)
        current = ""
    if current:
        lines.append(current.strip())
    return lines


def parse(path: Path) -> tuple[dict[str, str], list[Stage]]:
    """(global ARG defaults, stages in order); FROM bases with `${ARG}` substituted."""
    args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in _logical_lines(path.read_text()):
        keyword, _, rest = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            match = re.fullmatch(r"(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?", rest.strip(), flags=re.IGNORECASE)
            assert match, f"unreadable FROM line: {line}"
            base = re.sub(r"\$\{(\w+)\}", lambda m: args.get(m[1], m[0]), match[1])
            stages.append(Stage(name=match[2] or str(len(stages)), base=base))
        elif keyword == "ARG" and not stages:
            name, _, default = rest.strip().partition("=")
            args[name] = default
        elif stages:
            stages[-1].instructions.append(Instruction(keyword, rest.strip()))
    return args, stages
