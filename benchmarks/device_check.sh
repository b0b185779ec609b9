#!/usr/bin/env bash
# On a machine with an NVIDIA GPU and numbatok's test dependencies already installed: the GPU tests,
# then the GPT-2 throughput and latency table (numbatok cuda and cpu, tokenizers, and
# gigatoken / fastokens when installed; big.txt paragraphs x4), each configuration in a fresh process,
# then a profile of the GPU path's stages.
# The corpus is looked for in $NUMBATOK_CORPUS, ../shared/corpus, then .device-carry/corpus.
# Budget: under 6 minutes on an H200 machine (hard limits: 170 s of tests, 130 s of benchmark, 45 s
# of profile; the benchmark prints each configuration as it finishes, most important first).
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
for c in "${NUMBATOK_CORPUS:-}" ../shared/corpus .device-carry/corpus; do
    if [ -n "$c" ] && [ -f "$c/big.txt" ]; then export NUMBATOK_CORPUS="$c"; break; fi
done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
python3 -c "import numba, numpy; from numba import cuda; print('numba', numba.__version__, 'numpy', numpy.__version__, 'gpu', cuda.is_available())"
timeout 170 python3 -m pytest -q tests/test_cuda_device.py -p no:cacheprovider --durations=5 \
    $(python3 -c "import xdist" 2>/dev/null && echo "-n 5")
rc=$?
timeout 130 python3 benchmarks/bench.py --repeat 4 --runs 3 --latency --timeout 60 \
    --configs "numbatok cuda (bytes on device -> ids on device),numbatok cuda (list[str] -> host arrays),numbatok cpu,gigatoken encode_batch (awkward array),fastokens encode_batch_flat (buffers),tokenizers encode_batch" \
    ${OUT:+--json "$OUT/bench.json" --png "$OUT/bench.png"}
rc=$(( rc || $? ))
timeout 45 python3 benchmarks/gpu_profile.py
exit $(( rc || $? ))
