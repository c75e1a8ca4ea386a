"""Time ``plan`` + ``render`` for a large matrix (default ~10,000 cells x 7 repeats), next to writing the
same bytes with plain file writes. Prints figures; asserts nothing.

    python bench/bench_render.py [--cells-target 10000] [--repeats 7]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a source checkout

from dlperf_slurm.matrix import loader
from dlperf_slurm.submit import render


def make_matrix(path: Path, target: int, repeats: int) -> None:
    # 5 shapes x B batch sizes x 2 precisions x 2 xla x E env values ~= target cells
    batches = list(range(8, 8 + 25 * 8, 8))  # 25 batch sizes
    env_values = max(1, round(target / (5 * len(batches) * 2 * 2)))
    path.write_text(f"""
suite = "pytorch-ddp/resnet50"
name = "bench"
[axes]
devices = ["1x1", "1x4", "1x8", "2x8", "4x8"]
batch_size = {batches}
precision = ["fp32", "amp"]
xla = [false, true]
"env.NCCL_MIN_NCHANNELS" = {[str(i) for i in range(1, env_values + 1)]}
[measure]
repeats = {repeats}
[environment]
modules = ["cuda/12.4"]
env = {{ NCCL_DEBUG = "WARN" }}
""")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--cells-target", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="dlperf-bench-render-"))
    try:
        mpath = tmp / "bench.toml"
        make_matrix(mpath, args.cells_target, args.repeats)

        t0 = time.perf_counter()
        m = loader.load(mpath, site=False)
        runs = loader.runs(m, tmp / "logs" / "bench")
        t_plan = time.perf_counter() - t0

        t0 = time.perf_counter()
        renderer = render.Renderer(m)
        texts = [renderer.standalone(r) for r in runs]
        t_render = time.perf_counter() - t0

        # every run rendered whole (what a user's own templates folder gets): the same text, for the figures only
        t0 = time.perf_counter()
        whole = render.Renderer(m, str(render.builtin_template_dir()))
        sample = runs[:: max(1, len(runs) // 2000)]
        for r in sample:
            whole.standalone(r)
        t_whole = (time.perf_counter() - t0) / len(sample) * len(runs)

        t0 = time.perf_counter()
        render.write_scripts(m, runs)
        t_write = time.perf_counter() - t0

        # baseline: the same bytes, same files, plain writes (no rendering, no temp+rename)
        base = tmp / "plain"
        t0 = time.perf_counter()
        made = set()
        for r, text in zip(runs, texts):
            p = base / r.script.relative_to(tmp / "logs" / "bench")
            if p.parent not in made:
                p.parent.mkdir(parents=True, exist_ok=True)
                made.add(p.parent)
            p.write_text(text)
        t_plain = time.perf_counter() - t0

        n = len(runs)
        mb = sum(len(t) for t in texts) / 1e6
        print(f"matrix: {len(m.cells)} cells x {m.measure.repeats} repeats = {n} scripts, {mb:.1f} MB")
        print(f"plan (load + validate + expand + run paths): {t_plan:.3f} s")
        print(f"render in memory:                           {t_render:.3f} s  ({n / t_render:,.0f} scripts/s, "
              f"{t_render / n * 1e6:.0f} us/script)")
        print(f"  (every run rendered whole, as with --templates: {t_whole:.3f} s, estimated from {len(sample)} runs)")
        code = renderer.job_code.text
        print(f"script size: {mb * 1e6 / n / 1024:.2f} KiB a run (largest {max(len(t) for t in texts) / 1024:.2f} KiB), "
              f"beside the campaign's one job code of {len(code) / 1024:.1f} KiB")
        print(f"render + write (temp file 0755 + rename):    {t_write:.3f} s  ({n / t_write:,.0f} scripts/s)")
        print(f"plain writes of the same bytes:             {t_plain:.3f} s  ({n / t_plain:,.0f} files/s)")
        print(f"render+write / plain write: {t_write / t_plain:.2f}x")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
