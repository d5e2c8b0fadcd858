#!/usr/bin/env bash
# compute-sanitizer over filtered calls (fsamp_filter, runtime/filter.c) on
# the H200: memcheck, racecheck and synccheck, each of four filter mixes
# (top-k + top-p, min-p, top-p alone, top-k with a logit bias, a repetition
# penalty and logprobs; MIXES replaces the list), at B = 3 (a row over a cluster of 8
# CTAs) and B = 200 (one CTA a row), gathered and the long way
# (FS_FILTER_GATHER=0); every run checks its tokens against the CPU
# reference (fs-demo --check 1).  TOOLS and BATCHES narrow the runs; JOBS
# at once (default 6).  Writes
# $OUT/sanitize-filter.log and exits 1 if any run found something.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out}; mkdir -p "$out"
log=$out/sanitize-filter.log; : > "$log"
export FS_TUNING_DB=off
runs=()
for tool in ${TOOLS:-memcheck racecheck synccheck}; do
  for mix in ${MIXES:---top-k,50,--top-p,0.9 --min-p,0.1 --top-p,0.9 --top-k,50,--logit-bias,16,--repetition-penalty,2,--logprobs,1}; do
    for b in ${BATCHES:-3 200}; do
      for g in 1 0; do runs+=("$tool $mix $b $g"); done
    done
  done
done
one() { # tool mix B gather
  local flags r rc
  IFS=, read -r -a flags <<< "$2"
  r=$(FS_FILTER_GATHER=$4 timeout 300 compute-sanitizer --tool "$1" --error-exitcode 99 \
      ./build/fs-demo --shape D=256,V=5011 --batch "$3" --iters 2 --check 1 "${flags[@]}" 2>&1)
  rc=$?
  echo "$1 $2 B=$3 gather=$4: rc=$rc $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|check:' <<< "$r" | tr '\n' ' ')"
  [ $rc -ne 0 ] && echo "$r" | head -40
  return 0
}
export -f one
printf '%s\n' "${runs[@]}" | xargs -P "${JOBS:-6}" -I{} bash -c 'one {}' >> "$log" 2>&1
grep -c ': rc=0 ' "$log" | sed "s/^/clean runs: /; s/$/ of ${#runs[@]}/"
! grep -qE ': rc=[1-9]' "$log"
