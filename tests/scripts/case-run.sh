# Sourced by the unseen-case workloads (tests/scripts/unseen*-workload.sh):
# `run NAME CMD…` runs CMD, for at most $CASE_TIMEOUT seconds (60), and
# prints "== NAME: LAST (exit RC)", LAST its last line of output.
run() {
  local n=$1; shift
  local out rc
  out=$(timeout "${CASE_TIMEOUT:-60}" "$@" 2>&1); rc=$?
  echo "== $n: $(printf '%s\n' "$out" | tail -1) (exit $rc)"
}
