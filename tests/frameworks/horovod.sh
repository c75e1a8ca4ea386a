#!/bin/bash
# Builds Horovod 0.28.1 into the venv $1 (venvs.py runs this after horovod.txt's pip lines).
# 0.28.1 (2023-06, the last release, sdist only) hardcodes C++14; torch >= 2.1 needs C++17 (horovod/horovod#3996,
# fixed on master by PR #3998, never released). The two CMAKE_CXX_STANDARD lines are raised to 17 (the top-level one
# too: the bundled gloo must match or the link fails on gloo::rendezvous::Store::kDefaultTimeout), and pip builds
# it without isolation so that it sees the venv's torch. About 130 s of compile on 2 cores.
set -euo pipefail
V=$1
for tool in cmake g++ mpicxx; do
  command -v "$tool" >/dev/null || { echo "horovod.sh: no $tool on PATH: Horovod compiles from source" \
    "(apt-get install cmake g++ libopenmpi-dev)"; exit 1; }
done
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
"$V/bin/python" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: -d "$W" horovod==0.28.1
tar xzf "$W/horovod-0.28.1.tar.gz" -C "$W"
S=$W/horovod-0.28.1
sed -i 's/^set(CMAKE_CXX_STANDARD 14)/set(CMAKE_CXX_STANDARD 17)/' "$S/CMakeLists.txt"
sed -i 's/    set(CMAKE_CXX_STANDARD 14)/    set(CMAKE_CXX_STANDARD 17)/' "$S/horovod/torch/CMakeLists.txt"
grep -q '^set(CMAKE_CXX_STANDARD 17)' "$S/CMakeLists.txt"
grep -q '    set(CMAKE_CXX_STANDARD 17)' "$S/horovod/torch/CMakeLists.txt"
HOROVOD_WITH_PYTORCH=1 HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1 HOROVOD_WITH_MPI=1 HOROVOD_WITH_GLOO=1 \
    "$V/bin/python" -m pip install -q --disable-pip-version-check --no-cache-dir --no-build-isolation "$S"
# what it was built with: PyTorch, MPI and Gloo must all be there
PATH=$V/bin:$PATH "$V/bin/horovodrun" --check-build | tee "$W/check"
grep -q '\[X\] PyTorch' "$W/check" && grep -q '\[X\] MPI' "$W/check" && grep -q '\[X\] Gloo' "$W/check"
