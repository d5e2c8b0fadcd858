export FS_LOG=0
ctest --test-dir build -L gpu -R "test_toplp" --output-on-failure > $OUT/gpu-tests.log 2>&1; grep -E "tests passed|^ok |CHECK" $OUT/gpu-tests.log | head -20
for b in 1 64 256; do
  ncu --clock-control none -k regex:"fsamp_(toplp|filter)" -c 6 --metrics gpu__time_duration.sum --csv ./build/fs-demo --model qwen3-8b --batch $b --iters 1 --check 0 --top-logprobs 20 2>/dev/null | grep -E "fsamp" | awk -F'","' -v b=$b '{print "B=" b, $5, $(NF)}' | tail -3
done > $OUT/ncu.txt 2>&1; cat $OUT/ncu.txt
us() { timeout 60 ./build/fs-demo --model qwen3-8b --iters 30 --check 0 "$@" 2>&1 | awk '/us per call/ { for (i = 1; i <= NF; i++) if ($i == "us") print $(i - 1) }' | tail -1; }
for bg in "1 auto" "1 66" "1 132" "64 auto" "64 2" "64 8" "64 16" "256 auto" "256 2" "256 5" "256 10"; do
  set -- $bg; if [ $2 = auto ]; then e=""; else e="FS_TOPLP_SLICES=$2"; fi
  echo "B=$1 G=$2 top20 $(env $e bash -c "$(declare -f us); us --batch $1 --top-logprobs 20") us"
done | tee $OUT/sweep.txt
