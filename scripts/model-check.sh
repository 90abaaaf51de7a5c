#!/usr/bin/env bash
# G5, G6, C5: the lease and grant rules in Spin (models/lease.pml). Each configuration states the verdict it must
# reach: "safe" (no assertion fails in the whole state space) or "violated" (Spin finds the counterexample the
# configuration exists to show). A verdict other than the expected one fails. `quick` (CI, about 3 minutes) or
# `full` (the larger configurations: minutes each and up to 6 GB of memory apiece).
set -euo pipefail
cd "$(dirname "$0")/.."
{ command -v spin && command -v gcc; } >/dev/null || ./scripts/install-deps.sh
set_name=${1:-quick}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Scaled-down times (seconds): the broker's will after 4 s of silence, a ping every second, etcd's lease 6 s
# renewed every 2 s; each owner publishes MAXN statuses (the defaults: will 7 s, lease 10 s renewed every 3.3 s).
small="-DMAXT=10 -DWILL=4 -DPING=1 -DTTL=6 -DRENEW=2 -DMAXN=1"
larger="-DMAXT=12 -DWILL=4 -DPING=1 -DTTL=6 -DRENEW=2 -DMAXN=2"

failed=0
# A configuration expected to be violated may search with `--bitstate` (supertrace: 512 MiB of bits, no memory
# limit to reach): it explores only part of the space, but a counterexample it finds is real. The split gate's
# counterexample lies beyond what the exact search holds in 6 GB.
check() {
    local name=$1 expected=$2
    shift 2
    local store="-DCOLLAPSE -DMEMLIM=6000" width=26
    if [[ ${1:-} == --bitstate ]]; then
        store="-DBITSTATE" width=32
        shift
    fi
    local dir="$work/$name"
    mkdir -p "$dir"
    cp models/lease.pml "$dir/"
    local started=$SECONDS
    # shellcheck disable=SC2086 # $store is two flags
    (cd "$dir" && spin -a "$@" lease.pml >/dev/null && gcc -O2 -w -DSAFETY $store -o pan pan.c \
        && ./pan -m400000 -w$width > out.txt 2>&1) || true
    local verdict=unknown
    if grep -q "assertion violated" "$dir/out.txt" 2>/dev/null; then
        verdict=violated
    elif grep -q "errors: 0" "$dir/out.txt" 2>/dev/null && ! grep -q "Search not completed\|out of memory" "$dir/out.txt"; then
        verdict=safe
    fi
    local states
    states=$(grep -o "[0-9.e+]* states, stored" "$dir/out.txt" 2>/dev/null | head -1 | cut -d' ' -f1)
    printf '  %-44s %-9s (expected %s; %s states, %d s)\n' "$name" "$verdict" "$expected" "${states:-?}" \
        $((SECONDS - started))
    if [[ $verdict != "$expected" ]]; then
        failed=1
        tail -20 "$dir/out.txt" 2>/dev/null || true
    elif [[ $verdict == violated ]]; then
        # The counterexample, shortened to what the workers and the broker did.
        (cd "$dir" && spin -t -p -g "$@" lease.pml 2>/dev/null | grep -E "proc +[23] .*(out\[w\]!|out\[w\]\?x|owner = w|epoch\[w\] = |handed\[w\] = 1)|fireWill|now = " \
            | tail -8 | sed 's/^/      /') || true
    fi
}

echo "model-check ($set_name): models/lease.pml with spin $(spin -V | cut -d' ' -f3)"
check "broker-only (G5)" safe $small
check "broker-only, queue kept across a lapse" violated $small -DCLEAR_ON_LAPSE=0
check "etcd (G6) as built: the gate" violated --bitstate $small -DETCD -DGATE=1
if [[ $set_name == full ]]; then
    check "broker-only (G5), 2 statuses an owner" safe $larger
    check "etcd + queue dropped at a grant's lapse + wait" safe $larger -DETCD -DWAIT_FOR_WILL=1
fi
if ((failed)); then
    echo "model-check: a configuration did not reach its expected verdict"
    exit 1
fi
echo "model-check: every configuration reached its expected verdict"
