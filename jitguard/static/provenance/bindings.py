"""What the walk of a module records for the classifier: its functions (parameters, and every way
each local gets its value), module constants, calls between its functions, attribute assignments."""
from __future__ import annotations

import ast
from dataclasses import dataclass, field


# ---- per-function facts --------------------------------------------------------------------------
@dataclass
class Entry:
    """One way a local gets its value."""

    kind: str  # "expr" | "dim" | "stride" | "item" | "loop" | "opaque" | "aug"
    node: ast.AST | None = None  # value expression (expr/aug/item), tensor expression (dim/stride)
    index: int | None = None  # dim / stride index
    line: int = 0
    ndim: int | None = None
    stmt: ast.AST | None = None  # the ``for`` statement of a loop entry


@dataclass
class ParamInfo:
    name: str
    index: int  # position in a call (self excluded for methods), -1 keyword-only
    default: ast.AST | None
    annotation: ast.AST | None
    kind: str  # "pos" | "kwonly" | "star"


@dataclass
class FunctionInfo:
    qual: str
    name: str
    node: ast.AST
    class_name: str | None
    is_method: bool
    parent: "FunctionInfo | None"
    params: dict[str, ParamInfo] = field(default_factory=dict)
    assigns: dict[str, list[Entry]] = field(default_factory=dict)
    imported: set[str] = field(default_factory=set)
    scope: object = None  # the names.Scope of the body
    slices: list[ast.Subscript] = field(default_factory=list)  # `x[a:b]`, `x[a:b, ...]` in the body


@dataclass
class Record:
    """A dataclass / NamedTuple / attrs class of the module: its fields in constructor order, the
    defaults written in its body, and the calls of its constructor in the module."""

    name: str
    fields: list[str]
    defaults: dict[str, ast.AST] = field(default_factory=dict)
    calls: list[tuple[ast.Call, "FunctionInfo | None"]] = field(default_factory=list)


@dataclass
class ModuleInfo:
    functions: dict[str, FunctionInfo] = field(default_factory=dict)
    constants: dict[str, ast.AST] = field(default_factory=dict)
    imported: set[str] = field(default_factory=set)
    # callee qual -> [(call node, caller function or None)]
    calls: dict[str, list[tuple[ast.Call, FunctionInfo | None]]] = field(default_factory=dict)
    # attribute name -> [(value, function it is assigned in, line)]: `obj.attr = value` on objects other
    # than self/cls, and `Cls(attr=value)` for the dataclasses / NamedTuples / classes of this module
    attrs: dict[str, list[tuple[ast.AST, FunctionInfo | None, int]]] = field(default_factory=dict)
    records: dict[str, Record] = field(default_factory=dict)  # module-level record classes by name
    # module-level names that may change after import: declared ``global`` in a function, or mutated
    # in place (``X.append(v)``, ``X[k] = v``) where no local or parameter of that name shadows them
    rebound: set[str] = field(default_factory=set)
    # module-level names mutated in place at module level (``X = []`` then ``X.append(v)`` at import)
    filled: set[str] = field(default_factory=set)
