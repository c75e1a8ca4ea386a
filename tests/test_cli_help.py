"""Every command's ``--help`` prints (argparse formats help strings with %: a bare "95 % interval" in one made the
top-level --help a traceback, found by hand)."""

from __future__ import annotations

import pytest

from dlperf_slurm.cli import build_parser


def _commands() -> list[list[str]]:
    import argparse

    parser = build_parser()
    out: list[list[str]] = [[]]
    for action in parser._actions:  # the subcommands and their own subcommands (site init)
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out.append([name])
                for a in sub._actions:
                    if isinstance(a, argparse._SubParsersAction):
                        out += [[name, n] for n in a.choices]
    return out


@pytest.mark.parametrize("words", _commands(), ids=lambda w: " ".join(w) or "dlperf-slurm")
def test_help_of_every_command_prints(words, capsys):
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args([*words, "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: dlperf-slurm"), out[:200]
