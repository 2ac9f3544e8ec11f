"""Package names imported on first use, so that importing a part (or one of its light modules) stays cheap.

``import ltr.train.config`` runs ``ltr/train/__init__.py`` first; when that ``__init__`` imported the
trainer, every command that only wanted the option rules paid for torch (~2 s), and ``ltr --help``
for torch, scipy and the rest (6-8 s on a busy machine). A package ``__init__`` instead names what it
re-exports and where it lives; :func:`lazy_exports` gives it the module ``__getattr__`` (PEP 562)
that imports the defining module when a name is first asked for (``from ltr.train import Trainer``
works as before) and keeps the value in the package for the next time.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any, Callable


def lazy_exports(package: str, where: dict[str, tuple[str, ...]],
                 fallback: Callable[[str], Any] | None = None) -> tuple[list[str], Callable[[str], Any], Callable[[], list[str]]]:
    """``(__all__, __getattr__, __dir__)`` for ``package`` re-exporting ``where`` (module -> names).

    A name not in ``where`` goes to ``fallback`` (a deprecated-name forwarder) or raises
    AttributeError as a module does.

    >>> names, getattr_, _ = lazy_exports("ltr.base.errors", {"ltr.base.errors": ("LtrError",)})
    >>> names, getattr_("LtrError").__name__
    (['LtrError'], 'LtrError')
    """
    module_of = {name: module for module, names in where.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = module_of.get(name)
        if module is None:
            if fallback is not None:
                return fallback(name)
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)  # the next look-up is a plain attribute
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *module_of})

    return list(module_of), __getattr__, __dir__
