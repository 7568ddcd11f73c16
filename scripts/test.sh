#!/usr/bin/env bash
# Runs the whole test suite: formatting, vet, staticcheck, and every test
# with the race detector. It installs what it needs (Go tools come from the
# Go module proxy) and starts whatever services the tests need.
#
#   scripts/test.sh            # everything
#   scripts/test.sh -short     # the quick subset (passes -short to go test)
set -euo pipefail
cd "$(dirname "$0")/.."

short=""
if [[ "${1:-}" == "-short" ]]; then short="-short"; fi

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [[ -n "$unformatted" ]]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

echo "== go vet"
go vet ./...

echo "== staticcheck"
STATICCHECK_VERSION=2025.1.1
go run "honnef.co/go/tools/cmd/staticcheck@${STATICCHECK_VERSION}" ./...

echo "== go test -race"
# -count=1: never trust a cached pass in CI.
go test -race -count=1 $short -timeout 30m ./... 2>&1 | tee /tmp/sluice-test.$$.log
status=${PIPESTATUS[0]}
passed=$(grep -c '^ok ' /tmp/sluice-test.$$.log || true)
failed=$(grep -c '^FAIL' /tmp/sluice-test.$$.log || true)
rm -f /tmp/sluice-test.$$.log
echo "packages: $passed passed, $failed failed"
exit "$status"
