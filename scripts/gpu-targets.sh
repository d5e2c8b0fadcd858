#!/usr/bin/env bash
# Target logprobs and ranks (fs_options.target_tokens, perf-notes 53):
# fs-demo at Qwen3-8B, B = 1, 16, 64, 256, the plain call, with ranks, with
# targets.  Usage (on the device, the build at ./build):
# bash scripts/gpu-targets.sh; the table to stdout.
set -u
d=./build/fs-demo
for B in 1 16 64 256; do
  for what in plain ranks targets; do
    extra=""
    [ "$what" = ranks ] && extra="--ranks 1"
    [ "$what" = targets ] && extra="--targets 1"
    # shellcheck disable=SC2086  # extra is a list of arguments
    line=$(timeout 60 "$d" --model qwen3-8b --batch "$B" --iters 50 --check 0 $extra 2>&1 |
      grep "us per call" | tail -1)
    echo "B=$B $what: $line"
  done
done
