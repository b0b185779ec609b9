#!/usr/bin/env bash
# On a machine with an NVIDIA GPU and numbatok's test dependencies already installed: every kernel
# compiled once (a fresh machine has none cached; four processes at once), the GPU tests, then
# the GPT-2 throughput and latency table (numbatok cuda and cpu, gigatoken when installed; big.txt
# paragraphs x4; ids checked against `tokenizers` first), each configuration in a fresh process, then
# files -> token shards (`preprocess` of a .jsonl file against gigatoken fed the same file), then a
# profile of the GPU path's stages and the GPU path's cold start.
# The corpus is looked for in $NUMBATOK_CORPUS, ../shared/corpus, then .device-carry/corpus. Peer wheels
# (gigatoken, awkward, fastokens, snaptokens, tokie) in $NUMBATOK_WHEELS or .whl are installed into a
# temporary folder first. CHECK="compile tests bench preprocess profile coldstart" (the default) names
# the parts to run.
# Budget: about 5 minutes on a fresh H200 machine (hard limits: 200 s of compiling, seconds where the
# kernels are cached already; 60 s of tests, 100 s of benchmark, 35 s of preprocess, 30 s of profile,
# 25 s of cold start; each benchmark prints a configuration as it finishes, most important first).
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
CHECK="${CHECK:-compile tests bench preprocess profile coldstart}"
want() { [[ " $CHECK " == *" $1 "* ]]; }
rc=0
if want compile; then
    # every path the checks take, on both backends and for both kinds of vocabulary, in four processes
    # at once (each compiles on one core; a kernel both need is compiled twice, and the cache keeps one)
    warm='import sys, numbatok
docs = ["Hello world, a first call. " * 40 + "x" * 70, "caf\u00e9 \u4e00\u4e8c " * 9] * 1000
tok = numbatok.Tokenizer.from_pretrained(sys.argv[2], device=sys.argv[1])
tok.encode_ragged(docs).to_host(), tok.encode_ragged(docs, return_offsets=True).to_host()
tok.encode_batch(docs[:300]), tok.encode_ragged(docs[:1]), tok.encode_ragged(docs[:64])
print(sys.argv[1], sys.argv[2], "compiled")'
    pids=()
    for device in cpu cuda; do
        for name in gpt2 bert-base-uncased; do
            timeout 200 python3 -c "$warm" "$device" "$name" & pids+=($!)
        done
    done
    for p in "${pids[@]}"; do
        wait "$p"
        rc=$(( rc || $? ))
    done
fi
if want tests; then
    timeout 60 python3 -m pytest -q tests/test_cuda_device.py -p no:cacheprovider --durations=5 -W ignore \
        $(python3 -c "import xdist" 2>/dev/null && echo "-n 9")
    rc=$(( rc || $? ))
fi
if want bench; then
    timeout 100 python3 benchmarks/bench.py --repeat 4 --runs 3 --latency --timeout 60 \
        --configs "numbatok cuda (list[str] -> host arrays),gigatoken encode_batch (awkward array),numbatok cuda (bytes on device -> ids on device),numbatok cpu" \
        ${OUT:+--json "$OUT/bench.json" --png "$OUT/bench.png"}
    rc=$(( rc || $? ))
fi
if want preprocess; then
    timeout 35 python3 benchmarks/preprocess_bench.py --repeat 4 --runs 1 --formats jsonl --timeout 20 \
        --configs "numbatok preprocess (cuda),gigatoken encode_batch + json.loads + np.save,numbatok preprocess (cpu)" \
        ${OUT:+--json "$OUT/preprocess.json"}
    rc=$(( rc || $? ))
fi
if want profile; then
    timeout 30 python3 -W ignore benchmarks/gpu_profile.py
    rc=$(( rc || $? ))
fi
if want coldstart; then
    timeout 25 python3 benchmarks/edge_cases.py --cold-start-only cuda
    rc=$(( rc || $? ))
fi
exit $rc
