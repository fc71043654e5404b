#!/usr/bin/env bash
# scripts/fuzz_long.sh [SECONDS] [FUZZER...] - the long fuzzing tier (`make fuzz-long`):
# each libFuzzer target in build-fuzz/ runs SECONDS (default 1800) from its seed corpus in
# fuzz/corpus/ plus, where ../shared/data exists, the real inputs it parses (HLO modules,
# PyTorch snapshots, MiniMalloc CSVs). Seeds are copied to a scratch folder outside the
# repository; what a fuzzer adds stays in build-fuzz/fuzz-long/NAME/corpus for the next run.
# Prints one line per fuzzer (runs, coverage, features, corpus size); exits 1 if any finds
# a crash or a leak (the input is left in build-fuzz/fuzz-long/NAME/).
set -u
cd "$(dirname "$0")/.."
secs=${1:-1800}
shift || true
shared=${HBM_SHARED_DATA:-../shared/data}
out=build-fuzz/fuzz-long
fuzzers=("$@")
if [ ${#fuzzers[@]} -eq 0 ]; then
  for f in build-fuzz/fuzz_*; do [ -x "$f" ] && fuzzers+=("$(basename "$f")"); done
fi
[ ${#fuzzers[@]} -gt 0 ] || { echo "fuzz_long: no fuzzers in build-fuzz/ (run 'make fuzz')" >&2; exit 2; }
[ -d "$shared" ] || echo "fuzz_long: note: $shared absent, seeds from fuzz/corpus only" >&2
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
seeds() { # seeds NAME DIR: the shared inputs that fuzzer NAME parses, copied into DIR
  local pat="" sub=""
  case "$1" in
    fuzz_hlo) sub=hlo pat='*.hlo' ;;
    fuzz_pickle) sub=snapshots pat='*.pickle' ;;
    fuzz_minimalloc) sub=minimalloc pat='*.csv' ;;
    fuzz_proto) sub=xprof pat='*.pb' ;;
    *) return 0 ;;
  esac
  [ -d "$shared/$sub" ] || return 0
  find "$shared/$sub" -type f -name "$pat" -size -256k -exec cp -t "$2" {} +
  [ "$1" = fuzz_hlo ] && [ -d "$shared/fuzz" ] && find "$shared/fuzz" -type f -name 'hlo-*' -exec cp -t "$2" {} +
  return 0
}
status=0
for name in "${fuzzers[@]}"; do
  bin=build-fuzz/$name
  [ -x "$bin" ] || { echo "fuzz_long: $bin not built" >&2; status=2; continue; }
  mkdir -p "$out/$name/corpus" "$scratch/$name"
  seeds "$name" "$scratch/$name"
  log=$out/$name/log.txt
  dirs=("$out/$name/corpus" "$scratch/$name")
  [ -d "fuzz/corpus/$name" ] && dirs+=("fuzz/corpus/$name")
  "$bin" -max_total_time="$secs" -print_final_stats=1 -artifact_prefix="$out/$name/" -dict=fuzz/hbm.dict \
    "${dirs[@]}" >"$log" 2>&1
  rc=$?
  runs=$(grep -Eo 'stat::number_of_executed_units: [0-9]+' "$log" | grep -Eo '[0-9]+$')
  last=$(grep -E '^#[0-9]+' "$log" | tail -1)
  cov=$(grep -Eo 'cov: [0-9]+' <<<"$last" | grep -Eo '[0-9]+')
  ft=$(grep -Eo 'ft: [0-9]+' <<<"$last" | grep -Eo '[0-9]+')
  corp=$(grep -Eo 'corp: [0-9]+/[0-9a-zA-Z]+' <<<"$last" | cut -d' ' -f2)
  seeded=$(find "$scratch/$name" -type f | wc -l)
  if [ $rc -eq 0 ]; then
    printf '%-16s clean  %ss  runs %s  cov %s  ft %s  corpus %s  (%s shared seeds)\n' \
      "$name" "$secs" "${runs:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}" "$seeded"
  else
    printf '%-16s FOUND  exit %s after %s runs: see %s\n' "$name" "$rc" "${runs:-?}" "$log"
    grep -E 'ERROR: |SUMMARY: ' "$log" | head -3
    status=1
  fi
  rm -rf "${scratch:?}/$name"
done
exit $status
