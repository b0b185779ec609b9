#!/usr/bin/env bash
# On a machine with an NVIDIA GPU and numbatok's test dependencies already installed: the GPU tests,
# then the GPT-2 throughput and latency table (numbatok cuda and cpu, tokenizers, and
# gigatoken / fastokens when installed; big.txt paragraphs x4), each configuration in a fresh process.
# The corpus is looked for in $NUMBATOK_CORPUS, ../shared/corpus, then .device-carry/corpus.
# Budget: under 5 minutes on an H200 machine (hard limits: 150 s of tests, 145 s of benchmark; the
# benchmark prints each configuration as it finishes, most important first).
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
for c in "${NUMBATOK_CORPUS:-}" ../shared/corpus .device-carry/corpus; do
    if [ -n "$c" ] && [ -f "$c/big.txt" ]; then export NUMBATOK_CORPUS="$c"; break; fi
done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
python3 -c "import numba, numpy; from numba import cuda; print('numba', numba.__version__, 'numpy', numpy.__version__, 'gpu', cuda.is_available())"
timeout 150 python3 -m pytest -q -x tests/test_cuda_device.py tests/test_gpu_paths.py -p no:cacheprovider
rc=$?
timeout 145 python3 benchmarks/bench.py --repeat 4 --runs 3 --latency --timeout 60 \
    --configs "numbatok cuda (bytes on device -> ids on device),numbatok cuda (list[str] -> host arrays),numbatok cpu,gigatoken encode_batch (awkward array),fastokens encode_batch_flat (buffers),tokenizers encode_batch" \
    ${OUT:+--json "$OUT/bench.json" --png "$OUT/bench.png"}
exit $(( rc || $? ))
