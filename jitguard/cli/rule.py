"""``jitguard rule [CODE]``: a rule's documentation, or the table of all rules."""
from __future__ import annotations

import json

import click


def _registry():
    from jitguard.static.rules import RULES

    return RULES


@click.command("rule", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("code", required=False)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="json: the same text split into fields.")
def rule(code: str | None, fmt: str) -> None:
    """Explain rule CODE (e.g. JG001): what it catches, why it is costly, an example, the fix and
    its safety. Without CODE, list every rule."""
    rules = _registry()
    if code is None:
        if fmt == "json":
            click.echo(json.dumps([_as_dict(r) for r in rules.values()], indent=2))
            return
        name_w = max(len(r.name) for r in rules.values())
        click.echo(f"{'code':<6}  {'name':<{name_w}}  {'fix':<6}  summary")
        for c in sorted(rules):
            r = rules[c]
            click.echo(f"{r.code:<6}  {r.name:<{name_w}}  {r.fix_safety:<6}  {r.summary}")
        return
    key = code.strip().upper()
    if key not in rules:
        by_name = {r.name: r for r in rules.values()}
        if code.strip().lower() in by_name:
            key = by_name[code.strip().lower()].code
        else:
            click.echo(
                f"jitguard rule: error: unknown rule {code!r} (known: {', '.join(sorted(rules))})",
                err=True,
            )
            raise click.exceptions.Exit(2)
    r = rules[key]
    if fmt == "json":
        click.echo(json.dumps(_as_dict(r), indent=2))
    else:
        click.echo(r.doc(), nl=False)


def _as_dict(r) -> dict:
    return {
        "code": r.code,
        "name": r.name,
        "summary": r.summary,
        "what": r.what,
        "why": r.why,
        "example": r.example,
        "fix": r.fix,
        "fix_safety": r.fix_safety,
    }
