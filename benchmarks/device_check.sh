#!/usr/bin/env bash
# On a machine with an NVIDIA GPU and numbatok's test dependencies already installed: the GPU tests,
# then the GPT-2 throughput and latency table (numbatok cuda and cpu, tokenizers, and
# gigatoken / fastokens when installed; big.txt paragraphs x4), each configuration in a fresh process,
# then files -> token shards (`preprocess` of a .jsonl file against gigatoken fed the same file), then
# a profile of the GPU path's stages.
# The corpus is looked for in $NUMBATOK_CORPUS, ../shared/corpus, then .device-carry/corpus.
# Budget: about 5 minutes at most on an H200 machine (hard limits: 140 s of tests, 100 s of benchmark,
# 25 s of preprocess, 40 s of profile; each benchmark prints a configuration as it finishes, most
# important first).
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
for c in "${NUMBATOK_CORPUS:-}" ../shared/corpus .device-carry/corpus; do
    if [ -n "$c" ] && [ -f "$c/big.txt" ]; then export NUMBATOK_CORPUS="$c"; break; fi
done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
python3 -c "import numba, numpy; from numba import cuda; print('numba', numba.__version__, 'numpy', numpy.__version__, 'gpu', cuda.is_available())"
timeout 140 python3 -m pytest -q tests/test_cuda_device.py -p no:cacheprovider --durations=5 \
    $(python3 -c "import xdist" 2>/dev/null && echo "-n 5")
rc=$?
timeout 100 python3 benchmarks/bench.py --repeat 4 --runs 3 --latency --timeout 60 \
    --configs "numbatok cuda (bytes on device -> ids on device),numbatok cuda (list[str] -> host arrays),numbatok cpu,gigatoken encode_batch (awkward array),fastokens encode_batch_flat (buffers),tokenizers encode_batch" \
    ${OUT:+--json "$OUT/bench.json" --png "$OUT/bench.png"}
rc=$(( rc || $? ))
timeout 25 python3 benchmarks/preprocess_bench.py --repeat 4 --runs 1 --formats jsonl --timeout 20 \
    --configs "numbatok preprocess (cuda),gigatoken encode_batch + json.loads + np.save,numbatok preprocess (cpu)" \
    ${OUT:+--json "$OUT/preprocess.json"}
rc=$(( rc || $? ))
timeout 40 python3 benchmarks/gpu_profile.py
exit $(( rc || $? ))
