# Sourced by the study drivers that time their stages: `timed NAME CMD...` runs CMD and appends its wall seconds
# to $TIMES (OUT/timings.tsv, created with its header here). Set TIMES before sourcing.
[ -f "$TIMES" ] || printf 'stage\tseconds\n' > "$TIMES"
timed() {  # timed NAME CMD...: run CMD, append its wall seconds to timings.tsv
  local name=$1 t0=$SECONDS
  shift
  "$@"
  printf '%s\t%s\n' "$name" $((SECONDS - t0)) >> "$TIMES"
}
