"""``python -m jitguard.static.provenance docs/provenance.md``: rewrite the table of inference rules
that docs/provenance.md carries between its markers from the registry (provenance/rules.py)."""
import sys

from jitguard.static.provenance.rules import render_into


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m jitguard.static.provenance docs/provenance.md", file=sys.stderr)
        return 2
    with open(argv[0], encoding="utf-8") as fh:
        text = fh.read()
    new = render_into(text)
    if new != text:
        with open(argv[0], "w", encoding="utf-8") as fh:
            fh.write(new)
    return 0


sys.exit(main(sys.argv[1:]))
