"""Write docs/commands.md, the command reference, from the argument parser (dlperf_slurm/cli.py) and the
hand-written notes (docs/commands-notes.md, one ``## <command>`` section per command that has any).

    python docs/gen_commands.py            # regenerate docs/commands.md
    python docs/gen_commands.py --check    # exit 1, saying so in one line, when docs/commands.md is stale

tests/test_commands_doc.py fails when the file differs from what this script writes. The output depends on
nothing of this machine or terminal: the usage lines are wrapped here at a fixed width, help strings are expanded
by argparse's own formatter (``%(default)s``, ``%%``) and nothing else is formatted by it.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "commands.md"
NOTES = ROOT / "docs" / "commands-notes.md"
REGENERATE = "python docs/gen_commands.py"
ROOT_NAME = "dlperf-slurm"  # the notes' heading for the options before the command, and what holds for every one
USAGE_WIDTH = 100


def commands(parser: argparse.ArgumentParser) -> list[tuple[list[str], str, argparse.ArgumentParser]]:
    """(words, help, parser) of the top-level parser (words []) and of every subcommand and sub-subcommand
    (``site init``), in the order cli.py adds them."""
    out: list[tuple[list[str], str, argparse.ArgumentParser]] = []

    def walk(words: list[str], help_text: str, p: argparse.ArgumentParser) -> None:
        out.append((words, help_text, p))
        fmt = _formatter(p)
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                # the help a subcommand has in its parent's --help, expanded as argparse does there ("%%" -> "%")
                helps = {a.dest: _plain(fmt._expand_help(a)) for a in action._choices_actions if a.help}
                for name, sub in action.choices.items():
                    walk([*words, name], helps.get(name, ""), sub)

    walk([], _text(parser, parser.description), parser)
    return out


def _formatter(p: argparse.ArgumentParser) -> argparse.HelpFormatter:
    # a fixed, huge width: argparse never wraps; the usage is wrapped by _wrap_usage, the same on every terminal
    return argparse.HelpFormatter(prog=p.prog, width=1_000_000, max_help_position=1_000_000)


def _split_usage(line: str) -> list[str]:
    """The usage's words, a bracketed group ([--watch [SECONDS]], {auto,slurm,local}) one word."""
    words, word, depth = [], "", 0
    for ch in line:
        if ch in "[({":
            depth += 1
        elif ch in "])}":
            depth -= 1
        if ch == " " and depth == 0:
            if word:
                words.append(word)
            word = ""
        else:
            word += ch
    if word:
        words.append(word)
    merged: list[str] = []
    for w in words:  # "COMMAND ..." and "campaign ..." stay together
        if w == "..." and merged:
            merged[-1] += " ..."
        else:
            merged.append(w)
    return merged


def usage(p: argparse.ArgumentParser) -> str:
    """The parser's usage without "usage: ", wrapped at USAGE_WIDTH, continuation lines under the first argument."""
    fmt = _formatter(p)
    fmt.add_usage(p.usage, p._actions, p._mutually_exclusive_groups, prefix="")
    line = " ".join(fmt.format_help().split())
    words = _split_usage(line)
    head = len(p.prog.split())
    first, rest = " ".join(words[:head]), words[head:]
    indent = " " * (len(first) + 1)
    lines, cur = [], first
    for w in rest:
        if len(cur) + 1 + len(w) > USAGE_WIDTH and cur.strip():
            lines.append(cur)
            cur = indent + w
        else:
            cur += " " + w
    lines.append(cur)
    return "\n".join(x.rstrip() for x in lines)


def _plain(text: str) -> str:
    return " ".join(text.split())


def _md(text: str) -> str:
    """Help text as markdown that renders as written: outside `code` spans, ``\\``, ``*``, ``<`` and an ``_`` that
    could start or end emphasis (not one inside a word, batch_size) are escaped: summaries/<campaign>.json,
    '*resnet50*1x8*', <model>_b<bsz>_<prec>."""
    out = []
    for i, part in enumerate(re.split(r"(`[^`]*`)", text)):
        if i % 2:
            out.append(part)
            continue
        part = re.sub(r"([\\*<])", r"\\\1", part)
        out.append(re.sub(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])", r"\\_", part))
    return "".join(out)


def _text(p: argparse.ArgumentParser, text: str | None) -> str:
    """A description or epilog as argparse prints it (it expands only %(prog)s there), on one line."""
    if not text:
        return ""
    return _plain(text % {"prog": p.prog} if "%(prog)" in text else text)


def _argument(fmt: argparse.HelpFormatter, a: argparse.Action) -> str:
    """One list item: the flags with their metavar, the help as argparse expands it, the default."""
    if a.option_strings:
        args = fmt._format_args(a, fmt._get_default_metavar_for_optional(a)) if a.nargs != 0 else ""
        # the long flag first (cli.py writes "--jobs", "-j"; argparse keeps that order)
        name = ", ".join(f"`{s} {args}`" if args else f"`{s}`" for s in a.option_strings)
    else:
        name = f"`{fmt._format_args(a, fmt._get_default_metavar_for_positional(a))}`"
    parts = [name]
    help_text = _plain(fmt._expand_help(a)) if a.help else ""
    if isinstance(a, argparse._SubParsersAction) and not help_text:
        help_text = "one of " + ", ".join(f"`{c}`" for c in a.choices) + ", and its arguments"
    if help_text:
        parts.append("— " + _md(help_text))
    # the default, where the help does not already say it
    if a.default not in (None, False, argparse.SUPPRESS) and "default" not in help_text.lower():
        parts.append(f"(default: `{a.default}`)")
    return "- " + " ".join(parts)


def _anchor(title: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but - and _ dropped, spaces as -."""
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


def parse_notes(text: str, known: list[str]) -> dict[str, str]:
    """The notes' ``## <command>`` sections (``## site init``; ``## dlperf-slurm``: what holds for every command),
    each its text to the next such heading; the text above the first is the file's own and is not copied. A
    heading that names no command is a ValueError: its note would be lost."""
    notes: dict[str, list[str]] = {}
    cur: list[str] | None = None
    fence = False
    for line in text.splitlines():
        if line.startswith("```"):
            fence = not fence
        if not fence and line.startswith("## "):
            name = line[3:].strip().strip("`")
            if name not in known:
                raise ValueError(f"docs/commands-notes.md: '## {name}' names no command of dlperf_slurm/cli.py "
                                 f"(commands: {', '.join(known)})")
            if name in notes:
                raise ValueError(f"docs/commands-notes.md: '## {name}' twice")
            cur = notes[name] = []
        elif cur is not None:
            cur.append(line)
    return {k: "\n".join(v).strip() for k, v in notes.items()}


def generate(parser: argparse.ArgumentParser | None = None, notes_text: str | None = None) -> str:
    """The text of docs/commands.md: cli.py's parser (or ``parser``) and docs/commands-notes.md (or ``notes_text``)."""
    if parser is None:
        from dlperf_slurm.cli import build_parser

        parser = build_parser()
    if notes_text is None:
        notes_text = NOTES.read_text(encoding="utf-8") if NOTES.exists() else ""
    cmds = commands(parser)
    titles = [" ".join(words) or ROOT_NAME for words, _, _ in cmds]
    notes = parse_notes(notes_text, titles)
    out = [
        "# Commands",
        "",
        "<!-- Generated by docs/gen_commands.py from dlperf_slurm/cli.py and docs/commands-notes.md: do not edit "
        f"by hand. Regenerate with `{REGENERATE}`; tests/test_commands_doc.py fails when this file is stale. -->",
        "",
        "Every command of `python -m dlperf_slurm` (the same program as the `dlperf-slurm` console script): its "
        "usage, what `--help` says of each argument, and the notes argparse does not hold (what is written where, "
        "what is refused, exit codes). Every command also takes `-h`/`--help`. Options given before the command "
        f"(`--logs DIR`) are those of [{ROOT_NAME}](#{_anchor(ROOT_NAME)}).",
        "",
        "This file is generated: edit the help strings in `dlperf_slurm/cli.py` or the notes in "
        f"`docs/commands-notes.md`, then run `{REGENERATE}`.",
        "",
    ]
    for (words, help_text, _), title in zip(cmds, titles, strict=True):
        indent = "  " * max(len(words) - 1, 0)
        line = f"{indent}- [{title}](#{_anchor(title)})"
        out.append(line + (f": {_md(help_text)}" if help_text else ""))
    out.append("")
    globals_ = {o for a in parser._actions for o in a.option_strings} - {"-h", "--help", "--version"}
    for (_words, help_text, p), title in zip(cmds, titles, strict=True):
        fmt = _formatter(p)
        out += [f"## {title}", ""]
        description = _text(p, p.description)
        if help_text:
            out += [_md(help_text), ""]
        if description and description != help_text:
            out += [_md(description), ""]
        out += ["```", usage(p), "```", ""]
        actions = [a for a in p._actions if a.help is not argparse.SUPPRESS and not isinstance(a, argparse._HelpAction)]
        positionals = [a for a in actions if not a.option_strings]
        # the global options a command takes after its name too are listed once, under the root's section
        own = [a for a in actions if a.option_strings and not (_words and a.default is argparse.SUPPRESS
                                                               and set(a.option_strings) <= globals_)]
        if positionals:
            out += ["Arguments:", "", *(_argument(fmt, a) for a in positionals), ""]
        if own:
            out += ["Options:", "", *(_argument(fmt, a) for a in own), ""]
        if _words and len(own) < len(actions) - len(positionals):
            out += [f"And the [global options](#{ROOT_NAME}), here or before the command.", ""]
        if p.epilog:
            out += [_md(_text(p, p.epilog)), ""]
        if title in notes and notes[title]:
            out += [notes[title], ""]
    return "\n".join(out).rstrip("\n") + "\n"


def stale(current: str | None, expected: str) -> str | None:
    """None when docs/commands.md (``current``; None: missing) is what the generator writes; else one line."""
    if current == expected:
        return None
    if current is None:
        return f"docs/commands.md is missing: run `{REGENERATE}`"
    a, b = current.splitlines(), expected.splitlines()
    line = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))) + 1
    return (f"docs/commands.md is stale (it differs from dlperf_slurm/cli.py and docs/commands-notes.md from line "
            f"{line}): run `{REGENERATE}`")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="write docs/commands.md from the argument parser and the notes")
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 when docs/commands.md is stale")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))  # this checkout's package, whichever is installed
    text = generate()
    if args.check:
        problem = stale(OUT.read_text(encoding="utf-8") if OUT.exists() else None, text)
        if problem:
            print(problem, file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
