# dpfl. Targets:
#   make demo         the main job: a DP-FedAvg job on Fashion-MNIST, served and submitted through the API
#   make test         go vet + the short suite (go test -short: slow tests skip, saying so)
#   make test-full    go vet + every test (what CI runs, through .ci/run)
#   make test-simd    the same vet and the tests of the packages it changes, in the SIMD build
#   make test-python  the Python client's tests (clients/python) against a real dpfl-server
#   make test-ui      the dashboard (/ui) in headless Chromium against a real dpfl-server
#   make test-ha      the kill -9 suite (issue 18): 3 etcd members, 3 replicas, faults mid-job (needs etcd-server)
#   make check-onnx   exported ONNX models against Debian's python3-onnx checker and a numpy forward pass
#   make fuzz         every Go fuzz target for FUZZTIME each (default 20000x inputs; CI: 100000x)
#   make build        the commands, into bin/, in the SIMD build
#   make bench        the Go benchmarks of the numeric packages, in the SIMD build
#   make bench-torch  training throughput side by side with the PyTorch reference (scripts/bench.sh)
#   make experiments  the papers' experiments (docs/experiments.md): tables and plots in docs/experiments/
#   make fmt          gofmt every tracked Go file
# The tests need Fashion-MNIST at /usr/share/datasets/fashion-mnist
# (apt-get install dataset-fashion-mnist); without it they fail, never skip.
GO ?= go
# The fast build: package simd's archsimd kernels (AVX-512, or AVX2 + FMA
# on CPUs without it), chosen at run time; see simd/doc.go. Plain
# `go build` works too, with the portable loops, slower.
SIMD ?= GOEXPERIMENT=simd

.PHONY: build demo test test-full test-simd test-python test-ui test-ha check-onnx fuzz bench bench-torch experiments fmt
build:
	$(SIMD) $(GO) build -o bin/ ./cmd/...

demo:
	bash scripts/demo.sh

test:
	$(GO) vet ./...
	$(GO) test -short ./...

test-full:
	$(GO) vet ./...
	$(GO) test ./...

test-simd:
	$(SIMD) $(GO) vet ./...
	$(SIMD) $(GO) test ./simd/ ./fl/...

test-python:
	bash scripts/test-python.sh

test-ui:
	bash scripts/test-ui.sh

test-ha:
	bash scripts/test-ha.sh

check-onnx:
	bash scripts/check-onnx.sh

fuzz:
	bash scripts/fuzz.sh

bench:
	$(SIMD) $(GO) test -run '^$$' -bench . ./simd/ ./fl/... ./accounting/ ./storage/ ./dp/ ./secagg/

# Installs python3-torch and OpenBLAS when run as root and missing.
bench-torch:
	bash scripts/bench.sh

experiments:
	$(SIMD) $(GO) run ./cmd/dpfl-experiments --out docs/experiments all

fmt:
	gofmt -w $$(git ls-files '*.go')
