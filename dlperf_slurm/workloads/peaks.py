"""A small table of GPU peak TFLOP/s, for MFU: torch-free, so a log parser can read it too (the GPT suites judge
their achieved TFLOP/s against the GPUs named in the job's provenance). :mod:`.flops` re-exports it."""

from __future__ import annotations

# Dense (no sparsity) peak TFLOP/s per GPU from NVIDIA's data sheets: fp32 = CUDA cores without tensor cores,
# tf32 / 16bit / fp8 = tensor cores (fp8: Hopper and Ada; half the data sheets' "with sparsity" figure). Matched by
# substring of torch.cuda.get_device_name(), most specific first.
PEAK_TFLOPS: list[tuple[str, dict[str, float]]] = [
    ("H200", {"fp32": 67.0, "tf32": 494.7, "16bit": 989.4, "fp8": 1978.9}),
    ("H100 PCIe", {"fp32": 51.2, "tf32": 378.0, "16bit": 756.0, "fp8": 1513.0}),
    ("H100", {"fp32": 66.9, "tf32": 494.7, "16bit": 989.4, "fp8": 1978.9}),  # SXM5
    ("A100", {"fp32": 19.5, "tf32": 156.0, "16bit": 312.0}),
    ("A800", {"fp32": 19.5, "tf32": 156.0, "16bit": 312.0}),
    ("L40S", {"fp32": 91.6, "tf32": 183.0, "16bit": 362.0, "fp8": 733.0}),
    ("A10", {"fp32": 31.2, "tf32": 62.5, "16bit": 125.0}),
    ("V100", {"fp32": 15.7, "16bit": 125.0}),  # SXM2; no TF32 / bf16 on Volta
    ("T4", {"fp32": 8.1, "16bit": 65.0}),
]


def peak_tflops(device_name: str, basis: str) -> float | None:
    """Peak TFLOP/s per GPU for ``basis`` in {"fp32", "tf32", "16bit", "fp8"}; None when the GPU is not in the table
    (or has no such tensor cores)."""
    for key, peaks in PEAK_TFLOPS:
        if key.lower() in device_name.lower():
            return peaks.get(basis)
    return None


def peak_basis(precision: str, tf32_enabled: bool) -> str:
    """Which peak a run is judged against: 16-bit tensor cores for amp/fp16/bf16, FP8 ones for fp8, TF32 when
    enabled, else fp32."""
    if precision in ("amp", "fp16", "bf16"):
        return "16bit"
    if precision in ("fp8", "mxfp8"):  # MXFP8 runs on the FP8 tensor cores
        return "fp8"
    if precision == "nvfp4":
        return "fp4"  # no GPU of the table has an FP4 figure yet: no MFU rather than another precision's
    return "tf32" if tf32_enabled else "fp32"


#: GPUs by the low-precision formats their tensor cores lack, matched as PEAK_TFLOPS is (by substring, most specific
#: first): FP8 came with Hopper and Ada (compute capability 8.9+), MXFP8 and NVFP4 with Blackwell (10.0+). Only a GPU
#: named here is refused a format; any other is left to its program, which checks at start-up.
_BEFORE_FP8 = ("A100", "A800", "A30", "A40", "A10", "V100", "T4", "P100")
_BEFORE_BLOCK_FORMATS = ("H200", "H100", "H800", "H20", "L40S", "L40", "L4", *_BEFORE_FP8)
_FORMATS = {"fp8": ("FP8", "Hopper or Ada (compute capability 8.9+)", _BEFORE_FP8),
            "mxfp8": ("MXFP8", "Blackwell", _BEFORE_BLOCK_FORMATS),
            "nvfp4": ("NVFP4", "Blackwell", _BEFORE_BLOCK_FORMATS)}


def precision_reason(precision: str, gpu_model: str) -> str | None:
    """Why a GPU model cannot run a precision's tensor-core format (``fp8``, ``mxfp8``, ``nvfp4``), or None: it can,
    or it is not known here."""
    if precision not in _FORMATS or not gpu_model:
        return None
    name, needs, lacking = _FORMATS[precision]
    low = gpu_model.lower()
    for key in lacking:
        if key.lower() in low and not any(b.lower() in low for b in ("B200", "B300", "GB200", "GB300")):
            return f"{name} ({precision}) needs a {needs} GPU, which {gpu_model} is not"
    return None
