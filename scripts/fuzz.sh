#!/usr/bin/env bash
# Runs every Go fuzz target of the module (func FuzzX(f *testing.F) in a
# _test.go file), one after another, each for FUZZTIME (default 20000x: that many inputs), and
# stops at the first failure, naming the target. A crashing input is
# written by go test under that package's testdata/fuzz/FuzzX/; commit it
# with the fix, and plain `go test` replays it from then on.
#
# go test fuzzes one target per package per invocation, hence the loop.
# Total time ≈ (number of targets) × FUZZTIME, plus one build per target
# (cached after the first of a package).
#
# Usage: scripts/fuzz.sh [package pattern …]   (default ./...)
# Environment: FUZZTIME (go test -fuzztime, e.g. 20000x or 30s),
#              FUZZMINIMIZETIME (go test -fuzzminimizetime, default 2s),
#              FUZZFLAGS (extra go test flags, e.g. "-parallel 2").
#
# The default is a count, not a duration: with a duration, Go 1.26's
# fuzz coordinator can report "context deadline exceeded" as a failure
# when the time runs out mid-execution, with no failing input
# (go.dev/issue/75804, fixed in Go 1.27); a count has no deadline to race.
# At 5k–20k inputs/s per target on a 2-core machine, 20000x takes 1–4 s.
#
# FUZZMINIMIZETIME is short because go's default, 60s, lets a worker spend
# a whole short run minimizing one large input that reached new coverage
# (its byte-removal passes are quadratic in the length), fuzzing nothing
# meanwhile; a crasher is still written, just less minimized.
set -euo pipefail

cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-20000x}
FUZZMINIMIZETIME=${FUZZMINIMIZETIME:-2s}
FUZZFLAGS=${FUZZFLAGS:-}
patterns=("$@")
[ ${#patterns[@]} -gt 0 ] || patterns=(./...)

# Packages whose test files declare a fuzz target: a grep over the files
# go list names, so that no test binary is built for the others. (Command
# substitutions, not pipes into the loops, so that a failing go list or
# a package that does not build stops the script under set -e.)
listing=$(go list -f '{{$d := .Dir}}{{.ImportPath}}{{range .TestGoFiles}} {{$d}}/{{.}}{{end}}{{range .XTestGoFiles}} {{$d}}/{{.}}{{end}}' "${patterns[@]}")
pkgs=()
while read -r pkg files; do
	# shellcheck disable=SC2086 # files is a list of paths without spaces
	if [ -n "$files" ] && grep -qE '^func Fuzz[A-Za-z0-9_]*\(' $files; then
		pkgs+=("$pkg")
	fi
done <<<"$listing"

# go test -list is the authority on the targets' names (it prints them,
# then "ok <pkg> …"); it builds the test binary that fuzzing reuses.
targets=()
for pkg in "${pkgs[@]}"; do
	if ! names=$(go test -run '^$' -list '^Fuzz' "$pkg" 2>&1); then
		printf '%s\n' "$names" >&2
		echo "fuzz.sh: FAIL: cannot list the fuzz targets of $pkg" >&2
		exit 1
	fi
	while read -r name; do
		targets+=("$pkg $name")
	done < <(grep -E '^Fuzz[A-Za-z0-9_]*$' <<<"$names" || true)
done

if [ ${#targets[@]} -eq 0 ]; then
	echo "fuzz.sh: no fuzz targets found in ${patterns[*]}" >&2
	exit 1
fi
echo "fuzz.sh: ${#targets[@]} targets, ${FUZZTIME} each"

for t in "${targets[@]}"; do
	pkg=${t% *}
	name=${t#* }
	echo "=== $name ($pkg)"
	# shellcheck disable=SC2086 # FUZZFLAGS is a list of flags
	if ! go test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "$FUZZMINIMIZETIME" $FUZZFLAGS "$pkg"; then
		echo "fuzz.sh: FAIL: $name in $pkg (crashing input, if any, under its testdata/fuzz/$name/)" >&2
		exit 1
	fi
done
echo "fuzz.sh: all ${#targets[@]} targets passed"
