#!/usr/bin/env bash
# A logit bias under FS_NOISE_GROUP16 (perf-notes 52b) against the per-token
# noise: fs-demo at Qwen3-8B, B = 1, 16, 64, 256, with 16 entries a row, then
# 256 entries with a repetition penalty, then none.  Usage (on the device,
# the build at ./build): bash scripts/gpu-group-bias.sh; the table to stdout.
set -u
d=./build/fs-demo
for B in 1 16 64 256; do
  for noise in token group16; do
    for n in 0 16 256; do
      extra=""
      [ "$n" = 256 ] && extra="--repetition-penalty 1.3"
      # shellcheck disable=SC2086  # extra is a list of arguments
      line=$(timeout 60 "$d" --model qwen3-8b --batch "$B" --iters 50 --check 0 \
        --noise "$noise" --logit-bias "$n" $extra 2>&1 | grep "us per call" | tail -1)
      echo "B=$B noise=$noise bias=$n: $line"
    done
  done
done
