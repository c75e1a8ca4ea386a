"""Bad state on disk, injected for real on a local campaign (issue #22): a manifest cut to half its size, a full
disk (a small tmpfs filled to the last block), a read-only file system (the tmpfs remounted read-only), logs
deleted, unreadable or replaced by binary garbage, a log that changes after ``status`` settled its run, the disk
filling while the local runner runs one run and holds two.
Wanted each time: one line naming the file and what to do, a non-zero exit, nothing that was there lost, and
never a run that reads OK without a figure.

The disk faults need root and ``mount`` (they skip, saying so, where either is missing)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "slurm"))
from testlib import TEMPLATES, cli, fill, small_tmpfs, wait_until, write_matrix

COMMANDS = (("status",), ("collect", "--no-plots"), ("cancel",))


def campaign(root: Path, name: str = "f", repeats: int = 4, **kw) -> tuple[Path, Path, Path]:
    """A finished local campaign of fake OK runs: (matrix, logs folder, campaign folder)."""
    mx = write_matrix(root, name=name, repeats=repeats, **kw)
    logs = root / "logs"
    p = cli("--logs", str(logs), "submit", str(mx), "--executor", "local", "-j", "2", "--no-site", "--templates",
            str(TEMPLATES), "--wait", cwd=root)
    assert p.returncode == 0, p.stdout + p.stderr
    _runners_ended(logs / name)
    return mx, logs, logs / name


def _runners_ended(cdir: Path, timeout: float = 60) -> None:
    """``--wait`` returns when the runs have ended; the detached local runner then still writes its own end into
    ``.local/<token>.json``. Wait for it, so a test's snapshot of the folder is not taken halfway (a loaded machine
    made test_read_only_campaign see that write as a reading command's)."""
    import json
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = [json.loads(f.read_text() or "{}") for f in (cdir / ".local").glob("*.json")]
        if all("ended" in st["runner"] for st in states if "runner" in st):  # no runner record: none to wait for
            return
        time.sleep(0.2)
    raise AssertionError(f"{cdir}: a local runner had not written its end after {timeout:.0f} s")


def ok_runs(status_text: str) -> int:
    """Runs whose row in ``status``'s run table reads OK."""
    return sum(1 for st, _ in statuses(status_text).values() if st == "OK")


def run_cmd(logs: Path, root: Path, *args: str) -> subprocess.CompletedProcess:
    return cli("--logs", str(logs), *args, cwd=root, timeout=120)


def one_line_error(p: subprocess.CompletedProcess, *words: str) -> str:
    err = p.stderr.strip()
    assert p.returncode != 0, f"rc 0\n{p.stdout}{p.stderr}"
    assert "Traceback" not in p.stderr and len(err.splitlines()) == 1, p.stderr
    for w in words:
        assert w in err, err
    return err


# ------------------------------------------------------------------------------------------ a damaged manifest


def test_a_damaged_manifest_is_one_line_naming_it_and_the_way_out(tmp_path):
    mx, logs, cdir = campaign(tmp_path)
    man = cdir / "manifest.sqlite"
    for side in ("-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            (cdir / f"manifest.sqlite{side}").unlink()
    man.write_bytes(man.read_bytes()[: man.stat().st_size // 2])  # cut to half its size
    damaged = man.read_bytes()
    for args in COMMANDS:
        p = run_cmd(logs, tmp_path, *args, "f")
        one_line_error(p, str(man), "damaged", "doctor")
    p = cli("--logs", str(logs), "submit", str(mx), "--executor", "local", "--no-site", "--templates",
            str(TEMPLATES), cwd=tmp_path)
    one_line_error(p, str(man), "damaged")
    assert man.read_bytes() == damaged, "a command changed the damaged manifest"
    assert len(list(cdir.glob("1n1g/*.log"))) == 4, "a log was lost"


def test_a_log_made_unreadable_then_readable_again_is_read_again(tmp_path):
    """chmod 000 on an OK run's log: LOG_MISSING "cannot be read"; chmod 644 again (its size, mtime and inode as
    before): OK again in ``status`` and ``collect``. (Before: LOG_MISSING for ever.) Root reads a mode-000 file, so
    as root the commands run without CAP_DAC_OVERRIDE (setpriv)."""
    no_dac = []
    if os.geteuid() == 0:
        if not shutil.which("setpriv"):
            pytest.skip("root reads a mode-000 file; needs setpriv to drop CAP_DAC_OVERRIDE")
        caps = "-dac_override,-dac_read_search"
        no_dac = ["setpriv", f"--bounding-set={caps}", f"--inh-caps={caps}"]
    mx, logs, cdir = campaign(tmp_path, repeats=2)
    log = sorted(cdir.glob("1n1g/*.log"))[0]
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))

    def cmd(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*no_dac, sys.executable, "-m", "dlperf_slurm", "--logs", str(logs), *args], env=env,
                              cwd=tmp_path, capture_output=True, text=True, timeout=120)

    log.chmod(0)
    try:
        st = statuses(cmd("status", "f", "--wide").stdout)
        assert sorted(s for s, _ in st.values()) == ["LOG_MISSING", "OK"], st
        assert any("cannot be read" in why for _, why in st.values()), st
    finally:
        log.chmod(0o644)
    st = statuses(cmd("status", "f", "--wide").stdout)
    assert sorted(s for s, _ in st.values()) == ["OK", "OK"], st
    p = cmd("collect", "f", "--no-plots")
    assert p.returncode == 0 and "2/2" in p.stdout, p.stdout + p.stderr


# ------------------------------------------------------------------------------------------ disk full, read-only


@pytest.fixture
def small_fs(tmp_path):
    """A 1 MiB tmpfs at tmp_path/fs (root and mount needed)."""
    with small_tmpfs(tmp_path, "1m") as fs:
        yield fs


def test_a_full_disk_is_one_line_and_loses_nothing(small_fs):
    mx, logs, cdir = campaign(small_fs)
    before = run_cmd(logs, small_fs, "status", "f", "--wide").stdout
    filler = fill(small_fs)
    for args in (*COMMANDS, ("doctor", "--no-site")):  # cancel: a traceback from its lock's note before
        p = run_cmd(logs, small_fs, *args, "f")
        if p.returncode == 0:  # nothing needed writing: fine, as long as it said nothing wrong
            assert "Traceback" not in p.stderr, p.stderr
            continue
        one_line_error(p, "manifest.sqlite" if "manifest" in p.stderr else str(small_fs), "space" if "space" in
                       p.stderr else "full")
    p = cli("--logs", str(logs), "submit", str(mx), "--executor", "local", "--no-site", "--templates",
            str(TEMPLATES), "--force", "--wait", cwd=small_fs)
    one_line_error(p)
    assert "full" in p.stderr or "No space" in p.stderr, p.stderr
    assert not list(cdir.glob("manifest.sqlite.damaged-*")), "doctor called the sound manifest damaged"
    filler.unlink()
    after = run_cmd(logs, small_fs, "status", "f", "--wide")
    assert after.returncode == 0 and "Traceback" not in after.stderr, after.stderr
    assert ok_runs(after.stdout) == ok_runs(before) == 4, f"{before}\n---\n{after.stdout}"


@pytest.mark.parametrize("jobs", [(), ("-j", "1")], ids=["json-beside", "one-process"])
def test_summaries_on_a_full_disk_are_one_line_naming_the_file(small_fs, tmp_path, monkeypatch, capsys, jobs):
    """collect's writers on a full disk: a write names no file (the OSError of f.write has none), so the summary
    being written is named by atomic_write; with the JSON written by a forked process beside the others (forced
    here for a small tree) its failure reaches this one the same. Then, space freed, the same collect writes all."""
    import re

    from dlperf_slurm import cli as dlcli
    from dlperf_slurm.collect import processes
    from dlperf_slurm.report import writers

    sys.path.insert(0, str(Path(__file__).parent))
    from test_collect import make_tree

    make_tree(tmp_path / "t", "tf-cnn/resnet50")
    monkeypatch.setattr(writers, "BESIDE_RUNS", 1)
    monkeypatch.setattr(processes, "free_cpus", lambda: 2.0)
    forks = []
    real = processes.beside
    monkeypatch.setattr(processes, "beside", lambda *a: forks.append(1) or real(*a))
    argv = ["collect", "--from", str(tmp_path / "t"), "--suite", "tf-cnn/resnet50", "--no-plots", "-q", "--no-store",
            "--out", str(small_fs / "s"), *jobs]
    filler = fill(small_fs)
    capsys.readouterr()
    assert dlcli.main(argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert "Traceback" not in "\n".join(err) and len(forks) == (0 if jobs else 1), err
    # the first file this process writes (the md) fails first; the forked JSON writer's failure is waited for
    assert re.fullmatch(rf"dlperf-slurm: error: {re.escape(str(small_fs / 's'))}/t\.md: No space left on device: "
                        r"free space there and run the command again", err[-1]), err
    assert all("warning: parse cache" in line for line in err[:-1]), err
    filler.unlink()
    assert dlcli.main(argv) == 0
    assert sorted(p.name for p in (small_fs / "s").iterdir() if not p.name.startswith(".")) == \
        ["t.csv", "t.html", "t.json", "t.md", "t.runs.csv"]


def test_a_read_only_file_system_is_one_line(small_fs, tmp_path):
    mx, logs, cdir = campaign(small_fs)
    view = tmp_path / "ro"  # the same campaign through a read-only bind mount of the tmpfs
    view.mkdir()
    subprocess.run(["mount", "--bind", str(small_fs), str(view)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(view)], check=True)
        p = cli("--logs", str(view / "logs"), "submit", str(view / mx.name), "--executor", "local", "--no-site",
                "--templates", str(TEMPLATES), "--force", cwd=tmp_path)
        one_line_error(p)
        assert "read-only" in p.stderr and "writable" in p.stderr, p.stderr
        p = cli("--logs", str(view / "logs"), "collect", "f", "--no-plots", "--out", str(view / "summaries"),
                cwd=tmp_path)
        one_line_error(p)
    finally:
        subprocess.run(["umount", "-l", str(view)], capture_output=True)
    assert ok_runs(run_cmd(logs, small_fs, "status", "f", "--wide").stdout) == 4


# ------------------------------------------------------------------------------------------ logs lost or changed


def statuses(text: str) -> dict[str, tuple[str, str]]:
    """``status``'s run table: run key -> (status, reason), its columns found by their header."""
    out, cols = {}, None
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[:1] == ["run"] and "status" in cells:
            cols = {name: i for i, name in enumerate(cells)}
        elif cols and len(cells) == len(cols) and not set(cells[0]) <= {"-", ":"}:
            out[cells[0]] = (cells[cols["status"]], cells[cols["reason"]])
    return out


def test_a_lost_garbled_or_changed_log_is_decided_again_the_same_everywhere(tmp_path):
    """After ``status`` settled 4 runs OK: r0's log deleted, a folder where r1's log was (unreadable), r2's log
    replaced by random bytes, r3's log rewritten with a NaN loss inside the window (a late flush, a requeue).
    ``status``, ``collect`` and ``--retry-failed`` must say the same, and none of the 4 may read OK."""
    mx, logs, cdir = campaign(tmp_path)
    first = statuses(run_cmd(logs, tmp_path, "status", "f", "--wide").stdout)
    assert [s for s, _ in first.values()] == ["OK"] * 4, first
    log = {k: cdir / "1n1g" / f"resnet50_b1_fp32_DLPERF-TEST-MODE-ok_{k}.log" for k in range(4)}
    log[0].unlink()
    log[1].unlink()
    log[1].mkdir()
    log[2].write_bytes(os.urandom(5000))
    text = log[3].read_text()
    assert '"step":1,"time":1.5,"loss":1.0' in text
    log[3].write_text(text.replace('"step":1,"time":1.5,"loss":1.0', '"step":1,"time":1.5,"loss":NaN'))

    st = statuses(run_cmd(logs, tmp_path, "status", "f", "--wide").stdout)
    by_repeat = {int(k.rsplit(".r", 1)[1]): v for k, v in st.items()}
    assert [by_repeat[i][0] for i in range(4)] == ["LOG_MISSING"] * 3 + ["NONFINITE"], st
    assert "deleted or moved" in by_repeat[0][1] and "cannot be read" in by_repeat[1][1]
    assert "not text" in by_repeat[2][1]

    p = run_cmd(logs, tmp_path, "collect", "f", "--no-plots", "--out", str(tmp_path / "summaries"))
    assert p.returncode == 1 and "collect fails: every run failed (4: LOG_MISSING 3, NONFINITE 1)" in p.stderr, \
        p.stderr  # the summaries written all the same
    md = (tmp_path / "summaries" / "f.md").read_text()
    assert "Runs: LOG_MISSING 3, NONFINITE 1." in md, md[:2000]
    import csv

    rows = list(csv.DictReader(open(tmp_path / "summaries" / "f.runs.csv")))
    assert {r["run"]: r["status"] for r in rows} == {k: v[0] for k, v in st.items()}

    p = cli("--logs", str(logs), "submit", str(mx), "--executor", "local", "--no-site", "--templates",
            str(TEMPLATES), "--retry-failed", "--dry-run", cwd=tmp_path)
    assert "submitting 4 as" in p.stdout, p.stdout + p.stderr

    # a second status changes nothing: the identities it recorded are the logs' as they are now
    assert statuses(run_cmd(logs, tmp_path, "status", "f", "--wide").stdout) == st


# ------------------------------------------------------------------------------------------ collect killed


def _children(pid: int) -> list[int]:
    kids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            with contextlib.suppress(OSError):
                if int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    kids.append(int(d.name))
    return kids


def _alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc for the collect's workers")
@pytest.mark.parametrize("sig", [9, 15])
def test_a_killed_collect_leaves_no_worker_and_no_temporary_file(tmp_path, sig):
    """``collect`` killed while its workers parse: they die with it (they waited on their queue for ever, one
    per CPU); a ``.X.<pid>.tmp`` a killed writer left is gone once the next collect ran (a live one's stays)."""
    import signal
    import time

    tree = tmp_path / "tree" / "1n1g"
    tree.mkdir(parents=True)
    head = ':::DLPERF {"event": "job", "run": "x", "time": 1.0, "hostname": "h"}'
    text = "\n".join([head] + [':::DLPERF {"event":"step","step":%d,"time":%.3f,"loss":1.0}' % (s, s * 0.1)
                               for s in range(20000)]) + "\n"
    for i in range(64):  # the parallel path takes 32 runs or more
        (tree / f"resnet50_b1_fp32_{i}.log").write_text(text)
    out = tmp_path / "summaries"
    argv = [sys.executable, "-m", "dlperf_slurm", "collect", "--from", str(tree.parent), "--suite",
            "pytorch-ddp/resnet50", "--no-plots", "--no-cache", "--out", str(out), "--jobs", "2"]
    env = {**os.environ, "PYTHONPATH": f"{Path(__file__).parent.parent}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    p = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    kids: list[int] = []
    deadline = time.monotonic() + 60
    while len(kids) < 2 and p.poll() is None and time.monotonic() < deadline:
        kids = _children(p.pid)
        time.sleep(0.05)
    assert len(kids) == 2, f"no parse workers seen (collect rc {p.poll()})"
    time.sleep(0.5)
    p.send_signal(sig)
    p.wait(timeout=30)
    deadline = time.monotonic() + 10
    while any(map(_alive, kids)) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [k for k in kids if _alive(k)]
    for k in left:  # never leave them behind, even when the test fails
        os.kill(k, signal.SIGKILL)
    assert not left, f"parse workers {left} outlived collect killed by signal {sig}"

    dead = subprocess.Popen(["sleep", "60"])
    dead.kill()
    dead.wait()
    out.mkdir(exist_ok=True)
    stale = out / f".tree.md.{dead.pid}.tmp"
    stale.write_text("half a summary")
    live = out / f".tree.md.{os.getpid()}.tmp"
    live.write_text("being written")
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert not stale.exists() and live.exists() and (out / "tree.md").exists()
    live.unlink()


# ------------------------------------------------------------------------------------------ doctor


@pytest.mark.parametrize("harm", ["deleted", "cut in half"])
def test_doctor_rebuilds_a_lost_manifest_with_every_runs_status(tmp_path, harm):
    """OK, failing and out-of-memory runs; the manifest deleted (or cut to half its size): ``status`` says to run
    ``doctor``, which rebuilds it from the matrix copy, the scripts, logs and exit markers and the scheduler
    (the local runner's state here; tests/test_slurm_faults.py does it with Slurm); every run's status and
    reason then read as before, and a further ``submit`` submits nothing."""
    mx = write_matrix(tmp_path, name="d", modes=("ok", "fail", "oom"), repeats=2)
    logs = tmp_path / "logs"
    p = cli("--logs", str(logs), "submit", str(mx), "--executor", "local", "-j", "2", "--no-site", "--templates",
            str(TEMPLATES), "--wait", cwd=tmp_path)
    assert p.returncode == 1 and "6/6 done" in p.stderr, p.stderr  # --wait: 1 when a run failed
    before = statuses(run_cmd(logs, tmp_path, "status", "d", "--wide").stdout)
    assert sorted(s for s, _ in before.values()) == ["FAILED", "FAILED", "OK", "OK", "OOM", "OOM"], before
    man = logs / "d" / "manifest.sqlite"
    for side in ("-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            Path(f"{man}{side}").unlink()
    if harm == "deleted":
        man.unlink()
    else:
        man.write_bytes(man.read_bytes()[: man.stat().st_size // 2])
    one_line_error(run_cmd(logs, tmp_path, "status", "d", "--wide"), "doctor d")
    p = run_cmd(logs, tmp_path, "doctor", "d", "--no-site")
    assert p.returncode == 0 and "rebuilt: 6 runs, 6 found by their files" in p.stdout, p.stdout + p.stderr
    if harm != "deleted":
        assert len(list(man.parent.glob("manifest.sqlite.damaged-*[0-9]"))) == 1  # kept (with its -wal, -shm)
    after = statuses(run_cmd(logs, tmp_path, "status", "d", "--wide").stdout)
    assert after == before
    p = cli("--logs", str(logs), "submit", str(mx), "--executor", "local", "--no-site", "--templates",
            str(TEMPLATES), cwd=tmp_path)
    assert "nothing to submit" in p.stdout, p.stdout + p.stderr
    assert "nothing to do" in run_cmd(logs, tmp_path, "doctor", "d", "--no-site").stdout


def test_doctor_while_local_runs_are_queued_or_running_finds_them_all(tmp_path):
    """The manifest deleted while the local runner still runs one run and holds two: ``doctor`` finds all three
    by the runner's queue file (no run reads UNSUBMITTED), they end OK, and a further ``submit`` submits nothing.
    (Before: the two queued runs read UNSUBMITTED for ever, though they ran, and a ``submit`` ran them again.)"""
    go = tmp_path / "go"
    mx = write_matrix(tmp_path, name="q", modes=("wait",), repeats=3)
    logs = tmp_path / "logs"
    env = {"DLPERF_TEST_GO": str(go)}
    cli("--logs", str(logs), "submit", str(mx), "--executor", "local", "-j", "1", "--no-site", "--templates",
        str(TEMPLATES), env=env, cwd=tmp_path, check=True)
    try:
        wait_until(lambda: list((logs / "q").glob("*/*_0.log")), what="the first run's log")
        man = logs / "q" / "manifest.sqlite"
        for path in man.parent.glob("manifest.sqlite*"):
            path.unlink()
        p = run_cmd(logs, tmp_path, "doctor", "q", "--no-site")
        assert p.returncode == 0 and "3 found by their files; PENDING 2, RUNNING 1" in p.stdout, p.stdout + p.stderr
    finally:
        go.write_text("")  # the runs end (a failed check leaves no runner waiting for ever)
    wait_until(lambda: ok_runs(run_cmd(logs, tmp_path, "status", "q").stdout) == 3, timeout=120,
               what="the three runs OK")
    p = cli("--logs", str(logs), "submit", str(mx), "--executor", "local", "--no-site", "--templates",
            str(TEMPLATES), env=env, cwd=tmp_path)
    assert "nothing to submit" in p.stdout, p.stdout + p.stderr


# ------------------------------------------------------------------------------------------ the disk fills mid-run


def _runner_idle(queue: Path) -> bool:
    """The local runner of ``queue`` has ended, or runs no script (twice, 0.5 s apart: not between two runs)."""
    import json
    import time

    pid = (json.loads(queue.read_text()).get("runner") or {}).get("pid")
    for _ in range(2):
        if pid and _alive(pid) and _children(pid):
            return False
        time.sleep(0.5)
    return True


def test_the_disk_filling_while_local_runs_run_is_said_and_retried(small_fs):
    """The 1 MiB tmpfs holding the campaign (logs, manifest, the runner's queue) filled to its last block while the
    local runner runs one run (which then prints 16 KiB) and holds two: the run that was OK stays OK; the run that
    could not write its log reads FAILED and the two held ones LAUNCH_FAILED, each saying "no space left on
    device"; nothing runs twice; once space is freed, ``submit --retry-failed`` runs exactly those three again.
    (Before: the runner died on its own queue file's write; the held runs read CANCELLED "the local runner died
    before starting it", one of them though it had started, no word of the disk.)"""
    go, starts = small_fs.parent / "go", small_fs.parent / "starts"
    mx = write_matrix(small_fs, name="d", modes=("ok", "wait"), repeats=2)  # -j 1: ok.r0, wait.r0, ok.r1, wait.r1
    logs, cdir = small_fs / "logs", small_fs / "logs" / "d"
    env = {"DLPERF_TEST_GO": str(go), "DLPERF_TEST_STARTS": str(starts), "DLPERF_TEST_BULK": "16"}
    sub = ("submit", str(mx), "--executor", "local", "-j", "1", "--no-site", "--templates", str(TEMPLATES))
    cli("--logs", str(logs), *sub, env=env, cwd=small_fs, check=True)
    try:
        wait_until(lambda: starts.exists() and "wait.r0 " in starts.read_text(), timeout=120,
                   what="wait.r0's program running (ok.r0 ended)")
        filler = fill(small_fs)
    finally:
        go.write_text("")  # wait.r0 goes on (a failed check leaves no runner waiting for ever)
    queue = next(cdir.glob(".local/*.json"))
    wait_until(lambda: _runner_idle(queue), timeout=120, what="the runner to run nothing more")
    for args in (("status", "d"), ("collect", "d", "--no-plots")):  # on the full disk: one line, or nothing wrong
        p = run_cmd(logs, small_fs, *args)
        assert "Traceback" not in p.stderr and (p.returncode == 0 or len(p.stderr.strip().splitlines()) == 1), p.stderr
    filler.unlink()
    wait_until(lambda: not {"RUNNING", "PENDING"} & {s for s, _ in statuses(
        run_cmd(logs, small_fs, "status", "d", "--wide").stdout).values()}, timeout=60, what="every run ended")
    p = run_cmd(logs, small_fs, "status", "d", "--wide")
    st = {key.rsplit("-", 1)[1]: v for key, v in statuses(p.stdout).items()}  # "ok.r0" -> (status, reason)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    assert st["ok.r0"][0] == "OK", st
    assert st["wait.r0"][0] == "FAILED" and "no space left on device" in st["wait.r0"][1], st
    for key in ("ok.r1", "wait.r1"):
        assert st[key][0] == "LAUNCH_FAILED" and "no space left on device" in st[key][1], st
    ran = sorted(line.split()[0].rsplit("-", 1)[1] for line in starts.read_text().splitlines())
    assert ran == ["ok.r0", "wait.r0"], ran  # the held runs never started, nothing ran twice
    p = run_cmd(logs, small_fs, "collect", "d", "--no-plots")
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stdout + p.stderr
    p = cli("--logs", str(logs), *sub, env=env, cwd=small_fs)
    assert "nothing to submit" in p.stdout, p.stdout + p.stderr
    p = cli("--logs", str(logs), *sub, "--retry-failed", "--wait", env=env, cwd=small_fs, timeout=300)
    assert p.returncode == 0 and "submitting 3 as" in p.stdout, p.stdout + p.stderr
    assert ok_runs(run_cmd(logs, small_fs, "status", "d", "--wide").stdout) == 4
    ran = sorted(line.split()[0].rsplit("-", 1)[1] for line in starts.read_text().splitlines())
    assert ran == ["ok.r0", "ok.r1", "wait.r0", "wait.r0", "wait.r1"], ran


def test_a_fifo_named_like_a_log_is_unreadable_not_a_hang(tmp_path):
    """A FIFO where a run's log was (a user's ``mkfifo``, a tool streaming a log): a plain ``open`` of it waits for
    a writer for ever, and ``collect --from`` hung so (before: killed by the timeout). Wanted: status, collect and
    ``collect --from`` (the suite named and recognised) end, the run LOG_MISSING saying it is not a regular file."""
    mx, logs, cdir = campaign(tmp_path, repeats=2)
    log = sorted(cdir.glob("1n1g/*.log"))[0]
    log.unlink()
    os.mkfifo(log)

    def cmd(*args: str) -> subprocess.CompletedProcess:
        return cli("--logs", str(logs), *args, cwd=tmp_path, timeout=60)

    st = statuses(cmd("status", "f", "--wide").stdout)
    assert sorted(s for s, _ in st.values()) == ["LOG_MISSING", "OK"], st
    assert any("not a regular file" in why for _, why in st.values()), st
    p = cmd("collect", "f", "--no-plots", "--out", str(tmp_path / "s1"))
    assert p.returncode == 0 and "LOG_MISSING 1" in (tmp_path / "s1" / "f.md").read_text(), p.stdout + p.stderr
    for suite in ("auto", "pytorch-ddp/resnet50"):
        p = cmd("collect", "--from", str(cdir), "--suite", suite, "--no-plots", "--no-cache",
                "--out", str(tmp_path / suite.replace("/", "_")))
        # read as a tree, by its suite's default window, the OK run is INCOMPLETE: every run failed, exit 1
        assert p.returncode == 1 and "collect fails: every run failed" in p.stderr, p.stdout + p.stderr
        runs = (tmp_path / suite.replace("/", "_") / "f.runs.csv").read_text()
        assert "LOG_MISSING" in runs and "not a regular file" in runs, runs


def test_the_health_judge_on_a_full_disk_leaves_no_temporary_file(small_fs, tmp_path):
    """The gate's judge writes its verdict for the exit marker (temp + rename) into the run's folder; on a full disk
    (the tmpfs filled to its last block) it ends with the verdict's exit code and one line, and leaves no
    ``.exit.health.tmp.<pid>`` behind. (Before: an OSError traceback, exit 1, a 0-byte temporary file left for ever.)"""
    probe = tmp_path / "probe.out"
    probe.write_text("")  # no node reported: the gate fails (exit 3)
    marker = small_fs / "r.exit.health"
    filler = fill(small_fs)
    p = subprocess.run([sys.executable, "-m", "dlperf_slurm.probes.health", "judge", "--probe-out", str(probe), "--hosts",
                        "n1", "--ranks", "1", "--marker", str(marker)], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)})
    left = sorted(x.name for x in small_fs.iterdir() if x != filler)
    assert p.returncode == 3 and "Traceback" not in p.stderr, (p.returncode, p.stderr)
    assert "could not be written" in p.stderr and left == [], (p.stderr, left)


@pytest.mark.parametrize("hyperscan", [True, False])
def test_not_text_counts_each_binary_byte_as_the_byte_rule_says(tmp_path, monkeypatch, hyperscan):
    """storage.unreadable counts binary bytes in C (translate; with Hyperscan, an ASCII head without one is passed
    at once): it must call the same heads text or not as the rule read a byte at a time (C0 controls but
    tab/newline/CR/ESC/backspace/form feed, plus invalid UTF-8), on both sides of its 30 % line, with real text,
    UTF-8 text, a few binary bytes and random bytes mixed."""
    import random

    from dlperf_slurm.parsing import head as loghead
    from dlperf_slurm.parsing import hsblocks

    if hyperscan and hsblocks.hyperscan is None:
        pytest.skip("the hyperscan package is not installed (setup.cfg's fast extra)")
    monkeypatch.setattr(hsblocks, "ENABLED", hyperscan)

    def by_rule(head: bytes) -> bool:
        bad = sum(1 for b in head if b < 32 and b not in b"\t\n\r\x1b\x08\x0c")
        bad += head.decode("utf-8", errors="replace").count("\ufffd")
        return bad > loghead.NOT_TEXT_SHARE * len(head)

    rng = random.Random(5)
    text = (Path(__file__).read_text() + "überall ünïcödé ✓\n").encode()
    seen = set()
    for k in range(300):
        share = k / 300 if k % 3 else k / 30000  # a third with a binary byte or two, or none
        head = bytearray(text[:4000] if k % 5 else text[:4000].decode("ascii", "ignore").encode())
        for i in rng.sample(range(len(head)), int(share * len(head))):
            head[i] = (rng.randrange(256) if k % 2 else rng.choice(b"\x00\x01\x07\x0b\x1f\xff\xc3") if k % 7
                       else rng.choice(b"\x00\x1f"))  # every seventh: ASCII, its binary bytes NUL and US alone
        p = tmp_path / f"{k}.log"
        p.write_bytes(bytes(head))
        got = "not text" in loghead.unreadable(p)
        assert got == by_rule(bytes(head)), (k, share)
        seen.add(got)
    assert seen == {True, False}
