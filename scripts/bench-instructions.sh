#!/usr/bin/env bash
# Instructions per operation under valgrind's callgrind (make bench-instructions): the same on every run of the
# same build, so two builds compare without this machine's wall-clock noise. Counts only inside the benchmark's
# `countedWork` (set-up excluded). Prints one line per operation; the status is measured with the durable state
# written once per 12 statuses (the default) and before every status (rides.sequenceBlock 1, as before shape 4),
# in the same run.
set -euo pipefail
cd "$(dirname "$0")/.."
COUNT="${COUNT:-20000}"
RIDES="${RIDES:-1000}"

if ! command -v valgrind >/dev/null 2>&1; then
    echo "==> installing valgrind (callgrind)"
    if [ "$(id -u)" -eq 0 ]; then sudo_cmd=(); else sudo_cmd=(sudo -n); fi
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends valgrind
fi

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# Valgrind 3.19 (Debian 12) cannot read the DWARF 5 that Swift 6 writes: count on a copy without debug
# information (the symbol table, which callgrind needs to find countedWork, stays).
bench="$out/ride-instructions"
strip --strip-debug -o "$bench" .build/release/ride-instructions

# Instructions collected inside countedWork for one run of `ride-instructions "$@"`.
count_instructions() {
    local file="$out/callgrind.out"
    rm -f "$file"
    valgrind --tool=callgrind --callgrind-out-file="$file" --collect-atstart=no --toggle-collect='*countedWork*' \
        "$bench" "$@" >/dev/null 2>"$out/valgrind.log" || { cat "$out/valgrind.log" >&2; exit 1; }
    awk '/^(summary|totals):/ { print $2; exit }' "$file"
}

echo "ride-instructions: callgrind, $COUNT operations each after the set-up, $RIDES active rides"
printf '%-72s %14s\n' "operation" "instructions"
report() {
    local label="$1"; shift
    local total
    total=$(count_instructions "$@")
    printf '%-72s %14.0f\n' "$label" "$(echo "$total / $COUNT" | bc -l)"
}
report "fix: topic, decode, T1-T7, P2-P5 and E1 on its ride" --operation fix --count "$COUNT" --rides "$RIDES"
report "fix: the same without the read API's track (rides.trackLength 0)" \
    --operation fix --count "$COUNT" --rides "$RIDES" --track-length 0
report "fix: the same without \`speed\` (T7 derives it; E1's pace by distance)" \
    --operation fix --count "$COUNT" --rides "$RIDES" --without-speed
report "fix: the same for rides with a route (E2: projected onto it)" \
    --operation fix --count "$COUNT" --rides "$RIDES" --route
report "status: C1 tick, V1-V7, JSON, durable state once per 12 (default)" \
    --operation status --count "$COUNT" --rides "$RIDES" --sequence-block 12
report "status: the same for rides booked from the catalog (3.4, P5 pricing)" \
    --operation status --count "$COUNT" --rides "$RIDES" --sequence-block 12 --catalog
report "status: the same for rides with a route (E2: the ETA along it; the state carries it)" \
    --operation status --count "$COUNT" --rides "$RIDES" --sequence-block 12 --route
report "status: the same with the durable state before every status (block 1)" \
    --operation status --count "$COUNT" --rides "$RIDES" --sequence-block 1
