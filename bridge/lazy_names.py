"""A package's names imported from their modules when first asked for (PEP 562), so that importing
the package (the CLI's start, `offsets show`) does not import every module it re-exports."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_names(package: str, where: dict[str, str], namespace: dict[str, Any]) -> Callable[[str], Any]:
    """The package's module `__getattr__`: `where` maps each name to its module; a name found is
    kept in `namespace` (the package's globals), so it is imported once."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    return __getattr__
