"""The network explanation of scaling validated on real links of different bandwidth (#25, part 4).

The test cluster started with ``SLURM_CI_NETNS=1 SLURM_CI_SLOW_LINK=100mbit`` (tests/slurm/start.sh) gives every
node two paths to the other: eth0 on one bridge (veth speed) and eth1 on a second bridge whose sending each node's
tbf qdisc limits to 100 Mbit/s. Two set-ups of one campaign choose the path for the health gate's all-reduce and the
training alike (gloo on CPU: ``GLOO_SOCKET_IFNAME``); the built-in workload's tiny ResNet-50 (1.49 M parameters:
5.9 MB of fp32 gradients per step) on 2 nodes x 1 process, beside its 1-node baseline of each set-up. On the slow
path a step's all-reduce (about 0.5 s at 12.5 MB/s) outlasts its compute (a batch of 32 on one thread): the summary
must name those cells network-bound, at a measured bus bandwidth near the tc rate, and the fast path's not.

Run with: ``SLURM_CI_NETNS=1 SLURM_CI_SLOW_LINK=100mbit bash tests/slurm/start.sh 2 && pytest -m netbed``
(.ci/run does, after the other phases); the test skips, saying why, on a cluster without the slow path."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "slurm"))
from testlib import cli, cluster_up, wait_campaign  # noqa: E402

from dlperf_slurm.campaign import manifest  # noqa: E402
from dlperf_slurm.model.status import Status  # noqa: E402

_UNITS = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9}


def slow_link_rate() -> tuple[float | None, str]:
    """(the tc rate of n1's eth1 in bytes/s, '') on a test cluster with the slow path; (None, why) elsewhere."""
    why = cluster_up()
    if why is not None:
        return None, why
    try:
        p = subprocess.run(["tc", "-n", "slurm-n1", "qdisc", "show", "dev", "eth1"], capture_output=True, text=True,
                           timeout=10)
    except (OSError, subprocess.TimeoutExpired) as err:
        return None, f"tc cannot be run here ({err})"
    m = re.search(r"qdisc tbf .* rate (\d+(?:\.\d+)?)([KMG]?)bit", p.stdout)
    if p.returncode != 0 or not m:
        return None, ("the test cluster has no slow path (node n1 has no tbf-limited eth1): restart it with "
                      "SLURM_CI_NETNS=1 SLURM_CI_SLOW_LINK=100mbit bash tests/slurm/start.sh 2")
    return float(m.group(1)) * _UNITS[m.group(2)] / 8, ""


RATE, _why = slow_link_rate()
pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.netbed, pytest.mark.skipif(RATE is None, reason=_why)]

STUDY = """suite = "pytorch-ddp/resnet50"
name = "netbed"
[axes]
devices = ["1x1", "2x1"]
batch_size = [32]
precision = ["fp32"]
setup = ["fast", "slow"]
[setups.fast]
description = "eth0: the nodes' own bridge (veth speed)"
env = { GLOO_SOCKET_IFNAME = "eth0" }
[setups.slow]
description = "eth1: the second bridge, each node's sending limited by tc (tbf)"
env = { GLOO_SOCKET_IFNAME = "eth1" }
[options]
tiny = true
threads = 1
ceiling = false      # no matmul ceiling: MFU is no question here
[measure]
repeats = 1
warmup_steps = 3
measure_steps = 30   # 1n1g steps vary 10-fold on this shared 2-core machine: a window that averages it
[health]
size_mb = 4
[slurm]
time = "00:06:00"
gpu_request = "none"
exclusive = true     # one job at a time (with the throttle): no job's start-up steals the CPU of another's
array_throttle = 1   # all-reduce (2 cores for the whole machine)
"""


def test_the_slow_setup_is_named_network_bound_and_the_fast_one_not(tmp_path):
    logs, out = tmp_path / "logs", tmp_path / "summaries"
    mx = tmp_path / "netbed.toml"
    mx.write_text(STUDY)
    p = cli("--logs", str(logs), "submit", str(mx), "--executor", "slurm", "--no-site")
    assert p.returncode == 0, p.stdout + p.stderr
    wait_campaign(logs / "netbed", 400)
    runs = manifest.load_manifest(logs / "netbed")
    assert [r.status for r in runs] == [Status.OK] * 4, [(r.key, r.status, r.reason) for r in runs]
    p = cli("--logs", str(logs), "collect", "netbed", "--no-plots", "--out", str(out))
    assert p.returncode == 0, p.stdout + p.stderr
    doc = json.loads((out / "netbed.json").read_text())
    found = {e["setup"]: e for e in doc.get("network", [])}
    assert set(found) == {"fast", "slow"}, doc.get("network")
    slow, fast = found["slow"], found["fast"]
    assert slow["shape"] == fast["shape"] == "2n1g" and slow["params"] == fast["params"] and slow["params_from"] == "log"
    # the gate measured each path: the slow one near its tc rate (2 ranks: busbw = algbw = bytes / time), the fast
    # one many times faster
    assert 0.5 * RATE <= slow["busbw_gbs"] * 1e9 <= 1.05 * RATE, (slow["busbw_gbs"], RATE)
    assert fast["busbw_gbs"] > 5 * slow["busbw_gbs"], (fast["busbw_gbs"], slow["busbw_gbs"])
    assert slow["regime"] == "network-bound", slow["text"]
    assert slow["text"].startswith("network-bound: 2n1g at ") and f"{slow['busbw_gbs']:.3g} GB/s" in slow["text"]
    assert fast["regime"] != "network-bound", fast["text"]
    assert slow["efficiency"] < fast["efficiency"], (slow["efficiency"], fast["efficiency"])
    md = (out / "netbed.md").read_text()
    section = md.split("## Network explanation of scaling", 1)[1].split("\n## ", 1)[0]
    assert "| slow " in section and "| fast " in section and "network-bound: 2n1g" in section, section
    setups = md.split("## Set-ups compared:", 1)[1].split("\n## ", 1)[0] if "## Set-ups compared:" in md else ""
    print(f"\n[slow path: tc rate {RATE * 8 / 1e6:g} Mbit/s = {RATE / 1e9:.4g} GB/s]\n## Set-ups compared:{setups}"
          f"\n## Network explanation of scaling{section}")
