#!/usr/bin/env bash
# Top logprobs and ranks under FS_NOISE_GROUP16 (perf-notes 52) against the
# per-token noise, on one GPU through NCCL with one rank (fs-bench-tp's
# "one" column is the one-GPU call, fused_us the tensor-parallel call):
# Qwen3-8B, B = 1, 16, 64, 256, top 20 with logprobs, then ranks alone, then
# the plain call (no lists, no ranks).  Usage (on the device, the build at
# ./build): OUT=dir bash scripts/gpu-group-toplp.sh; CSVs and a log into $OUT.
set -u
out=${OUT:-.}
b=./build/fs-bench-tp
for noise in token group16; do
  for opts in "--top-logprobs 20 --logprobs 1" "--draw-ranks 1" ""; do
    tag=$(echo "${opts:-plain}" | tr -d ' -' | cut -c1-20)
    echo "== noise $noise, options: ${opts:-none}"
    # shellcheck disable=SC2086  # opts is a list of arguments
    timeout 120 "$b" --ranks 1 --model qwen3-8b --batch 1,16,64,256 --reps 50 \
      --noise "$noise" $opts --csv "$out/group-toplp-$noise-$tag.csv" || echo "exit $?"
  done
done
