"""The block path of the Scanner (a file from ``read_lines``: read in blocks, only the lines that can matter reach
the line loop) against the line-by-line path (the reference implementation: every line through the loop), over
every log fixture in tests/, synthetic logs in every format and every messy shape, small blocks (carries, ``\\r\\n``
split between reads, lines cut into pieces) and hypothesis fuzzing: the results and the facts must be equal."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dlperf_slurm import parsing as lp
from dlperf_slurm import suites
from dlperf_slurm.model.result import ParseContext
from dlperf_slurm.parsing import blocks, hsblocks, lines, npblocks, reading

TESTS = Path(__file__).parent
FIXTURES = TESTS / "fixtures"
sys.path.insert(0, str(FIXTURES))
import logsynth as ls

CASES = [(suite, i) for suite, writers in ls.WRITERS.items() for i in range(len(writers))]
FIXTURE_LOGS = sorted(p for p in FIXTURES.rglob("*") if p.suffix in (".log", ".json") and p.is_file())


class _Spy:
    """Records the Facts of every Scanner run."""

    def __init__(self, monkeypatch):
        self.facts: list[lp.Facts] = []
        run = lines.Scanner.run

        def spy(scanner, src):
            facts = run(scanner, src)
            self.facts.append(facts)
            return facts

        monkeypatch.setattr(lines.Scanner, "run", spy)


def _facts(f: lp.Facts) -> tuple:
    return (f.lines, f.garbled, f.oom, f.oom_rank, f.slurm, f.slurm_line, f.last_exception, f.last_error, f.job,
            f.memories, f.errors, f.ranks)


def both(suite: str, path: Path, ctx: ParseContext, spy: _Spy) -> tuple[str, str]:
    """(block path, line path): each result's repr (NaN-safe) and the Scanner's facts."""
    spy.facts.clear()
    fast = suites.get(suite).parse(lp.read_lines(path), ctx)
    ref = suites.get(suite).parse((line for line in lp.read_lines(path)), ctx)  # a generator: the line loop
    # the block path over the bytes the caller read already (outcome.read_log's, for a small log): the same
    read = suites.get(suite).parse(lp.read_lines(path, Path(path).read_bytes()), ctx)
    assert len(spy.facts) == 3
    assert repr((read, _facts(spy.facts[2]))) == repr((fast, _facts(spy.facts[0])))
    return repr((fast, _facts(spy.facts[0]))), repr((ref, _facts(spy.facts[1])))


@pytest.fixture(autouse=True, params=["hyperscan", "numpy"])
def scan(request, monkeypatch):
    """Every comparison twice: blocks of ASCII text scanned by Hyperscan (where the package is installed), then
    every block by the numpy sieve."""
    if request.param == "hyperscan" and hsblocks.hyperscan is None:
        pytest.skip("the hyperscan package is not installed (setup.cfg's fast extra)")
    monkeypatch.setattr(hsblocks, "ENABLED", request.param == "hyperscan")
    return request.param


@pytest.fixture
def spy(monkeypatch):
    return _Spy(monkeypatch)


def test_the_block_path_is_taken_for_a_file(spy, monkeypatch, tmp_path):
    taken = []
    monkeypatch.setattr(blocks.BlockLines, "_block", lambda self, *a: taken.append(a) or iter(()))
    p = tmp_path / "x.log"
    p.write_text("DLL 2020-09-15 14:29:13.473765 - PARAMETER batch_size : 128\n")
    suites.get("ngc-pytorch/resnet50").parse(lp.read_lines(p), ParseContext(nodes=1, gpus_per_node=1, batch_size=128))
    assert taken


def test_an_ascii_block_is_scanned_by_hyperscan_where_it_is_installed(scan, monkeypatch, tmp_path):
    """With the package, a block of ASCII text without "\\r" never reaches the numpy sieve; one with a byte that
    is not ASCII does."""
    numpy_blocks = []
    inner = blocks.BlockLines._numpy_block
    monkeypatch.setattr(blocks.BlockLines, "_numpy_block", lambda self, *a: numpy_blocks.append(a) or inner(self, *a))
    p = tmp_path / "x.log"
    ctx = ParseContext(nodes=1, gpus_per_node=1, batch_size=128, warmup_steps=0, measure_steps=1)
    for text, numpy_reads in (("I0826 15:12:50.113950 1 k.py:1] TimeHistory: 1.0 seconds, 2.0 examples/second "
                               "between steps 0 and 1\n", scan == "numpy"), ("tqdm ▌ 50%\n", True)):
        numpy_blocks.clear()
        p.write_text(text)
        suites.get("tf2/resnet50").parse(lp.read_lines(p), ctx)
        assert bool(numpy_blocks) == numpy_reads, text


@pytest.mark.parametrize("path", FIXTURE_LOGS, ids=[p.name for p in FIXTURE_LOGS])
def test_every_fixture_log_reads_the_same_both_ways(spy, path):
    # every registered suite, the real corpus included (the synthetic writers cover 10 suites)
    for suite in suites.names():
        for ctx in (ParseContext(nodes=2, gpus_per_node=8, batch_size=128, warmup_steps=2, measure_steps=10),
                    ParseContext(nodes=1, gpus_per_node=2, batch_size=4, warmup_steps=2, measure_steps=5),
                    ParseContext(nodes=1, gpus_per_node=1, batch_size=128, warmup_steps=5, measure_steps=15)):
            fast, ref = both(suite, path, ctx, spy)
            assert fast == ref, (suite, ctx)


def _messy(text: str, how: str, seed: int) -> bytes:
    rng = random.Random(seed)
    if how == "crlf-bad-bytes":
        data = text.replace("\n", "\r\n").encode()
        return data.replace(b"NCCL INFO", b"NCCL \xff\xfe\xc3INFO").replace(
            b"libibverbs", b"\r 12%|##  |\r 50%|#####|\rlibibverbs")
    if how == "truncated":
        data = text.encode()
        return data[:data.rstrip(b"\n").rfind(b"\n") + 7]
    if how == "long-lines":
        out = text.split("\n")
        out.insert(len(out) // 2, "x" * (lines.MAX_LINE + 5))
        out.insert(len(out) // 3, "é" * (lines.MAX_LINE // 2 + 3))
        return "\n".join(out).encode()
    if how == "unicode":
        out = []
        for line in text.split("\n"):
            r = rng.random()
            out.append(("٣: " + line) if r < 0.1 else (line + " \u00a0█▌ é") if r < 0.3 else line)
        out.insert(len(out) // 2, "slurmstepd: error: Detected 1 oom-\u212aill event")  # Kelvin sign: lower() is k
        out.insert(len(out) // 3, "I٠٨٢٦ 15:12:50.1")  # Unicode digits: a cut glog header to tf2
        return "\r".join(out).encode()
    if how == "errors":
        out = text.split("\n")
        for i, extra in enumerate(["RuntimeError: boom", "Killed", "ValueError: bad", "an Exception here",
                                   "slurmstepd: error: *** STEP 1.0 ON n1 CANCELLED AT 2024-01-01T00:00:00 ***",
                                   "OOM-KILL event", "ran out of memory, not a failure", "CUDA Out Of Memory"]):
            out.insert(rng.randrange(len(out) + 1), extra)
        return "\n".join(out).encode()
    raise AssertionError(how)


@pytest.mark.parametrize("suite,which", CASES, ids=[f"{s}-{ls.WRITERS[s][i].__name__}" for s, i in CASES])
@pytest.mark.parametrize("mode", ["plain", "srun-l", "split", "split-all-ranks", "crlf-bad-bytes", "truncated",
                                  "long-lines", "unicode", "errors", "oom", "nan", "killed"])
def test_synthetic_logs_read_the_same_both_ways(spy, tmp_path, monkeypatch, suite, which, mode):
    monkeypatch.setattr(reading, "MAX_LINE", 300)  # small pieces and blocks: carries and cut lines are exercised
    monkeypatch.setattr(blocks, "MAX_LINE", 300)
    monkeypatch.setattr(blocks, "BLOCK", 101)
    spec = ls.Spec(nodes=2, gpus=4, batch=16, noise=2, seed=which + 3, warmup=5, measure=20, log_steps=5, bpi=5,
                   oom=mode == "oom", nan_at=12 if mode == "nan" else None, steps=9 if mode == "killed" else None)
    text, _ = ls.write(suite, spec, which)
    if mode in ("srun-l", "split", "split-all-ranks"):
        text = ls.label_ranks(text, spec.world, seed=5, other_ranks=mode != "srun-l")
    if mode.startswith("split"):
        text = ls.split_records(text, seed=7, ratio=0.3, world=spec.world)
    data = text.encode() if mode in ("plain", "srun-l", "split", "split-all-ranks", "oom", "nan", "killed") \
        else _messy(text, mode, which)
    p = tmp_path / "run.log"
    p.write_bytes(data)
    ctx = ParseContext(nodes=2, gpus_per_node=4, batch_size=16, warmup_steps=5, measure_steps=20,
                       options={"batches_per_iter": 5})
    fast, ref = both(suite, p, ctx, spy)
    assert fast == ref


@pytest.mark.parametrize("block", [2, 3, 7, 64, 4096])
def test_block_boundaries_anywhere(spy, tmp_path, monkeypatch, block):
    monkeypatch.setattr(blocks, "BLOCK", block)
    data = (b"0: DLL 2020-09-15 14:29:13.473765 - PARAMETER batch_size : 8  world_size : 1 \r\n\r\r\n"
            b"[rank3]: out of memory\r 7: x\n\n\rDLL 2020-09-15 14:29:14.0 - Epoch: 0 Iteration: 1  train.loss : "
            b"7.0  train.total_ips : 10.0 img/s\r\n:::DLPERF {\"event\": \"job\"}\r\xe9\xff1: Killed\r")
    for cut in range(len(data) + 1):
        p = tmp_path / "b.log"
        p.write_bytes(data[:cut])
        fast, ref = both("ngc-pytorch/resnet50", p, ParseContext(nodes=1, gpus_per_node=1, batch_size=8,
                                                                 warmup_steps=0, measure_steps=1), spy)
        assert fast == ref, cut


# ----------------------------------------------------------------------------------------------- fuzzing

_TOKENS = st.sampled_from(["DLL ", "DLLL {", ":::DLPERF ", ":::", "{", "}", '"step":', "Iteration: ", "Epoch: ", "  ",
                           "TimeHistory: ", " seconds, ", " examples/second between steps ", " and ", "Train Step: ",
                           "images/sec: ", "total images/sec: ", "Iter #", " img/sec per GPU", "Total img/sec on ",
                           "0: ", " 3: ", "[rank1]:", "[1,2]<stdout>:", "[default0]: ", "\n", "\r", "\r\n", "\t",
                           "nan", "inf", "-", ".", ":", "1", "7", "99", "1e308", "2020-09-15 14:29:13.473765",
                           "I0826 15:12:50.113950 1 x.py:1] ", "W", "E1", "out of memory", "OOM", "Error", "rror",
                           "mirrored", "Exception", "Killed", "*** STEP 1 ON n CANCELLED AT x ***", "\x00", "\x1c", "\ufffd",
                           "é", "٣", "\u00a0", "\u212a", "loss: ", "Devices: [a, b]", "Batch size: 8 global"])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(st.lists(_TOKENS, max_size=150), st.sampled_from(sorted(ls.WRITERS)), st.sampled_from([3, 16, 4096]))
def test_fuzz_token_soup_reads_the_same_both_ways(tmp_path, spy, monkeypatch, tokens, suite, block):
    monkeypatch.setattr(blocks, "BLOCK", block)
    p = tmp_path / "soup.log"
    p.write_text("".join(tokens), encoding="utf-8", newline="")
    fast, ref = both(suite, p, ParseContext(nodes=1, gpus_per_node=2, batch_size=4, warmup_steps=2, measure_steps=5,
                                            options={"batches_per_iter": 1}), spy)
    assert fast == ref


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=3000), st.sampled_from(sorted(ls.WRITERS)))
def test_fuzz_random_bytes_read_the_same_both_ways(tmp_path, spy, monkeypatch, data, suite):
    monkeypatch.setattr(blocks, "BLOCK", 97)
    p = tmp_path / "bytes.log"
    p.write_bytes(data)
    fast, ref = both(suite, p, ParseContext(nodes=2, gpus_per_node=2, batch_size=8), spy)
    assert fast == ref


def test_sieve_needle_rules():
    with pytest.raises(ValueError):
        npblocks.Sieve(["a\nb"])
    with pytest.raises(ValueError):
        npblocks.Sieve([""])
    s = npblocks.Sieve(["DLL", "#"], ["oom-kill"])
    data = b"xx DLL yy\nOOM-KILL\nno\n#"
    hits = set(s.hits(data, len(data)).tolist())
    assert {3, 4} & hits and any(10 <= h < 18 for h in hits) and len(data) - 1 in hits
    assert not any(19 <= h < 21 for h in hits)


# -------------------------------------------------- tf2: short lines instead of a needle per glog header

_LABELS = ("", "0: ", " 3: ", "        0: ", "12: ", "[rank0]:", "[rank0]: ", "[default1]:", "[1,0]<stdout>:",
           "[1,0]<stdout>: ", "[12,3]<stderr>:", "\x1c0: ", "\t0: ")


# glog lines after their level: well formed; a thread id that is no number, a "]" inside the header, a header
# without the space after "]" (each no glog header: a line cut inside one has no "]" but maybe its last character);
# another writer's torn bytes before a whole header and a cut keyword
_GLOG_BODIES = ("0826 15:12:50.113950 140405777909504 gpu_device.cc:1871] Adding visible gpu devices: 0 ",
                "0826 15:12:50.113950 1404057x gpu_device.cc:1871] Train Step",
                "0826 15:12]50.113950 140405777909504 gpu_device.cc:1871] ",
                "0826 15:12:50.113950 140405777909504 keras_utils.py:133]TimeHistory: 1 seconds",
                "0826 15:12:5I0826 15:12:50.113950 140405777909504 keras_utils.py:133] TimeHis")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(_LABELS), st.integers(0, 130), st.sampled_from("IWEFx1 "),
                          st.integers(0, 110), st.integers(0, 40), st.sampled_from(_GLOG_BODIES)), max_size=40),
       st.sampled_from([5, 64, 4096]))
def test_fuzz_tf2_cut_records_and_short_lines_read_the_same_both_ways(tmp_path, spy, monkeypatch, parts, block):
    """tf2 sends the block path the lines holding its keywords and the lines whose text (label removed) is shorter
    than 100 characters and starts with I, W, E or F (unlabelled, with Hyperscan: those cut inside or right after a
    glog header): a TimeHistory record cut anywhere (its head and tail on two lines of the same rank), glog lines,
    well formed or not, of about 100 characters under every label form, noise starting otherwise."""
    sys.path.insert(0, str(TESTS))
    from test_tf2 import dlperf_rn50_log

    monkeypatch.setattr(blocks, "BLOCK", block)
    log = dlperf_rn50_log("1n2g", 575.76).splitlines()
    out = []
    for i, (label, length, first, cut, pad, glog) in enumerate(parts):
        record = log[i % len(log)].replace("keras_utils.py", "k" * pad + "eras_utils.py")  # headers up to ~100
        if cut and cut < len(record):  # a record split by buffering: head, then tail
            out += [label + record[:cut], label + record[cut:]]
        body = (first + glog + "x" * 80)[:length]
        out.append(label + body)
    p = tmp_path / "tf2.log"
    p.write_text("\n".join(out) + "\n")
    for ctx in (ParseContext(nodes=1, gpus_per_node=2, batch_size=128, warmup_steps=100, measure_steps=500),
                ParseContext(nodes=1, gpus_per_node=2, batch_size=128, warmup_steps=0, measure_steps=100)):
        fast, ref = both("tf2/resnet50", p, ctx, spy)
        assert fast == ref


@pytest.mark.parametrize("label", ["", "0: ", "[1,0]<stdout>: "])
def test_tf2_records_cut_near_100_characters_read_the_same_both_ways(spy, tmp_path, label):
    """TimeHistory records cut inside their keyword, with glog headers long enough that the head is 80 to 110
    characters: the line path glues each head (shorter than 100: a possible fragment) to its tail; so must the
    block path (a rule of 95 characters loses the records whose head is 95 to 99 long)."""
    sys.path.insert(0, str(TESTS))
    from test_tf2 import dlperf_rn50_log

    log = dlperf_rn50_log("1n2g", 575.76).splitlines()
    for pad in range(20, 56):
        out = []
        for i, rec in enumerate(log):
            rec = rec.replace("keras_utils.py", "k" * pad + "eras_utils.py")
            at = rec.find("TimeHistory")
            cut = at + (pad + i) % 13 if at > 0 else 0
            out += [label + rec[:cut], label + rec[cut:]] if cut else [label + rec]
        p = tmp_path / f"cut{pad}.log"
        p.write_text("\n".join(out) + "\n")
        fast, ref = both("tf2/resnet50", p, ParseContext(nodes=1, gpus_per_node=2, batch_size=128, warmup_steps=100,
                                                         measure_steps=500), spy)
        assert fast == ref, pad
