"""The syntax helpers the classifier reads every function through: ``walk`` (ast.walk's nodes and
order, less contexts and operators), ``statements``, ``own_returns`` and the Classifier's per-node
memo of them."""
import ast
import pathlib

from jitguard.static.provenance import Classifier
from jitguard.static.provenance.bindings import ModuleInfo
from jitguard.static.provenance.syntax import node_fields, own_returns, per_node, statements, walk

ROOT = pathlib.Path(__file__).resolve().parent.parent
_LEAVES = (ast.expr_context, ast.operator, ast.boolop, ast.cmpop, ast.unaryop)

_RETURNS = '''
def f(x, flag):
    if flag:
        return 1
    elif x:
        for i in x:
            return i
        else:
            return 2
    try:
        return 3
    except ValueError:
        return 4
    else:
        return 5
    finally:
        pass
    match x:
        case [a]:
            return a
    with open(x) as fh:
        return fh
    def inner():
        return 99
    class C:
        def m(self):
            return 98
    while x:
        return 6
'''


def _sources() -> list[pathlib.Path]:
    return sorted((ROOT / "jitguard").rglob("*.py")) + sorted((ROOT / "fixtures").rglob("*.py"))


def test_walk_is_ast_walk_less_contexts_and_operators():
    checked = 0
    for path in _sources():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef)))]:
            expected = [n for n in ast.walk(node) if not isinstance(n, _LEAVES)]
            got = walk(node)
            assert len(got) == len(expected) and all(a is b for a, b in zip(got, expected)), path
            checked += 1
    assert checked > 500


def test_statements_are_the_statements_ast_walk_finds():
    checked = 0
    for path in _sources():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef)))]:
            expected = {id(n) for n in ast.walk(node) if isinstance(n, ast.stmt) and n is not node}
            got = statements(node)
            assert len(got) == len(expected) and {id(n) for n in got} == expected, path
            checked += 1
    tree = ast.parse(_RETURNS)  # try / except / else / finally, match cases, loops' else
    assert {id(n) for n in statements(tree)} == {id(n) for n in ast.walk(tree) if isinstance(n, ast.stmt)}
    assert checked > 500


def test_node_fields_leave_out_only_fields_without_nodes():
    tree = ast.parse(_RETURNS + "\nx = [a + b for a, b in y if a < b]\nf(*a, k=1, **kw)\nimport m as n\n")
    for node in ast.walk(tree):
        kept = set(node_fields(node.__class__))
        for name, value in ast.iter_fields(node):
            values = value if isinstance(value, list) else [value]
            if any(isinstance(v, ast.AST) and not isinstance(v, _LEAVES) for v in values):
                assert name in kept, (type(node).__name__, name)


def test_own_returns_finds_every_return_of_the_body_and_none_of_nested_scopes():
    fn = ast.parse(_RETURNS).body[0]
    values = sorted((str(r.value.value) if isinstance(r.value, ast.Constant) else r.value.id
                     for r in own_returns(fn)))
    assert values == sorted(["1", "i", "2", "3", "4", "5", "a", "fh", "6"])


def test_classifier_memo_is_per_node_and_follows_a_new_node():
    c = Classifier(ModuleInfo(), lambda node: "", frozenset(), frozenset())
    fn = ast.parse(_RETURNS).body[0]
    assert c.own_returns(fn) is c.own_returns(fn)
    assert c.walk(fn) is c.walk(fn)
    assert [type(n) for n in c.walk_of(fn, ast.Return)] == [ast.Return] * 11
    other = ast.parse("def g():\n    return z\n").body[0]
    assert c.names_in(other) == {"z"} and len(c.own_returns(other)) == 1
    assert c.names_in(fn.body[0].test) == {"flag"}


def test_per_node_makes_once_per_node_and_again_for_a_node_under_a_reused_id():
    a, b = ast.Name(id="a"), ast.Name(id="b")
    made = []

    def make(node):
        made.append(node)
        return node.id

    memo = {}
    assert per_node(memo, a, make) == "a" and per_node(memo, a, make) == "a" and made == [a]
    memo[id(b)] = (a, "a")  # b under an id that a node gone since held
    assert per_node(memo, b, make) == "b" and made == [a, b]
