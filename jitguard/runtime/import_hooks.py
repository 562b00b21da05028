"""Run a function right after a module is imported: the warm-up waits for ``import triton``, the
vLLM plugin for vLLM's worker modules (imported after the plugin is called)."""
from __future__ import annotations

import importlib.abc
import sys


class AfterImport(importlib.abc.MetaPathFinder):
    """A finder that runs ``then()`` right after ``fullname`` is imported. It delegates the import to
    the finders after it, so another hook waiting for the same module still runs; it removes itself
    once the module is executed. ``then`` must not raise (callers catch and report)."""

    def __init__(self, fullname: str, then, tag: str = "") -> None:
        self.fullname, self.then, self.tag, self.busy = fullname, then, tag, False

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.fullname or self.busy:
            return None
        self.busy = True
        try:
            spec = None
            for finder in [f for f in sys.meta_path if f is not self]:
                find = getattr(finder, "find_spec", None)
                spec = find(fullname, path, target) if find is not None else None
                if spec is not None:
                    break
        finally:
            self.busy = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader, finder = spec.loader, self

        class _Loader(importlib.abc.Loader):
            def create_module(self, spec):
                return loader.create_module(spec)

            def exec_module(self, module):
                loader.exec_module(module)
                if finder in sys.meta_path:
                    sys.meta_path.remove(finder)
                finder.then()

        spec.loader = _Loader()
        return spec


def after_import(fullname: str, then, *, tag: str) -> None:
    """Run ``then()`` now if ``fullname`` is imported, else right after it is; one pending hook per
    module and ``tag`` (a second call while one waits does nothing)."""
    if fullname in sys.modules:
        then()
    elif not any(isinstance(f, AfterImport) and (f.fullname, f.tag) == (fullname, tag) for f in sys.meta_path):
        sys.meta_path.insert(0, AfterImport(fullname, then, tag))
