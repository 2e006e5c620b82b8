# dpfl — two commands on a fresh machine:
#   make demo   the main job: a DP-FedAvg job on Fashion-MNIST, served and submitted through the API
#   make test   vet + the test suite
GO ?= go

.PHONY: build demo test bench experiments fmt
build:
	$(GO) build -o bin/ ./cmd/...

demo:
	bash scripts/demo.sh

test:
	$(GO) vet ./...
	$(GO) test ./...

bench:
	$(GO) test -run '^$$' -bench . ./simd/ ./fl/... ./accounting/ ./storage/ ./dp/ ./secagg/

# The papers' experiments (docs/experiments.md): tables and plots in docs/experiments/.
experiments:
	$(GO) run ./cmd/dpfl-experiments --out docs/experiments all

fmt:
	gofmt -w $$(git ls-files '*.go')
