export FS_LOG=0
ctest --test-dir build -L gpu -R "test_toplp|test_filter|test_bias|bias_long|test_logprobs|python|test_tp_filter|bad_input" -E nccl --output-on-failure -j4 --timeout 300 > $OUT/gpu-tests.log 2>&1; grep -E "tests passed|Failed|\*\*\*" $OUT/gpu-tests.log; grep -E "^ok |CHECK" $OUT/gpu-tests.log | grep -v "^ok [a-z]* [a-z0-9]* B=[0-9]*:" | head -30
for b in 1 64 256; do
  ncu --clock-control none -k regex:"fsamp_toplp" -c 4 --metrics gpu__time_duration.sum --csv ./build/fs-demo --model qwen3-8b --batch $b --iters 1 --check 0 --top-logprobs 20 2>/dev/null | grep -E "fsamp" | awk -F'","' -v b=$b '{print "B=" b, $5, $(NF)}' | tail -2
done > $OUT/ncu.txt 2>&1; cat $OUT/ncu.txt
us() { timeout 60 ./build/fs-demo --model qwen3-8b --iters 30 --check 0 "$@" 2>&1 | awk '/us per call/ { for (i = 1; i <= NF; i++) if ($i == "us") print $(i - 1) }' | tail -1; }
for bg in "1 33" "1 132" "64 1" "64 2" "64 8" "256 1" "256 4"; do
  set -- $bg; echo "B=$1 G=$2 top20 $(FS_TOPLP_SLICES=$2 bash -c "$(declare -f us); us --batch $1 --top-logprobs 20") us"
done | tee $OUT/sweep.txt
BATCHES="1 16 64 256" OUT=$OUT timeout 200 bash scripts/gpu-toplp.sh
