# dpfl — two commands on a fresh machine:
#   make demo   the main job: a DP-FedAvg job on Fashion-MNIST, served and submitted through the API
#   make test   vet + the test suite
GO ?= go
# The fast build: archsimd kernels (AVX-512) in package simd; see README,
# "Performance and the SIMD build". Plain `go build` works too, slower.
SIMD ?= GOEXPERIMENT=simd

.PHONY: build demo test test-simd fuzz bench bench-torch experiments fmt
build:
	$(SIMD) $(GO) build -o bin/ ./cmd/...

demo:
	bash scripts/demo.sh

test:
	$(GO) vet ./...
	$(GO) test ./...

# The SIMD build's vet and the tests of the packages it changes.
test-simd:
	$(SIMD) $(GO) vet ./...
	$(SIMD) $(GO) test ./simd/ ./fl/...

# Every Go fuzz target for FUZZTIME each (default 20000x, inputs); CI runs this.
fuzz:
	bash scripts/fuzz.sh

bench:
	$(SIMD) $(GO) test -run '^$$' -bench . ./simd/ ./fl/... ./accounting/ ./storage/ ./dp/ ./secagg/

# Side by side with the PyTorch reference (installs python3-torch when root).
bench-torch:
	bash scripts/bench.sh

# The papers' experiments (docs/experiments.md): tables and plots in docs/experiments/.
experiments:
	$(SIMD) $(GO) run ./cmd/dpfl-experiments --out docs/experiments all

fmt:
	gofmt -w $$(git ls-files '*.go')
