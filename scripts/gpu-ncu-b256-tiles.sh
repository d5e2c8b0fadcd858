#!/usr/bin/env bash
# ncu of Qwen3-8B B = 256 under three tiles, T = 1 and 0 (perf-notes 17b): the
# shipped 128 x 256 cooperative tile against 128 x 128 tiles (two batch tiles),
# overlapped and cooperative: duration, clock, tensor-pipe and L2 shares, the
# L2 and crossbar bytes per second.  One text file per case under ${OUT:-out},
# a summary on stdout; ~45 s.  Run in the twelfth session (call 4,
# docs/data/ncu-s12-b256-tiles.txt).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out}; mkdir -p "$out"
export FS_TUNING_DB=off
for v in wg_v128_b256_k64_g2_s4_c1_co_e64 wg_v128_b128_k64_g2_s4_c1_ov_e128 wg_v128_b128_k64_g2_s4_c1_co_e128; do
  for t in 1 0; do
    f="$out/ncu-$v-t$t.txt"
    FS_VARIANT=fsamp_bf16_sm90a_$v timeout 150 ncu --clock-control none -k fsamp_main --launch-skip 3 --launch-count 1 \
      --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
      --metrics "regex:sm__pipe_tensor.*cycles_active.avg.pct_of_peak_sustained_(active|elapsed),lts__t_sectors_srcunit_tex.sum,lts__t_bytes.sum.per_second,l1tex__m_xbar2l1tex_read_bytes.sum.per_second,sm__cycles_elapsed.avg,smsp__inst_executed.sum" \
      ./build/fs-demo --model qwen3-8b --batch 256 --temperature $t --iters 5 --check 0 > "$f" 2>&1
    echo "== $v T=$t"; grep -E "variant|Duration|SM Frequency|Throughput|tensor|lts__|xbar|Issue Slots|Eligible|cycles_elapsed|inst_executed|Hit Rate|rror" "$f" | head -30
  done
done
