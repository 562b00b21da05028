"""Pure LibCST edits of Triton kernel decorators: add or remove ``do_not_specialize`` entries and
drop a ``tl.constexpr`` annotation, changing nothing else in the file.

``apply_edits(source, edits)`` takes a file's bytes (or text) and a list of ``KernelEdit`` and returns
the edited bytes plus, for each edit, what was done and what was refused and why. Everything that is
not the edited list, keyword or annotation round-trips byte for byte (comments, quotes, trailing
commas, line endings, encoding, BOM: LibCST keeps them).

Each kernel is located by the position the scan recorded for it (its ``def`` line and the line of
its jit decorator or ``k = triton.jit(f)`` statement): the scan resolved ``triton.jit`` through
imports and aliases, so the codemod edits exactly the kernel a finding names. Forms handled:

* ``@triton.jit`` (bare) -> ``@triton.jit(do_not_specialize=["n"])``
* ``@triton.jit(...)`` gains the keyword, or its literal list/tuple is extended in place (no
  duplicates, entries given as indices count, the list's quote style and trailing comma kept)
* ``k = triton.jit(fn)`` and ``k = triton.jit(...)(fn)``
* the jit decorator anywhere in a stack (``@triton.autotune``, ``@triton.heuristics``, wrappers)
* a ``do_not_specialize`` that is not a literal (a variable, ``**opts``, a comprehension) is never
  edited: the edit is refused with the reason, for a human to do.
"""
from __future__ import annotations

import unicodedata

from dataclasses import dataclass, field
from typing import Iterable, Sequence, Union

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider, QualifiedNameProvider

__all__ = [
    "DNS",
    "DNS_ALIGN",
    "CodemodResult",
    "EditOutcome",
    "KernelEdit",
    "KernelLocation",
    "KernelLocator",
    "apply_edits",
]

DNS = "do_not_specialize"
DNS_ALIGN = "do_not_specialize_on_alignment"
CONSTEXPR_NAMES = frozenset({"triton.language.constexpr", "triton.language.core.constexpr"})

Entry = Union[str, int]


# ----------------------------------------------------------------------------------------------
# What to do, and what happened
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KernelEdit:
    """The edits of one kernel, located by position as the scan found it: ``line`` is the line of its
    ``def``; ``jit_line`` the line of its jit decorator, or of the ``k = triton.jit(f)`` statement;
    ``function`` (optional) the def's name, which must match."""

    line: int
    jit_line: int | None = None
    function: str | None = None
    add: tuple[str, ...] = ()  # parameter names to add to do_not_specialize
    remove: tuple[Entry, ...] = ()  # entries (as written: name or index) to remove from it
    remove_on_alignment: tuple[Entry, ...] = ()  # ... from do_not_specialize_on_alignment
    drop_constexpr: tuple[str, ...] = ()  # parameters whose ``tl.constexpr`` annotation goes


@dataclass
class EditOutcome:
    edit: KernelEdit
    applied: list[str] = field(default_factory=list)  # human-readable, one per change made
    already: list[str] = field(default_factory=list)  # requested but already so (idempotence)
    refused: list[tuple[str, str]] = field(default_factory=list)  # (what, why not)
    location: "KernelLocation | None" = None


@dataclass
class CodemodResult:
    code: bytes
    outcomes: list[EditOutcome]

    @property
    def changed(self) -> bool:
        return any(o.applied for o in self.outcomes)


# ----------------------------------------------------------------------------------------------
# Locating kernels: by the position the scan recorded (the scan resolved triton.jit through
# imports and aliases; the codemod does not discover kernels again)
# ----------------------------------------------------------------------------------------------


@dataclass
class KernelLocation:
    """The nodes an edit of one kernel touches (original tree nodes)."""

    funcdef: cst.FunctionDef
    decorator: cst.Decorator | None  # the jit decorator (decorator form)
    call: cst.Call | None  # the ``triton.jit(...)`` call that takes keywords (None: bare decorator)

    @property
    def params(self) -> list[str]:
        p = self.funcdef.params
        return [python_name(x.name.value) for x in (*p.posonly_params, *p.params, *p.kwonly_params)]


def python_name(raw: str) -> str:
    """An identifier as Python reads it (NFKC: a fullwidth ``ｎ`` is ``n``). LibCST keeps the raw
    spelling; the scan (``ast``) and Triton (``inspect.signature``) see the normalized one, and
    ``do_not_specialize`` strings are compared with it."""
    return raw if raw.isascii() else unicodedata.normalize("NFKC", raw)


def _qualnames(meta, node) -> set[str]:
    try:
        names = meta[node]
    except KeyError:
        return set()
    if callable(names):  # libcst >= 1.6 resolves lazily
        names = names()
    return {q.name for q in names}


class _ByLine(cst.CSTVisitor):
    """Function definitions by the line of their ``def``, assignments by their first line."""

    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self) -> None:
        super().__init__()
        self.defs: dict[int, cst.FunctionDef] = {}
        self.assigns: dict[int, cst.Assign] = {}

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.defs[self.get_metadata(PositionProvider, node.name).start.line] = node

    def visit_Assign(self, node: cst.Assign) -> None:
        self.assigns.setdefault(self.get_metadata(PositionProvider, node).start.line, node)


def _jit_call_wrapping(value: cst.BaseExpression, name: str) -> cst.Call | None:
    """In ``[wrap(...)(]triton.jit[(kw)](name[, kw])...``: the call carrying the jit keywords (the
    innermost call of the function ``name``, or the call it is applied to)."""
    expr = value
    for _ in range(8):
        if not isinstance(expr, cst.Call):
            return None
        positional = [a for a in expr.args if a.keyword is None and a.star == ""]
        if positional and isinstance(positional[0].value, cst.Name) and python_name(positional[0].value.value) == python_name(name):
            return expr.func if isinstance(expr.func, cst.Call) else expr
        if len(positional) != 1:
            return None
        expr = positional[0].value
    return None


class KernelLocator:
    """Finds kernels in one module by the position the scan recorded (``find``)."""

    def __init__(self, wrapper: MetadataWrapper):
        self.pos = wrapper.resolve(PositionProvider)
        index = _ByLine()
        wrapper.visit(index)
        self.index = index

    def line(self, node: cst.CSTNode) -> int:
        return self.pos[node].start.line

    def find(self, edit: KernelEdit) -> tuple[KernelLocation | None, str | None]:
        """The kernel whose def is at ``edit.line`` (and whose jit decorator or statement is at
        ``edit.jit_line``), or ``(None, reason)``."""
        fn = self.index.defs.get(edit.line)
        if fn is None:
            return None, f"no function is defined at line {edit.line}"
        if edit.function is not None and python_name(fn.name.value) != python_name(edit.function):
            return None, f"line {edit.line} defines {fn.name.value!r}, not {edit.function!r}"
        decorators = {self.line(d): d for d in fn.decorators}
        jit_line = edit.jit_line
        if jit_line is None and len(fn.decorators) == 1:
            jit_line = self.line(fn.decorators[0])
        dec = decorators.get(jit_line) if jit_line is not None else None
        if dec is not None:
            expr = dec.decorator
            if isinstance(expr, cst.Call):
                return KernelLocation(fn, dec, expr), None
            if isinstance(expr, (cst.Name, cst.Attribute)):
                return KernelLocation(fn, dec, None), None
            return None, f"the decorator at line {jit_line} is not a jit decorator"
        stmt = self.index.assigns.get(jit_line) if jit_line is not None else None
        if stmt is not None:
            call = _jit_call_wrapping(stmt.value, fn.name.value)
            if call is not None:
                return KernelLocation(fn, None, call), None
        where = f"line {jit_line}" if jit_line is not None else "its decorators"
        return None, f"no jit decorator or triton.jit({fn.name.value}) at {where} for the def at line {edit.line}"


# ----------------------------------------------------------------------------------------------
# Literal lists
# ----------------------------------------------------------------------------------------------

_SEQ = (cst.List, cst.Tuple, cst.Set)


def _entry_value(node: cst.BaseExpression) -> Entry | None:
    """The Python value of one list entry if it is a plain string or integer literal."""
    if isinstance(node, cst.SimpleString):
        prefix = node.prefix.lower()
        if "b" in prefix or "f" in prefix:
            return None
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    if isinstance(node, cst.Integer):
        return int(node.evaluated_value)
    if (
        isinstance(node, cst.UnaryOperation)
        and isinstance(node.operator, cst.Minus)
        and isinstance(node.expression, cst.Integer)
    ):
        return -int(node.expression.evaluated_value)
    return None


def literal_entries(value: cst.BaseExpression) -> list[Entry] | None:
    """Entries of a literal list/tuple/set of names and indices, or None if it is not one."""
    if not isinstance(value, _SEQ):
        return None
    out: list[Entry] = []
    for el in value.elements:
        if not isinstance(el, cst.Element):
            return None  # *starred
        v = _entry_value(el.value)
        if v is None:
            return None
        out.append(v)
    return out


def _quote_of(value: cst.BaseExpression) -> str:
    if isinstance(value, _SEQ):
        for el in value.elements:
            if isinstance(el.value, cst.SimpleString):
                return el.value.quote[0] if el.value.quote else '"'
    return '"'


def _string(name: str, quote: str) -> cst.SimpleString:
    if quote not in name and "\\" not in name:
        return cst.SimpleString(f"{quote}{name}{quote}")
    return cst.SimpleString(repr(name))


# ---- a sequence (list elements or call arguments) in one normalized shape --------------------


@dataclass
class _Seq:
    """Items without their commas; ``seps[i]`` is the comma after item i (i < n-1); ``trailing`` the
    last item's comma (None if none); ``close`` the whitespace before the closing bracket; ``open``
    the whitespace after the opening one."""

    items: list
    seps: list
    trailing: cst.Comma | None
    close: cst.BaseParenthesizableWhitespace
    open: cst.BaseParenthesizableWhitespace


_NO_WS = cst.SimpleWhitespace("")


def _strip_lines(ws):
    if isinstance(ws, cst.ParenthesizedWhitespace):
        return ws.with_changes(first_line=cst.TrailingWhitespace(), empty_lines=[])
    return ws


def _seq_append(seq: _Seq, new_items: list) -> None:
    if not new_items:
        return
    n = len(seq.items)
    if n == 0:
        seq.items = list(new_items)
        seq.seps = [cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")) for _ in new_items[1:]]
        return
    close = seq.close
    if isinstance(close, cst.ParenthesizedWhitespace):  # one item per line
        if isinstance(seq.open, cst.ParenthesizedWhitespace):
            indent = seq.open.last_line
        elif seq.seps and isinstance(seq.seps[-1].whitespace_after, cst.ParenthesizedWhitespace):
            indent = seq.seps[-1].whitespace_after.last_line
        else:
            indent = cst.SimpleWhitespace(close.last_line.value + "    ")
        line_ws = cst.ParenthesizedWhitespace(
            first_line=cst.TrailingWhitespace(), empty_lines=[], indent=True, last_line=indent
        )
        # The comment after the old last item stays on its line.
        first_ws = line_ws.with_changes(first_line=close.first_line, empty_lines=close.empty_lines)
        seq.close = close.with_changes(first_line=cst.TrailingWhitespace(), empty_lines=[])
    else:
        model = seq.seps[-1].whitespace_after if seq.seps else None
        line_ws = _strip_lines(model) if model is not None else cst.SimpleWhitespace(" ")
        first_ws = line_ws
    before = seq.trailing.whitespace_before if seq.trailing is not None else _NO_WS
    seq.seps.append(cst.Comma(whitespace_before=before, whitespace_after=first_ws))
    seq.seps.extend(cst.Comma(whitespace_after=line_ws) for _ in new_items[1:])
    seq.items.extend(new_items)


def _seq_remove(seq: _Seq, drop: set[int]) -> None:
    keep = [i for i in range(len(seq.items)) if i not in drop]
    if not keep:
        seq.items, seq.seps = [], []
        return
    last_kept = keep[-1]
    old_last = len(seq.items) - 1
    if last_kept != old_last:
        sep = seq.seps[last_kept].whitespace_after
        if isinstance(seq.close, cst.ParenthesizedWhitespace) and isinstance(
            sep, cst.ParenthesizedWhitespace
        ):  # the kept item's own comment moves to the closing line with it
            seq.close = seq.close.with_changes(first_line=sep.first_line, empty_lines=sep.empty_lines)
    seq.seps = [seq.seps[i] for i in keep[:-1]]
    seq.items = [seq.items[i] for i in keep]


def _list_to_seq(node) -> _Seq:
    els = list(node.elements)
    if isinstance(node, cst.List):
        open_ws, close = node.lbracket.whitespace_after, node.rbracket.whitespace_before
    elif isinstance(node, cst.Set):
        open_ws, close = node.lbrace.whitespace_after, node.rbrace.whitespace_before
    else:  # Tuple: its own parentheses
        open_ws = node.lpar[0].whitespace_after if node.lpar else _NO_WS
        close = node.rpar[-1].whitespace_before if node.rpar else _NO_WS
    trailing = None
    if els and isinstance(els[-1].comma, cst.Comma):
        trailing = els[-1].comma
    return _Seq(
        items=[e.with_changes(comma=cst.MaybeSentinel.DEFAULT) for e in els],
        seps=[e.comma for e in els[:-1]],
        trailing=trailing,
        close=close,
        open=open_ws,
    )


def _seq_to_list(node, seq: _Seq):
    els = []
    for i, item in enumerate(seq.items):
        if i < len(seq.items) - 1:
            els.append(item.with_changes(comma=seq.seps[i]))
        else:
            comma = seq.trailing if seq.trailing is not None else cst.MaybeSentinel.DEFAULT
            if isinstance(node, cst.Tuple) and len(seq.items) == 1 and comma is cst.MaybeSentinel.DEFAULT:
                comma = cst.Comma()  # ("a",): a one-tuple needs its comma
            els.append(item.with_changes(comma=comma))
    if isinstance(node, cst.List):
        return node.with_changes(
            elements=els, rbracket=node.rbracket.with_changes(whitespace_before=seq.close)
        )
    if isinstance(node, cst.Set):
        return node.with_changes(
            elements=els, rbrace=node.rbrace.with_changes(whitespace_before=seq.close)
        )
    rpar = list(node.lpar and node.rpar)
    if rpar:
        rpar[-1] = rpar[-1].with_changes(whitespace_before=seq.close)
    return node.with_changes(elements=els, rpar=rpar)


def _args_to_seq(call: cst.Call) -> _Seq:
    args = list(call.args)
    trailing, close = None, _NO_WS
    if args:
        last = args[-1]
        if isinstance(last.comma, cst.Comma):
            trailing = last.comma.with_changes(whitespace_after=_NO_WS)
            close = last.comma.whitespace_after
        else:
            close = last.whitespace_after_arg
        args[-1] = last.with_changes(whitespace_after_arg=_NO_WS) if trailing is None else last
    return _Seq(
        items=[a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in args],
        seps=[a.comma for a in args[:-1]],
        trailing=trailing,
        close=close,
        open=call.whitespace_before_args,
    )


def _seq_to_args(call: cst.Call, seq: _Seq) -> cst.Call:
    args = []
    n = len(seq.items)
    for i, item in enumerate(seq.items):
        if i < n - 1:
            args.append(item.with_changes(comma=seq.seps[i]))
        elif seq.trailing is not None:
            args.append(
                item.with_changes(
                    comma=seq.trailing.with_changes(whitespace_after=seq.close),
                    whitespace_after_arg=_NO_WS,
                )
            )
        else:
            args.append(item.with_changes(comma=cst.MaybeSentinel.DEFAULT, whitespace_after_arg=seq.close))
    if not args:
        return call.with_changes(args=[], whitespace_before_args=_NO_WS)
    return call.with_changes(args=args)


# ----------------------------------------------------------------------------------------------
# Edits of one kernel
# ----------------------------------------------------------------------------------------------


def _describe_expr(node: cst.CSTNode) -> str:
    text = cst.Module([]).code_for_node(node).strip()
    text = " ".join(text.split())
    return text if len(text) <= 60 else text[:57] + "..."


def _keyword_arg(call: cst.Call | None, name: str) -> cst.Arg | None:
    if call is None:
        return None
    for a in call.args:
        if a.keyword is not None and python_name(a.keyword.value) == name:
            return a
    return None


def _has_star_kwargs(call: cst.Call | None) -> cst.Arg | None:
    if call is None:
        return None
    for a in call.args:
        if a.star == "**":
            return a
    return None


def _entry_param(entry: Entry, params: list[str] | None) -> str | None:
    """The parameter an entry names (an index is resolved against the params)."""
    if isinstance(entry, str):
        return entry
    if params is not None and 0 <= entry < len(params):
        return params[entry]
    return None


def _fmt_entry(entry: Entry) -> str:
    return repr(entry) if isinstance(entry, str) else str(entry)


class _KernelEditor:
    """Computes the replacement for one kernel's jit node (and its params) from the original nodes."""

    def __init__(self, loc: KernelLocation, meta):
        self.loc = loc
        self.meta = meta
        self.params = loc.params
        self.call = loc.call  # working copy, replaced as edits apply
        self.param_repl: dict[cst.Param, cst.Param] = {}

    # -- one keyword's list -----------------------------------------------------------------
    def _edit_list(self, keyword: str, add: Sequence[str], remove: Sequence[Entry], out: EditOutcome):
        arg = _keyword_arg(self.call, keyword)
        star = _has_star_kwargs(self.call)
        if arg is None and star is not None and (add or remove):
            why = f"jit options come through {_describe_expr(star)}: {keyword} may be set there"
            for x in (*add, *remove):
                out.refused.append((f"{keyword} {_fmt_entry(x)}", why + "; edit it by hand"))
            return
        entries = literal_entries(arg.value) if arg is not None else []
        if entries is None:
            why = f"{keyword} is not a literal list ({_describe_expr(arg.value)}); edit it by hand"
            for x in (*add, *remove):
                out.refused.append((f"{keyword} {_fmt_entry(x)}", why))
            return

        # removals first: entries as written, matched by value
        drop: set[int] = set()
        for want in remove:
            hits = [i for i, e in enumerate(entries) if e == want and type(e) is type(want)]
            if not hits:
                out.already.append(f"{keyword} has no entry {_fmt_entry(want)}")
                continue
            drop.update(hits)
            out.applied.append(f"removed {_fmt_entry(want)} from {keyword}")

        covered = {_entry_param(e, self.params) for i, e in enumerate(entries) if i not in drop}
        constexpr = self._constexpr_params() if add else set()
        to_add: list[str] = []
        for name in add:
            if name not in self.params:
                out.refused.append((f"{keyword} {name!r}", f"kernel has no parameter named {name!r}"))
                continue
            if name in constexpr:  # listing a constexpr: ignored up to Triton 3.5, an error from 3.6
                out.refused.append((f"{keyword} {name!r}", f"{name!r} is a tl.constexpr parameter"))
                continue
            if name in covered or name in to_add:
                out.already.append(f"{name!r} already in {keyword}")
                continue
            to_add.append(name)
            out.applied.append(f"added {name!r} to {keyword}")
        if not drop and not to_add:
            return

        if arg is None:  # the keyword is new
            empty = cst.List([])
            seq = _list_to_seq(empty)
            _seq_append(seq, [cst.Element(_string(n, '"')) for n in to_add])
            self._add_keyword(keyword, _seq_to_list(empty, seq))
            return
        seq = _list_to_seq(arg.value)
        _seq_remove(seq, drop)
        if (
            isinstance(arg.value, cst.Tuple)
            and len(seq.items) == 1
            and to_add
            and not isinstance(seq.close, cst.ParenthesizedWhitespace)
        ):
            seq.trailing = None  # ("a",) -> ("a", "b"): that comma only made it a tuple
        quote = _quote_of(arg.value)
        _seq_append(seq, [cst.Element(_string(n, quote)) for n in to_add])
        if not seq.items:
            self._remove_keyword(keyword)
            return
        self._replace_keyword_value(keyword, _seq_to_list(arg.value, seq))

    def _add_keyword(self, keyword: str, value: cst.BaseExpression) -> None:
        new_arg = cst.Arg(
            value=value,
            keyword=cst.Name(keyword),
            equal=cst.AssignEqual(whitespace_before=_NO_WS, whitespace_after=_NO_WS),
        )
        if self.call is None:  # bare decorator: @triton.jit -> @triton.jit(do_not_specialize=[...])
            self.call = cst.Call(func=self.loc.decorator.decorator, args=[new_arg])
            return
        seq = _args_to_seq(self.call)
        _seq_append(seq, [new_arg])
        self.call = _seq_to_args(self.call, seq)

    def _replace_keyword_value(self, keyword: str, value) -> None:
        args = [
            a.with_changes(value=value) if a.keyword is not None and python_name(a.keyword.value) == keyword else a
            for a in self.call.args
        ]
        self.call = self.call.with_changes(args=args)

    def _remove_keyword(self, keyword: str) -> None:
        seq = _args_to_seq(self.call)
        drop = {
            i for i, a in enumerate(seq.items) if a.keyword is not None and python_name(a.keyword.value) == keyword
        }
        _seq_remove(seq, drop)
        self.call = _seq_to_args(self.call, seq)

    # -- constexpr annotation ------------------------------------------------------------------
    def _drop_constexpr(self, names: Sequence[str], out: EditOutcome) -> None:
        fd = self.loc.funcdef
        by_name = {python_name(p.name.value): p for p in (*fd.params.posonly_params, *fd.params.params, *fd.params.kwonly_params)}
        for n in names:
            p = by_name.get(n)
            if p is None:
                out.refused.append((f"tl.constexpr on {n!r}", f"kernel has no parameter named {n!r}"))
                continue
            if p.annotation is None or not self._is_constexpr(p.annotation.annotation):
                out.already.append(f"{n!r} is not annotated tl.constexpr")
                continue
            changes: dict = {"annotation": None}
            if isinstance(p.equal, cst.AssignEqual):  # `n: tl.constexpr = 4` -> `n=4` (PEP 8)
                changes["equal"] = cst.AssignEqual(whitespace_before=_NO_WS, whitespace_after=_NO_WS)
            self.param_repl[p] = p.with_changes(**changes)
            out.applied.append(f"removed tl.constexpr from {n!r}")

    def _is_constexpr(self, ann: cst.BaseExpression) -> bool:
        """``tl.constexpr``, ``triton.language.constexpr``, a re-export (``from pkg.triton_utils
        import tl``), a bare imported ``constexpr`` or the string ``"tl.constexpr"``."""
        if isinstance(ann, cst.SimpleString):
            text = ann.evaluated_value
            return isinstance(text, str) and text.strip().split(".")[-1] == "constexpr"
        if _qualnames(self.meta, ann) & CONSTEXPR_NAMES:
            return True
        if isinstance(ann, cst.Attribute):
            return ann.attr.value == "constexpr"
        return isinstance(ann, cst.Name) and ann.value == "constexpr"

    def _constexpr_params(self) -> set[str]:
        fd = self.loc.funcdef
        ps = (*fd.params.posonly_params, *fd.params.params, *fd.params.kwonly_params)
        return {
            python_name(p.name.value)
            for p in ps
            if p.annotation is not None and self._is_constexpr(p.annotation.annotation)
            and p not in self.param_repl
        }

    def run(self, edit: KernelEdit, out: EditOutcome) -> None:
        self._drop_constexpr(edit.drop_constexpr, out)
        add = list(edit.add)
        self._edit_list(DNS, add, edit.remove, out)
        self._edit_list(DNS_ALIGN, [], edit.remove_on_alignment, out)

    def replacements(self) -> dict[cst.CSTNode, cst.CSTNode]:
        repl: dict[cst.CSTNode, cst.CSTNode] = dict(self.param_repl)
        loc = self.loc
        if self.call is loc.call:
            return repl
        if loc.decorator is not None:
            new = self.call
            if not new.args and loc.call is not None and loc.call.args:
                # every keyword removed: `@triton.jit(do_not_specialize=["x"])` -> `@triton.jit`
                repl[loc.decorator] = loc.decorator.with_changes(decorator=loc.call.func)
            else:
                repl[loc.decorator] = loc.decorator.with_changes(decorator=new)
        else:
            repl[loc.call] = self.call
        return repl


class _Replacer(cst.CSTTransformer):
    def __init__(self, repl: dict[cst.CSTNode, cst.CSTNode]):
        super().__init__()
        self.repl = repl

    def on_leave(self, original_node, updated_node):
        new = self.repl.get(original_node)
        if new is not None:
            return new
        return updated_node


def apply_edits(source: bytes | str, edits: Iterable[KernelEdit]) -> CodemodResult:
    """Apply ``edits`` to a module's source; raises ``libcst.ParserSyntaxError`` if it doesn't parse.

    Returns bytes in the source's own encoding (a ``str`` source is returned UTF-8 encoded).
    """
    module = cst.parse_module(source)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    meta = wrapper.resolve(QualifiedNameProvider)
    locator = KernelLocator(wrapper)
    editors: dict[tuple[int, int, int], _KernelEditor] = {}
    outcomes: list[EditOutcome] = []
    for edit in edits:
        out = EditOutcome(edit)
        outcomes.append(out)
        loc, why = locator.find(edit)
        if loc is None:
            for x in (*edit.add, *edit.remove, *edit.remove_on_alignment, *edit.drop_constexpr):
                out.refused.append((_fmt_entry(x), why))
            continue
        out.location = loc
        editor = editors.setdefault((id(loc.funcdef), id(loc.decorator), id(loc.call)), _KernelEditor(loc, meta))
        editor.run(edit, out)
    repl: dict = {}
    for editor in editors.values():
        repl.update(editor.replacements())
    if not repl:
        return CodemodResult(code=module.bytes, outcomes=outcomes)
    new_module = module.visit(_Replacer(repl))
    return CodemodResult(code=new_module.bytes, outcomes=outcomes)
