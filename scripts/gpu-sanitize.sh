#!/usr/bin/env bash
# compute-sanitizer over the shipped kernels, on the H200 (285 runs over 21
# variants in perf-notes 31d's count, JOBS at once):
#   memcheck  (out-of-bounds, misaligned and uninitialised-use accesses to
#             global and shared memory, invalid launches) of every distinct
#             variant that tuning-db/defaults ships, forced by FS_VARIANT, at
#             D = 256 and V = 5011 (a vocabulary tail in every tile size), at two
#             batches (a partial batch tile, and more than two tiles), in five
#             call modes: sampled, greedy, FS_NOISE_GROUP16, a token mask of
#             density 0.5 and a logit bias of 8 entries a row on that mask (the
#             bias module's kernels around the variant); every run also checks
#             its tokens against the CPU reference (fs-demo --check 1);
#   racecheck, synccheck and initcheck (shared-memory hazards, barrier misuse,
#             reads of global memory nothing wrote: the workspace) of one
#             variant per family (wg's overlap mode and 2-CTA clusters apart)
#             and call mode (slower: the small batch only; racecheck over
#             RACE_ITERS calls).
# JOBS runs go at once (default 6); FILTER=<substring> keeps matching variants;
# DRY=1 prints the runs instead.  Writes $OUT/sanitize.log (one line a run and
# the tools' reports of the runs that found something) and exits 1 if any did.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out}; mkdir -p "$out"
log=$out/sanitize.log; : > "$log"
export FS_TUNING_DB=off
D=256 V=5011
variants=$(./build/fs-tune list --db tuning-db/defaults/defaults.db |
  sed -n 's/.* -> \(fsamp_[^ ]*\) .*/\1/p' | sort -u | grep -F -- "${FILTER:-fsamp_}")
# A run: "tool variant B mode" (mode: token greedy group16 mask bias).
runs=()
declare -A family_seen
for v in $variants; do
  tb=$(sed -n 's/.*_b\([0-9]*\)_.*/\1/p' <<< "$v"); tb=${tb:-1}
  small=$(( tb > 4 ? tb - 3 : tb )); big=$(( 2 * tb + 5 ))
  fam=$(sed -n 's/fsamp_[a-z0-9]*_sm[0-9a]*_\([a-z]*\)_.*/\1/p' <<< "$v") # + overlap, clusters
  case $v in *_ov_*) fam+=_ov ;; esac; case $v in *_c2*) fam+=_c2 ;; esac
  for m in token greedy group16 mask bias; do
    runs+=("memcheck $v $small $m" "memcheck $v $big $m")
    if [ -z "${family_seen[$fam.$m]:-}" ]; then
      family_seen[$fam.$m]=1
      runs+=("racecheck $v $small $m" "synccheck $v $small $m" "initcheck $v $small $m")
    fi
  done
done
one() { # tool variant B mode
  local tool=$1 v=$2 b=$3 m=$4 dt args
  dt=$(sed -n 's/fsamp_\([a-z0-9]*\)_.*/\1/p' <<< "$v")
  # racecheck's reports depend on the threads' timing (perf-notes 29a): it
  # watches RACE_ITERS calls (default 4), the other tools one
  local iters=1; [ "$tool" = racecheck ] && iters=${RACE_ITERS:-4}
  args=(--shape "D=$D,V=$V" --batch "$b" --dtype "$dt" --iters "$iters" --check 1 --temperature 1)
  case $m in
    greedy) args+=(--temperature 0) ;;
    group16) args+=(--noise group16) ;;
    mask) args+=(--mask-density 0.5) ;;
    bias) args+=(--mask-density 0.5 --logit-bias 8) ;;
  esac
  local r rc
  r=$(FS_VARIANT=$v timeout 300 compute-sanitizer --tool "$tool" --error-exitcode 99 \
      ./build/fs-demo "${args[@]}" 2>&1); rc=$?
  local errs; errs=$(grep -Eo '[A-Z]+ SUMMARY: [0-9]+ [a-z]+' <<< "$r" | tail -1)
  if [ $rc = 0 ] && grep -Eq 'check: ([0-9]+) of \1 tokens equal' <<< "$r"; then
    echo "ok    $tool $v B=$b $m (${errs:-no summary})"
  else
    echo "FOUND $tool $v B=$b $m rc=$rc (${errs:-no summary})"
    sed 's/^/      /' <<< "$r" | head -60
  fi
}
export -f one; export D V
echo "gpu-sanitize.sh: ${#runs[@]} runs over $(wc -w <<< "$variants") variants, D=$D V=$V" | tee -a "$log"
if [ -n "${DRY:-}" ]; then printf '%s\n' "${runs[@]}"; exit 0; fi
command -v compute-sanitizer > /dev/null || { echo "no compute-sanitizer on PATH" | tee -a "$log"; exit 2; }
printf '%s\n' "${runs[@]}" | xargs -P "${JOBS:-6}" -L 1 bash -c 'one "$@"' _ >> "$log"
n_ok=$(grep -c '^ok ' "$log"); n_bad=$(grep -c '^FOUND ' "$log")
echo "gpu-sanitize.sh: $n_ok clean, $n_bad with findings" | tee -a "$log"
grep '^FOUND ' "$log"
[ "$n_bad" = 0 ]
