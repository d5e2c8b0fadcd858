#!/usr/bin/env bash
# The session's last kernel pass on the H200, in steps that fit 10-minute
# device calls: STEPS (default "tests qwen llama fp16 fp16big") picks them:
#   tests  the GPU tests: the pathwise, distribution, ties, group and mask runs
#          of every family six at a time (correctness checks, bound by the CPU
#          reference), the rest one at a time; ~3-4 minutes (TESTS=<regex>:
#          only those, one at a time);
#   qwen / llama / fp16   fs-tune of Qwen3-8B bf16, Llama 3 70B bf16,
#          Qwen3-8B fp16 (FILTER=<substring[,substring...]>: only those
#          variants), into one database, exported as $OUT/defaults.db together with the
#          winners of MERGE=<db> if given (an earlier call's export);
#          BATCHES=<list> tunes only those buckets (e.g. 1,2,4,8,16,32,64 after
#          a runtime change that touches the memory-bound tiles), and then
#          KEEP=<list> takes from MERGE only the winners of those buckets
#          (e.g. 128,256), so an old measurement of a re-tuned bucket cannot
#          outrank the new ones;
#   fp16big  a top-up of Qwen3-8B fp16 at B = 128, 256 within _g2_s4_ (c1 and c2)
#          (the fp16 step's budget runs out before its large buckets);
#   presets  fs-tune of each model preset in PRESETS (e.g. "qwen3-0.6b llama3.2-1b")
#          at BATCHES (required), bf16, BUDGET seconds each (default 32; FILTER
#          applies), MERGE's winners of those buckets measured again first;
#          reports as one presets.tgz.  MERGE is required (no KEEP): the export
#          is MERGE, e.g. tuning-db/defaults/defaults.db, with these buckets
#          re-tuned (a variant's latest measurement counts);
#   rewin  after a template edit (which retires the shipped winners of its
#          family, a header edit every one: the sources' hashes change),
#          only the shipped winners measured again,
#          for every model preset, dtype and call mode the shipped defaults
#          hold (each at the buckets it has winners for, timed in its mode:
#          the greedy and group16 winners too; ~3-4 minutes instead of ~8 plus
#          the modes' tuning); their reports come back as one rewin.tgz.
#   greedy / group16  the winners of greedy calls and of FS_NOISE_GROUP16
#          calls (fs-tune --mode greedy / group16), stored as modes of
#          their own beside the sampled winners: the presets MMODELS (default
#          qwen3-8b llama3-70b), bf16, at MBATCHES (default 128,256), over MFILTER
#          (default the wt family)
#          plus the sampled winners of those buckets (from MERGE, else the
#          shipped defaults), MBUDGET seconds per model (default 50); with
#          MERGE the export is MERGE plus these winners.  Each candidate is
#          warmed up for MWARMUP_MS (default 150; FS_TUNE_WARMUP_MS) first:
#          at B >= 128 a burst's ranking can differ from the sustained one
#          (perf-notes 22a: wg 8-10% slower than wt under warm-up and in
#          fs-bench rows at Qwen3-8B greedy B = 256, yet first in bursts),
#          and rewin times these two modes' winners with the same warm-up.
#   defaults  the default-path GPU tests (gpu/test_pathwise, _distribution,
#          _determinism, _mode_winners, _tuned_revision: the kernels the
#          defaults choose) on this call's export $OUT/defaults.db if a step
#          made one, else on the shipped defaults; it runs after the export,
#          wherever it stands in STEPS (e.g. STEPS="rewin defaults", ~2 minutes
#          after rewin's ~4: one call).  (TESTS=<regex> of the tests step is a
#          ctest -R regex: "pathwise" alone also names the 13 per-family runs.)
# Copy $OUT/defaults.db to tuning-db/defaults/, then run scripts/gpu-bench.sh
# in a later call (or in the same one, on the export: FS_DEFAULTS_DB=$OUT/defaults.db
# OUT=$OUT/bench SWEEP=only ..., a folder under $OUT so that it comes back).  At most
# 8 files come back from $OUT: the tuning steps' reports end up in one tune.tgz.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out}; mkdir -p "$out"
log=$out/run.log
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw \
  --format=csv > "$log"
steps=${STEPS:-tests qwen llama fp16 fp16big}
# FILTER and BATCHES, as fs-tune options of the qwen, llama and fp16 steps
tune_args=(); [ -n "${FILTER:-}" ] && tune_args=(--filter "$FILTER")
[ -n "${BATCHES:-}" ] && tune_args+=(--batch "$BATCHES")
db=/tmp/fs-final.db; rm -f $db*
export FS_TUNING_DB=off
tuned=0
defaults=0 # the defaults step: run after the export
# The model presets, "name D=.. V=.. title" a line, read once; shape_of NAME
# prints a preset's "D=.. V=..", nothing for an unknown name.
presets_list=$(./build/fs-tune --list-models)
shape_of() { awk -v m="$1" '$1 == m { print $2, $3 }' <<< "$presets_list"; }
# The shipped winners (or MERGE_DB's) of one shape ("D=.. V=..") in one
# dtype and call mode ($3: token, the default, greedy or group16): a
# "bucket variant" line per bucket.  (`fs-tune list` prints " mode=..."
# after B= on the lines of another mode than token.)
shipped() {
  local lines
  lines=$(./build/fs-tune list --db "${MERGE_DB:-tuning-db/defaults/defaults.db}" | grep -F " $2 $1 B=")
  if [ "${3:-token}" = token ]; then lines=$(grep -v ' mode=' <<< "$lines"); else
    lines=$(grep -F " mode=$3 " <<< "$lines"); fi
  sed -n 's/.* B=\([0-9]*\)\( mode=[a-z0-9]*\)\{0,1\} -> \(fsamp_[^ ]*\) .*/\1 \3/p' <<< "$lines"
}
for step in $steps; do
  case $step in
  tests)
    if [ -n "${TESTS:-}" ]; then
      timeout 400 ctest --test-dir build -L gpu -R "$TESTS" --output-on-failure -j1 \
        > "$out/gpu-tests.log" 2>&1
    else
      timeout 420 ctest --test-dir build -L gpu -R "pathwise|distribution|ties|group|mask|logprobs|softcap|bias" --output-on-failure \
        -j6 > "$out/gpu-tests.log" 2>&1
      timeout 240 ctest --test-dir build -L gpu -E "pathwise|distribution|ties|group|mask|logprobs|softcap|bias" --output-on-failure \
        -j1 >> "$out/gpu-tests.log" 2>&1
    fi
    grep -E "tests passed|Failed|\*\*\*" "$out/gpu-tests.log" | tee -a "$log" ;;
  qwen)
    timeout 150 ./build/fs-tune --model qwen3-8b --db $db --budget 100 "${tune_args[@]}" \
      --report "$out/tune-qwen3-8b.csv" 2>&1 | tail -13 | tee -a "$log"; tuned=1 ;;
  llama)
    timeout 170 ./build/fs-tune --model llama3-70b --db $db --budget 120 "${tune_args[@]}" \
      --report "$out/tune-llama3-70b.csv" 2>&1 | tail -13 | tee -a "$log"; tuned=1 ;;
  fp16)
    timeout 100 ./build/fs-tune --model qwen3-8b --dtype fp16 --db $db --budget 60 "${tune_args[@]}" \
      --report "$out/tune-qwen3-8b-fp16.csv" 2>&1 | tail -13 | tee -a "$log"; tuned=1 ;;
  fp16big)
    timeout 70 ./build/fs-tune --model qwen3-8b --dtype fp16 --batch 128,256 --db $db --budget 45 \
      --filter _g2_s4_ --report "$out/tune-qwen3-8b-fp16-topup.csv" 2>&1 | tail -4 | tee -a "$log"
    tuned=1 ;;
  presets)
    # checked before any GPU work: a bad value would export MERGE alone
    pre=${PRESETS:-}; pre=${pre//,/ }; npre=$(wc -w <<< "$pre")
    if [ "$npre" = 0 ] || ! [[ ${BATCHES:-} =~ ^[0-9]+(,[0-9]+)*$ ]] ||
       ! [[ ${BUDGET:-32} =~ ^[0-9]+$ ]] || [ -z "${MERGE:-}" ] || [ -n "${KEEP:-}" ] ||
       [ $(( npre * (${BUDGET:-32} + 70) )) -gt 540 ]; then
      echo "gpu-final.sh: step presets needs PRESETS=<model ...>, BATCHES=<n,n,...>, a whole" \
        "BUDGET (seconds per preset, (BUDGET + 70) x presets <= 540), MERGE=<the defaults" \
        "to re-tune> and no KEEP" | tee -a "$log"
      exit 2
    fi
    for model in $pre; do
      [ -n "$(shape_of "$model")" ] || { echo "gpu-final.sh: unknown preset '$model'" | tee -a "$log"; exit 2; }
    done
    nb=$(( $(tr -cd , <<< "$BATCHES" | wc -c) + 1 ))
    ok=0
    for model in $pre; do
      shape=$(shape_of "$model")
      # MERGE's winners of these buckets measured again first, so that an old
      # measurement cannot outrank this run's (a variant's latest one counts)
      names=$(MERGE_DB="$MERGE" shipped "$shape" bf16 |
              awk -v l=",$BATCHES," 'index(l, "," $1 ",") { print $2 }' | sort -u | paste -sd, -)
      [ -z "$names" ] || timeout 40 ./build/fs-tune --model "$model" --batch "$BATCHES" --db $db \
        --budget 15 --filter "$names" < /dev/null > /dev/null 2>&1
      timeout $(( ${BUDGET:-32} + 30 )) ./build/fs-tune --model "$model" --db $db \
        --budget "${BUDGET:-32}" "${tune_args[@]}" --report "$out/presets-$model.csv" \
        < /dev/null 2>&1 | tail -$(( nb + 5 )) | tee -a "$log"
      [ "${PIPESTATUS[0]}" = 0 ] && ok=1
    done
    (cd "$out" && tar czf presets.tgz presets-*.csv; rm -f presets-*.csv presets-*.svg)
    [ $ok = 1 ] && tuned=1 ;;
  rewin)
    while read -r model shape_d shape_v _; do
      for dtype in bf16 fp16; do
        for mode in token greedy group16; do
          rows=$(shipped "$shape_d $shape_v" "$dtype" "$mode")
          [ -n "$rows" ] || continue # no shipped winners for this preset, dtype and mode
          names=$(awk '{ print $2 }' <<< "$rows" | sort -u | paste -sd, -)
          buckets=$(awk '{ print $1 }' <<< "$rows" | sort -n | paste -sd, -)
          sfx=; [ "$mode" = token ] || sfx=-$mode
          warm=0; [ "$mode" = token ] || warm=${MWARMUP_MS:-150} # as the greedy / group16 steps
          FS_TUNE_WARMUP_MS=$warm timeout 120 ./build/fs-tune --model "$model" --dtype "$dtype" --batch "$buckets" --db $db \
            --mode "$mode" --budget 60 --filter "$names" --report "$out/rewin-$model-$dtype$sfx.csv" \
            < /dev/null 2>&1 | tail -13 | tee -a "$log"
        done
      done
    done <<< "$presets_list"
    # at most 8 files come back from a device call
    (cd "$out" && tar czf rewin.tgz rewin-*.csv && rm -f rewin-*.csv rewin-*.svg)
    tuned=1 ;;
  greedy|group16)
    mb=${MBATCHES:-128,256}
    for model in ${MMODELS:-qwen3-8b llama3-70b}; do
      [ -n "$(shape_of "$model")" ] || { echo "gpu-final.sh: unknown preset '$model'" | tee -a "$log"; exit 2; }
      # the sampled winners of these buckets compete too, timed on these calls
      names=$(MERGE_DB="${MERGE:-}" shipped "$(shape_of "$model")" bf16 |
              awk -v l=",$mb," 'index(l, "," $1 ",") { print $2 }' | sort -u | paste -sd, -)
      filter=${MFILTER:-_wt_}${names:+,$names}
      FS_TUNE_WARMUP_MS=${MWARMUP_MS:-150} timeout $(( ${MBUDGET:-50} + 40 )) \
        ./build/fs-tune --model "$model" --batch "$mb" \
        --mode "$step" --db $db --budget "${MBUDGET:-50}" --filter "$filter" \
        --report "$out/tune-$step-$model.csv" < /dev/null 2>&1 | tail -8 | tee -a "$log"
    done
    tuned=1 ;;
  defaults) defaults=1 ;;
  *) echo "gpu-final.sh: unknown step '$step' (tests, qwen, llama, fp16, fp16big, presets, rewin, greedy, group16, defaults)" | tee -a "$log"
     exit 2 ;;
  esac
done
[ -n "${KEEP:-}" ] && [ -z "${MERGE:-}" ] &&
  echo "gpu-final.sh: KEEP=$KEEP has no effect without MERGE=<db>" | tee -a "$log"
if [ -n "${KEEP:-}" ] && [ -n "${MERGE:-}" ]; then
  echo "gpu-final.sh: from $MERGE only the winners of buckets $KEEP; its other buckets" \
    "are dropped unless this run tuned them (BATCHES=${BATCHES:-all})" | tee -a "$log"
fi
if [ $tuned = 1 ]; then
  if [ -n "${MERGE:-}" ] && [ -n "${KEEP:-}" ]; then
    for b in ${KEEP//,/ }; do
      rm -f /tmp/fs-keep.db*
      ./build/fs-tune export /tmp/fs-keep.db --bucket "$b" --db "$MERGE" 2>&1 | tail -1 | tee -a "$log"
      ./build/fs-tune import /tmp/fs-keep.db --db $db 2>&1 | tail -1 | tee -a "$log"
    done
  elif [ -n "${MERGE:-}" ]; then
    ./build/fs-tune import "$MERGE" --db $db 2>&1 | tail -2 | tee -a "$log"
  fi
  ./build/fs-tune export "$out/defaults.db" --db $db 2>&1 | tail -2 | tee -a "$log"
fi
if [ $defaults = 1 ]; then
  ddb=tuning-db/defaults/defaults.db; [ $tuned = 1 ] && ddb=$out/defaults.db
  echo "gpu-final.sh: the default-path tests on $ddb" | tee -a "$log"
  FS_DEFAULTS_DB=$ddb timeout 300 ctest --test-dir build -L gpu --output-on-failure -j1 \
    -R "^gpu/test_(pathwise|distribution|determinism|mode_winners|tuned_revision)\$" \
    > "$out/gpu-defaults-tests.log" 2>&1
  grep -E "tests passed|Failed|\*\*\*" "$out/gpu-defaults-tests.log" | tee -a "$log"
fi
# the qwen, llama, fp16 and fp16big steps' reports and plots: one file
if ls "$out"/tune-*.csv > /dev/null 2>&1; then
  (cd "$out" && tar czf tune.tgz tune-*.csv && rm -f tune-*.csv tune-*.svg)
fi
