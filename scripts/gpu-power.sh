#!/usr/bin/env bash
# Power and clocks behind the tuner/bench gap at large batches (~1 minute):
# for each B in ${BATCHES:-128 256} and T in 1, 0, a short burst after 3 s
# idle (fs-demo, 20 calls back to back) and then a sustained run (~6 s),
# with nvidia-smi sampling power draw and SM clock every 200 ms.  Shipped
# defaults only.  Writes ${OUT:-out}/power.log (fs-demo lines, each tagged
# with its start and end time) and power-samples.csv.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out}; mkdir -p "$out"
log=$out/power.log; : > "$log"
export FS_TUNING_DB=off
nvidia-smi --query-gpu=timestamp,power.draw,clocks.sm,temperature.gpu,clocks_throttle_reasons.active \
  --format=csv -lms 200 > "$out/power-samples.csv" 2>&1 &
smi=$!
for b in ${BATCHES:-128 256}; do
  for t in 1 0; do
    for n in 20 ${SUSTAINED:-15000}; do
      [ "$n" = 20 ] && sleep 3
      s=$(date +%T.%N); r=$(./build/fs-demo --model qwen3-8b --batch "$b" --temperature "$t" \
        --iters "$n" --check 0 2>&1 | grep -E "per call"); e=$(date +%T.%N)
      echo "B=$b T=$t iters=$n start=$s end=$e | $r" | tee -a "$log"
    done
  done
done
kill $smi
