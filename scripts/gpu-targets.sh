#!/usr/bin/env bash
# Target logprobs and ranks (fs_options.target_tokens, perf-notes 53):
# fs-demo at Qwen3-8B, B = 1, 16, 64, 256, two rounds of the plain call,
# with ranks, with targets (fsamp_target's log-sum-exp a float4 at a time,
# the default) and with targets a logit at a time (FS_TARGET_QUAD=0).
# Usage (on the device, the build at ./build): [ROUNDS=n] bash scripts/gpu-targets.sh;
# the table to stdout.
set -u
d=./build/fs-demo
for round in $(seq 1 "${ROUNDS:-2}"); do
  for B in 1 16 64 256; do
    for what in plain ranks targets targets-logit; do
      extra=""
      quad=1
      [ "$what" = ranks ] && extra="--ranks 1"
      [ "$what" != plain ] && [ "$what" != ranks ] && extra="--targets 1"
      [ "$what" = targets-logit ] && quad=0
      # shellcheck disable=SC2086  # extra is a list of arguments
      line=$(FS_TARGET_QUAD=$quad timeout 60 "$d" --model qwen3-8b --batch "$B" --iters 50 \
        --check 0 $extra 2>&1 | grep "us per call" | tail -1)
      echo "round $round B=$B $what: ${line#*: }"
    done
  done
done
