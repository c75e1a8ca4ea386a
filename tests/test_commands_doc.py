"""docs/commands.md is what docs/gen_commands.py writes from the argument parser (dlperf_slurm/cli.py) and the
hand-written notes (docs/commands-notes.md): a help string or note changed without regenerating fails here, in one
line naming the command to run. Every command and sub-command cli.py defines has its section."""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import pytest

from dlperf_slurm.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "commands.md"


def _gen():
    spec = importlib.util.spec_from_file_location("gen_commands", ROOT / "docs" / "gen_commands.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


gen = _gen()


def _command_names() -> list[str]:
    """Every subcommand and sub-subcommand (site init), walked here independently of the generator."""
    names: list[str] = []

    def walk(prefix: list[str], p: argparse.ArgumentParser) -> None:
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for name, sub in a.choices.items():
                    names.append(" ".join([*prefix, name]))
                    walk([*prefix, name], sub)

    walk([], build_parser())
    return names


def test_commands_md_is_up_to_date():
    current = DOC.read_text(encoding="utf-8") if DOC.exists() else None
    problem = gen.stale(current, gen.generate())
    if problem:
        pytest.fail(problem, pytrace=False)


def test_the_staleness_check_can_fail():
    """The same comparison, fed a changed text, a missing file and a changed help string, says so in one line."""
    expected = gen.generate()
    assert gen.stale(expected, expected) is None
    edited = expected.replace("## submit\n", "## submit\n\nhand-edited\n", 1)
    message = gen.stale(edited, expected)
    assert message and "\n" not in message and "python docs/gen_commands.py" in message
    assert "stale" in message
    assert "python docs/gen_commands.py" in (gen.stale(None, expected) or "")
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    plan = sub.choices["plan"]
    wide = next(a for a in plan._actions if "--wide" in a.option_strings)
    wide.help = "a help string changed in cli.py"
    assert gen.stale(expected, gen.generate(parser=parser)), "a changed help string went unnoticed"


def test_every_command_has_a_section():
    text = gen.generate()
    headings = {line[3:] for line in text.splitlines() if line.startswith("## ")}
    names = _command_names()
    assert "site init" in names  # the walk reaches the sub-subcommands
    missing = [n for n in names if n not in headings]
    assert not missing, f"commands without a section in docs/commands.md: {missing}"
    # and every argument of each, by its flags (or positional metavar)
    for n in names:
        section = text.split(f"\n## {n}\n", 1)[1].split("\n## ", 1)[0]
        p = build_parser()
        for word in n.split():
            p = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction)).choices[word]
        for a in p._actions:
            if a.help is argparse.SUPPRESS or isinstance(a, argparse._HelpAction):
                continue
            for flag in a.option_strings or [a.metavar or a.dest]:
                assert f"`{flag}" in section or f"[{flag}" in section, f"{n}: {flag} not in its section"


def test_help_is_expanded_as_argparse_does():
    """% forms come out as --help prints them: compare's '95 %% interval' is '95 % interval' in the doc."""
    text = gen.generate()
    assert "%%" not in text and "%(" not in text
    assert "95 % interval by Welch's t" in text


def test_a_note_for_no_command_is_refused():
    """A note whose heading names no command would vanish from the doc: it is an error, not dropped."""
    with pytest.raises(ValueError, match="names no command"):
        gen.generate(notes_text="## submitt\n\na typo\n")
    text = gen.generate(notes_text="intro, not copied\n\n## site init\n\nA NOTE\n")
    assert "intro, not copied" not in text
    assert "A NOTE" in text.split("\n## site init\n", 1)[1].split("\n## ", 1)[0]


def test_output_does_not_depend_on_the_terminal(monkeypatch):
    first = gen.generate()
    monkeypatch.setenv("COLUMNS", "40")
    assert gen.generate() == first
    assert str(ROOT) not in first
