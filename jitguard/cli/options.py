"""The options ``jitguard scan`` and ``jitguard fix`` share, declared once, and the one way they
become a ``Config``: the fixer sees the tree exactly as the scan does."""
from __future__ import annotations

import os
from typing import Callable

import click

from jitguard.config import Config, ConfigError, load_config


def split_codes(values: tuple[str, ...]) -> list[str]:
    """``--select JG001,JG002 --select JG003`` -> [JG001, JG002, JG003] (upper-cased)."""
    return [x.strip().upper() for v in values for x in v.split(",") if x.strip()]


def split_names(values: tuple[str, ...]) -> list[str]:
    """``--varying-name a,b --varying-name c`` -> [a, b, c]."""
    return [x.strip() for v in values for x in v.split(",") if x.strip()]


_SHARED = (
    click.option("--select", multiple=True, metavar="CODES",
                 help="Only these codes or prefixes (comma-separated; repeatable; replaces the config's)."),
    click.option("--extend-select", multiple=True, metavar="CODES",
                 help="Add codes or prefixes to the selection."),
    click.option("--ignore", multiple=True, metavar="CODES",
                 help="Drop these codes or prefixes (adds to the config's). The more specific of "
                 "select/ignore wins: --select JG001 --ignore JG00 keeps JG001."),
    click.option("--exclude", multiple=True, metavar="PATTERN",
                 help=".gitignore-style pattern of paths to skip (repeatable; adds to the config's)."),
    click.option("--config", "config_file", type=click.Path(dir_okay=False, path_type=str),
                 help="Read settings from FILE (a pyproject.toml with [tool.jitguard], or a TOML "
                 "file with the keys at top level) instead of the nearest pyproject.toml."),
    click.option("--isolated", is_flag=True, help="Ignore every configuration file."),
    click.option("--confidence", type=click.Choice(["low", "medium", "high"]), default=None,
                 help="Least sure findings to act on: medium (the default) takes high and medium, "
                 "low adds findings resting on a name alone. [tool.jitguard] confidence sets it too."),
    click.option("--varying-name", "varying_names", multiple=True, metavar="NAMES",
                 help="Extra variable names that mean 'changes every call' (comma-separated)."),
    click.option("--stable-name", "stable_names", multiple=True, metavar="NAMES",
                 help="Extra variable names that mean 'fixed for the process' (comma-separated)."),
    click.option("--respect-gitignore/--no-respect-gitignore", default=None,
                 help="Skip files that .gitignore excludes (default: on, or the config's value)."),
    click.option("-j", "--jobs", type=click.IntRange(min=1), default=None,
                 help="Worker processes (default: the number of CPUs)."),
    click.option("--no-cache", is_flag=True, help="Don't read or write the on-disk cache."),
    click.option("--cache-dir", type=click.Path(file_okay=False, path_type=str), default=None,
                 envvar="JITGUARD_CACHE_DIR", show_envvar=True,
                 help="Cache directory (default: $XDG_CACHE_HOME/jitguard or ~/.cache/jitguard)."),
)


def scan_options(f: Callable) -> Callable:
    """Decorate a command with the options that say what to scan and how (see ``config_from``)."""
    for option in reversed(_SHARED):
        f = option(f)
    return f


def config_from(start: str, *, config_file: str | None, isolated: bool, select: tuple[str, ...],
                extend_select: tuple[str, ...], ignore: tuple[str, ...], exclude: tuple[str, ...],
                varying_names: tuple[str, ...], stable_names: tuple[str, ...],
                respect_gitignore: bool | None, confidence: str | None = None) -> Config:
    """The configuration for these options, the config file searched from ``start``; raises
    ConfigError."""
    if isolated and config_file:
        raise ConfigError("--isolated and --config exclude each other")
    config = Config(root=os.getcwd()) if isolated else load_config(config_file, start=start)
    return config.with_cli(
        select=split_codes(select) or None,
        extend_select=split_codes(extend_select),
        ignore=split_codes(ignore),
        exclude=split_names(exclude),
        varying_names=split_names(varying_names),
        stable_names=split_names(stable_names),
        respect_gitignore=respect_gitignore,
        confidence=confidence,
    )
