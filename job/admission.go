package job

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/fl/model"
)

// Admission control (issue 13): before a job allocates anything it is
// refused if its estimated peak memory exceeds Options.MaxJobMemory, at
// submission and again when it resumes, so that one job can never take
// the server's memory, and with it every other job, down.

// memoryEstimate is the memory a job holds at its peak, in bytes, by the
// part of the job that holds it. Every part is a closed form in the
// model's shape and the spec, read off the buffers that fl and fl/model
// allocate (TestMemoryEstimateCoversAllocation checks it against the
// bytes actually allocated). It counts live heap; the Go collector may
// let the heap grow past it by up to GOGC (100%) of garbage, which is
// why DefaultMaxJobMemory is half of the machine.
type memoryEstimate struct {
	// Activations is, over every training worker, the model's workspace
	// at client.batch_size (activations and their gradients: the CNN's
	// dominate) and the gathered batch.
	Activations int64
	// WorkerModels is, over every training worker, the copies of the
	// model a client's training holds: local model, gradient, momentum,
	// update, the worker's aggregate and SCAFFOLD's correction.
	WorkerModels int64
	// Server is the global model, the round's mean and pseudo-gradient,
	// the server optimizer's state and its serialisation, and the
	// checkpoint's copies (the encoded record written, the one read back
	// at resume).
	Server int64
	// Eval is the evaluator's workspaces and batches, one per worker.
	Eval int64
	// Held is the updates a round holds all at once: secure aggregation
	// keeps every cohort member's update (and the protocol's vectors)
	// until the protocol runs, over-selection keeps them until the
	// target is reached. Sized by a public bound on the cohort.
	Held int64
	// HeldField is the spec field that sizes Held.
	HeldField string
	// Scaffold is SCAFFOLD's control variates, one model-sized vector
	// for every client of the population.
	Scaffold int64
}

// Total is the estimate's sum, in bytes.
func (e memoryEstimate) Total() int64 {
	return e.Activations + e.WorkerModels + e.Server + e.Eval + e.Held + e.Scaffold
}

// culprit is the field that most drives the estimate, and what it sizes.
func (e memoryEstimate) culprit(spec types.Spec) (field, what string) {
	field, what, most := "model", fmt.Sprintf("copies of the %s model's parameters", spec.Model), e.WorkerModels+e.Server
	if e.Eval > most {
		field, what, most = "model", fmt.Sprintf("the evaluation's activations of the %s model at %d examples on every worker (the server's --workers)", spec.Model, evalChunk), e.Eval
	}
	if e.Activations > most {
		field, what, most = "client.batch_size", fmt.Sprintf("activations of the %s model at batch_size %d on every worker", spec.Model, spec.Client.BatchSize), e.Activations
	}
	if e.Held > most {
		field, what, most = e.HeldField, "the cohort's updates, all held until the round aggregates (secure aggregation or over-selection)", e.Held
	}
	if e.Scaffold > most {
		field, what = "population.size", fmt.Sprintf("SCAFFOLD's control variates, one model per client of %d", spec.Population.Size)
	}
	return field, what
}

// workspaceBytes is what fl/model's NewWorkspace(batch) holds for mdl
// (model.WorkspaceBytes, trained or only evaluated), or for a model that
// function does not know, activations of twice the parameters per
// example.
func workspaceBytes(mdl model.Model, batch int64, train bool) int64 {
	if n := model.WorkspaceBytes(mdl, int(batch), train); n >= 0 {
		return n
	}
	return 4 * batch * 2 * int64(mdl.NumParams())
}

const (
	// evalChunk is fl.NewEvaluator's batch (its chunk constant).
	evalChunk = 256
	// bookkeeping covers, per worker, what the closed forms leave out:
	// slice and struct headers, generators, channels (a few KiB).
	bookkeeping = 64 << 10
)

// estimateMemory estimates spec's peak memory with model mdl and workers
// training workers (≤ 0: GOMAXPROCS, as fl does).
func estimateMemory(spec types.Spec, mdl model.Model, workers int) memoryEstimate {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	const f32 = 4
	d := int64(mdl.NumParams())
	dim := int64(mdl.InputDim())
	w := int64(workers)
	var e memoryEstimate

	// The server side, for every job: x_t, Δ_t and −Δ_t; the optimizer's
	// state (momentum: m; adaptive: m and v), once live and once
	// serialised for the checkpoint; the checkpoint's encoded record and
	// the one read back at resume.
	state := int64(0)
	switch spec.Server.Optimizer {
	case "momentum":
		state = d
	case "adagrad", "adam", "yogi":
		state = 2 * d
	}
	e.Server = f32 * (3*d + 2*state + 2*(d+state))
	e.Eval = w * (workspaceBytes(mdl, evalChunk, false) + f32*evalChunk*dim + evalChunk + bookkeeping)

	if spec.Population.Source == "devices" {
		// No training on the server: the round's model sent to devices,
		// its decoded sum (float64) and the protocol's running sum.
		e.Held, e.HeldField = f32*(d+2*d+d), "model"
		return e
	}
	// Per worker: local model, gradient, update and the worker's
	// aggregate; momentum's velocity; SCAFFOLD's correction.
	copies := int64(4)
	if spec.Client.Momentum != 0 {
		copies++
	}
	if spec.Algorithm == "scaffold" {
		copies++
	}
	e.WorkerModels = w * f32 * copies * d
	b := int64(spec.Client.BatchSize)
	e.Activations = w * (workspaceBytes(mdl, b, true) + f32*b*dim + b + bookkeeping) // workspace, gathered features, labels

	sampler, target := specSampler(spec, spec.Population.Size)
	cohort := int64(cohortBound(sampler, spec.Population.Size))
	e.HeldField = "sampling.rate"
	if spec.Sampling.Scheme == "fixed" {
		e.HeldField = "sampling.cohort_size"
	}
	switch {
	case spec.SecureAggregation:
		// Every member's update (float32), the protocol's running sum,
		// each worker's encoded input and masked message (uint32), the
		// masks' partial sums expanded per worker, and the decoded sum
		// (float64).
		e.Held = f32*cohort*d + f32*d + w*2*f32*d + w*f32*d + 8*d
	case target > 0:
		// Over-selection holds every report of the selected cohort until
		// the round closes at the target.
		e.Held = f32 * cohort * d
	}
	if spec.Algorithm == "scaffold" {
		// c, the round's Σ(c_i⁺ − c_i), and c_i for every client seen.
		e.Scaffold = f32 * (2 + int64(spec.Population.Size)) * d
	}
	return e
}

// checkMemory refuses spec when its estimated peak memory with mdl
// exceeds the manager's MaxJobMemory (no bound when ≤ 0), with a
// *ValidationError naming the field most responsible, the estimate and
// the limit.
func (m *Manager) checkMemory(spec types.Spec, mdl model.Model) error {
	limit := m.limits.MaxJobMemory
	if limit <= 0 {
		return nil
	}
	e := estimateMemory(spec, mdl, m.workers)
	total := e.Total()
	if total <= limit {
		return nil
	}
	field, what := e.culprit(spec)
	return NewValidationError(field, types.RuleCapacity, fmt.Sprintf(
		"the job's estimated peak memory is %s, above this server's limit of %s per job (--max-job-memory); most of it is %s: lower %s",
		formatBytes(total), formatBytes(limit), what, field))
}

// formatBytes writes n bytes in binary units (KiB, MiB, GiB, TiB).
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n), -1
	for v >= unit && i < 3 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB (%d bytes)", v, "KMGT"[i], n)
}

// DefaultMaxJobMemory is a safe bound for Options.MaxJobMemory, in bytes:
// half of the memory this process may use, the smaller of the machine's
// physical memory (MemTotal in /proc/meminfo) and the cgroup's limit
// (/sys/fs/cgroup/memory.max), or 4 GiB where neither can be read. Half,
// because the estimate counts live heap and the Go collector lets the
// heap grow by up to as much again in garbage (GOGC = 100), and the rest
// of the server (datasets, other jobs, requests) needs some too.
func DefaultMaxJobMemory() int64 {
	total := memTotal()
	if lim := cgroupLimit(); lim > 0 && (total <= 0 || lim < total) {
		total = lim
	}
	if total <= 0 {
		return 4 << 30
	}
	return total / 2
}

// memTotal is MemTotal of /proc/meminfo in bytes, 0 if unknown.
func memTotal() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	return parseMemTotal(b)
}

// parseMemTotal reads the "MemTotal: N kB" line of a /proc/meminfo, in
// bytes; 0 if absent or malformed.
func parseMemTotal(b []byte) int64 {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != "MemTotal" {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || kb <= 0 || kb > math.MaxInt64/1024 {
			return 0
		}
		return kb * 1024
	}
	return 0
}

// cgroupLimit is the cgroup v2 memory limit in bytes, 0 if none.
func cgroupLimit() int64 {
	b, err := os.ReadFile("/sys/fs/cgroup/memory.max")
	if err != nil {
		return 0
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || v <= 0 { // "max": no limit
		return 0
	}
	return v
}
