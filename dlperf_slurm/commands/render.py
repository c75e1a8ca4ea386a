"""``render``: every run's job script, written without submitting."""

from __future__ import annotations

import argparse
from pathlib import Path

from dlperf_slurm.commands.common import load_matrix, make_folder, note_dropped
from dlperf_slurm.errors import UserError
from dlperf_slurm.words import plural


def cmd_render(args: argparse.Namespace) -> int:
    from dlperf_slurm.matrix import loader
    from dlperf_slurm.submit import render

    m = load_matrix(args)
    note_dropped(m, args.matrix)
    out = (Path(args.out) if args.out else Path(args.logs) / m.name).resolve()  # as submit: sbatch from anywhere
    render.check_template_dir(args.templates)  # before any folder is made
    from dlperf_slurm.campaign.folders import MANIFEST

    if (out / MANIFEST).exists():  # what ran stays as it ran: a submitted campaign's scripts are its record
        raise UserError(f"{out} is a submitted campaign ({MANIFEST}): its scripts are the ones that ran; render "
                        "into another folder (--out DIR)")
    make_folder(out, m.provenance.umask)
    paths = render.write_scripts(m, loader.runs(m, out), args.templates)
    print(f"wrote {plural(len(paths), 'script')} under {out}/ ({plural(len(m.cells), 'cell')} x "
          f"{plural(m.measure.repeats, 'repeat')}), and the job code they share: "
          f"{render.job_code(args.templates).name}")
    return 0
