#!/usr/bin/env bash
# On a machine with an NVIDIA GPU and numbatok's test dependencies already installed: the GPU tests,
# then the GPT-2 throughput and latency table (numbatok cuda and cpu, gigatoken and fastokens when
# installed; big.txt paragraphs x4; ids checked against `tokenizers` first), each configuration in a
# fresh process, then files -> token shards (`preprocess` of a .jsonl file against gigatoken fed the
# same file), then a profile of the GPU path's stages and the GPU path's cold start.
# The corpus is looked for in $NUMBATOK_CORPUS, ../shared/corpus, then .device-carry/corpus. Peer wheels
# (gigatoken, awkward, fastokens, snaptokens, tokie) in $NUMBATOK_WHEELS or .whl are installed into a
# temporary folder first.
# Budget: about 3 minutes on an H200 machine with the kernels cached, 5 at most (hard limits: 85 s of
# tests, 100 s of benchmark, 35 s of preprocess, 30 s of profile, 25 s of cold start;
# each benchmark prints a configuration as it finishes, most important first).
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
for c in "${NUMBATOK_CORPUS:-}" ../shared/corpus .device-carry/corpus; do
    if [ -n "$c" ] && [ -f "$c/big.txt" ]; then export NUMBATOK_CORPUS="$c"; break; fi
done
wheels="${NUMBATOK_WHEELS:-.whl}"
if compgen -G "$wheels/*.whl" >/dev/null; then
    peers="$(mktemp -d)"
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$peers" "$wheels"/*.whl \
        && export PYTHONPATH="$PYTHONPATH:$peers"
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
python3 -c "import numba, numpy; from numba import cuda; print('numba', numba.__version__, 'numpy', numpy.__version__, 'gpu', cuda.is_available())"
timeout 85 python3 -m pytest -q tests/test_cuda_device.py -p no:cacheprovider --durations=5 \
    $(python3 -c "import xdist" 2>/dev/null && echo "-n 9")
rc=$?
timeout 100 python3 benchmarks/bench.py --repeat 4 --runs 3 --latency --timeout 60 \
    --configs "numbatok cuda (list[str] -> host arrays),gigatoken encode_batch (awkward array),numbatok cuda (bytes on device -> ids on device),numbatok cpu,snaptokens encode_batch_flat (buffers)" \
    ${OUT:+--json "$OUT/bench.json" --png "$OUT/bench.png"}
rc=$(( rc || $? ))
timeout 35 python3 benchmarks/preprocess_bench.py --repeat 4 --runs 1 --formats jsonl --timeout 20 \
    --configs "numbatok preprocess (cuda),gigatoken encode_batch + json.loads + np.save,numbatok preprocess (cpu)" \
    ${OUT:+--json "$OUT/preprocess.json"}
rc=$(( rc || $? ))
timeout 30 python3 benchmarks/gpu_profile.py
rc=$(( rc || $? ))
timeout 25 python3 benchmarks/edge_cases.py --cold-start-only cuda
exit $(( rc || $? ))
