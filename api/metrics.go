package api

import (
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/labstack/echo-contrib/echoprometheus"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/job"
)

// Prometheus metrics (issue 17; docs/metrics.md lists every family):
//
//	GET /metrics   the Prometheus text exposition; an API token (admin or auditor)
//
// Each handler has its own prometheus.Registry, so that several servers
// in one process (tests) do not share or collide. Three sources feed it:
//
//   - echo-contrib's echoprometheus middleware: every request's latency,
//     count and sizes by route template (c.Path(), never the URL: no job
//     ID in an HTTP label), method and status code. The participate
//     routes are left out: how many requests devices make, per stage,
//     counts the participants of a round, which a DP job does not
//     release.
//   - jobCollector, which reads the job manager's public state at scrape
//     time (List, Get, and the ε of the privacy and budget reports), so a
//     series says exactly what the API says: a DP job's series hold only
//     its public configuration, its committed rounds, its ε and, for a
//     fixed simulated cohort, the configured cohort size;
//   - histograms of server-side timings that the job manager reports as
//     rounds run (job.Observer): round wall time and secure aggregation
//     stages for jobs without DP only, accounting time for DP jobs.

// metricsNamespace prefixes every dpfl metric.
const metricsNamespace = "dpfl"

// observeHTTP installs the Prometheus instrumentation: the request
// metrics middleware, the job collector and timing histograms, and
// GET /metrics behind the API token (either role: Prometheus sends
// "authorization: Bearer").
func observeHTTP(e *echo.Echo, m *job.Manager, cfg Config) {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	e.Use(echoprometheus.NewMiddlewareWithConfig(echoprometheus.MiddlewareConfig{
		Namespace:                 metricsNamespace,
		Subsystem:                 "http",
		Registerer:                reg,
		Skipper:                   deviceRoute,
		DoNotUseRequestPathFor404: true,
		LabelFuncs: map[string]echoprometheus.LabelValueFunc{
			"url":    func(c echo.Context, _ error) string { return routeLabel(c) },
			"method": func(c echo.Context, _ error) string { return methodLabel(c.Request().Method) },
			// The Host header is the client's to choose: as a label it
			// would let anyone add series without bound.
			"host": func(echo.Context, error) string { return "" },
		},
		StatusCodeResolver: statusCode,
	}))
	jc := newJobCollector(m, log)
	reg.MustRegister(jc, jc.roundSeconds, jc.accountingSeconds, jc.stageSeconds, jc.errors)
	m.Observe(jc.observer())
	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: metricsNamespace, Subsystem: "store", Name: "fenced_writes_total",
			Help: "Writes of this replica that etcd refused because it no longer led their job (a stale leader stopped by the fence)."},
			func() float64 { return float64(m.FencedWrites()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: metricsNamespace, Subsystem: "leader", Name: "phantom_wins_total",
			Help: "Election wins this replica refused because etcd disagreed (its lease had expired while it waited)."},
			func() float64 { return float64(m.PhantomWins()) }))
	h := promhttp.InstrumentMetricHandler(reg, promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ErrorHandling:     promhttp.ContinueOnError,
		Registry:          reg,
		EnableOpenMetrics: true,
	}))
	e.GET("/metrics", echo.WrapHandler(h), tokenAuth(cfg.Tokens))
}

// participatePrefix is the route template of the devices' routes.
const participatePrefix = "/v1/jobs/:id/participate"

// deviceRoute skips the participate routes in the request metrics.
func deviceRoute(c echo.Context) bool { return strings.HasPrefix(c.Path(), participatePrefix) }

// routeLabel is the request's route template; a request that matched no
// route is "unmatched" (its path is the client's to choose).
func routeLabel(c echo.Context) string {
	if p := c.Path(); p != "" {
		return strings.ToValidUTF8(p, "\uFFFD")
	}
	return "unmatched"
}

// methodLabel is an HTTP method for a label: any other than the standard
// ones is "other", for the same reason as the Host header.
func methodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return method
	}
	return "other"
}

// statusCode is the status a request was answered with: its handler's
// error mapped as the error handler maps it (errorResponse), which runs
// only after the middleware returns.
func statusCode(c echo.Context, err error) int {
	if err != nil {
		code, _ := errorResponse(err)
		return code
	}
	if s := c.Response().Status; s != 0 {
		return s
	}
	return http.StatusOK
}

// Buckets of the timing histograms, in seconds.
var (
	roundBuckets      = []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000}
	accountingBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
)

// jobCollector exports the jobs' and budgets' public state at scrape time
// and holds the histograms that the manager's observer fills.
type jobCollector struct {
	m   *job.Manager
	log *slog.Logger

	jobs, info, rounds, planned, selected, reported *prometheus.Desc
	epsSpent, epsBudget, epsRemaining               *prometheus.Desc
	budgetSpent, budgetBudget, budgetRemaining      *prometheus.Desc

	roundSeconds, accountingSeconds, stageSeconds *prometheus.HistogramVec
	// errors counts the jobs and budgets a scrape could not read (each
	// logged).
	errors prometheus.Counter

	mu sync.Mutex
	// latest caches each job's last committed round as the API releases
	// it (Status.Latest), by the round it was read at: a committed round
	// never changes.
	latest map[string]latestRound
}

type latestRound struct {
	round int
	met   *types.RoundMetrics
	err   error
}

func newJobCollector(m *job.Manager, log *slog.Logger) *jobCollector {
	name := func(sub, n string) string { return prometheus.BuildFQName(metricsNamespace, sub, n) }
	job1 := []string{"job"}
	budget1 := []string{"budget"}
	return &jobCollector{
		m: m, log: log, latest: map[string]latestRound{},
		jobs: prometheus.NewDesc(name("", "jobs"), "Jobs in each state.", []string{"state"}, nil),
		info: prometheus.NewDesc(name("job", "info"), "A job's state and public configuration (value 1).",
			[]string{"job", "state", "model", "dataset", "population", "dp", "secure_aggregation", "budget"}, nil),
		rounds:          prometheus.NewDesc(name("job", "rounds_committed_total"), "Rounds the job has committed.", job1, nil),
		planned:         prometheus.NewDesc(name("job", "rounds_planned"), "Rounds the job is configured to run (spec.rounds).", job1, nil),
		selected:        prometheus.NewDesc(name("job", "round_selected_clients"), "Clients selected in the job's last committed round (under DP only a fixed simulated cohort's configured size).", job1, nil),
		reported:        prometheus.NewDesc(name("job", "round_reported_clients"), "Clients whose updates the job's last committed round aggregated (jobs without DP only).", job1, nil),
		epsSpent:        prometheus.NewDesc(name("job", "epsilon_spent"), "ε over the job's whole privacy ledger at its δ, as GET /v1/jobs/{id}/privacy reports it (DP jobs).", job1, nil),
		epsBudget:       prometheus.NewDesc(name("job", "epsilon_budget"), "The job's own ε_max (dp.epsilon_budget; DP jobs that set one).", job1, nil),
		epsRemaining:    prometheus.NewDesc(name("job", "epsilon_remaining"), "The job's ε_max less its ε spent (DP jobs with dp.epsilon_budget).", job1, nil),
		budgetSpent:     prometheus.NewDesc(name("budget", "epsilon_spent"), "ε over every ledger event of a shared budget's jobs, at the budget's δ, as GET /v1/budgets/{name} reports it.", budget1, nil),
		budgetBudget:    prometheus.NewDesc(name("budget", "epsilon_budget"), "A shared budget's ε_max.", budget1, nil),
		budgetRemaining: prometheus.NewDesc(name("budget", "epsilon_remaining"), "A shared budget's ε_max less its ε spent.", budget1, nil),
		roundSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: metricsNamespace, Subsystem: "job", Name: "round_duration_seconds",
			Help: "Wall time of each committed round, from its start to its commit (jobs without DP only).", Buckets: roundBuckets,
		}, job1),
		accountingSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: metricsNamespace, Subsystem: "job", Name: "accounting_duration_seconds",
			Help: "Time to charge each round of a DP job: budget checks, the write-ahead ledger append and ε's recomputation.", Buckets: accountingBuckets,
		}, job1),
		stageSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: metricsNamespace, Subsystem: "secagg", Name: "stage_duration_seconds",
			Help: "Duration of each secure aggregation stage of a devices round (jobs without DP only).", Buckets: roundBuckets,
		}, []string{"job", "stage"}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: "metrics", Name: "read_errors_total",
			Help: "Jobs or budgets whose state a scrape could not read (the server log says why).",
		}),
	}
}

// observer fills the timing histograms as the manager runs rounds.
func (c *jobCollector) observer() job.Observer {
	return job.Observer{
		RoundSeconds:      func(id string, s float64) { c.roundSeconds.WithLabelValues(id).Observe(s) },
		AccountingSeconds: func(id string, s float64) { c.accountingSeconds.WithLabelValues(id).Observe(s) },
		SecAggStageSeconds: func(id, stage string, s float64) {
			c.stageSeconds.WithLabelValues(id, stage).Observe(s)
		},
	}
}

func (c *jobCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.jobs, c.info, c.rounds, c.planned, c.selected, c.reported,
		c.epsSpent, c.epsBudget, c.epsRemaining, c.budgetSpent, c.budgetBudget, c.budgetRemaining} {
		ch <- d
	}
}

// jobStates are the states dpfl_jobs always shows, 0 included.
var jobStates = []types.JobState{types.StatePending, types.StateRunning, types.StateCompleted,
	types.StateFailed, types.StateCancelled, types.StateBudgetExhausted}

func (c *jobCollector) Collect(ch chan<- prometheus.Metric) {
	jobs, err := c.m.List()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.jobs, err)
		return
	}
	count := map[types.JobState]int{}
	for _, st := range jobs {
		count[st.State]++
		c.collectJob(ch, st)
	}
	for _, s := range jobStates {
		c.emit(ch, c.jobs, prometheus.GaugeValue, float64(count[s]), string(s))
	}
	names, err := c.m.BudgetNames()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.budgetSpent, err)
		return
	}
	for _, name := range names {
		sp, err := c.m.BudgetEpsilon(name)
		if err != nil {
			c.readError("budget", name, err)
			continue
		}
		c.emit(ch, c.budgetBudget, prometheus.GaugeValue, sp.EpsilonBudget, name)
		c.emit(ch, c.budgetRemaining, prometheus.GaugeValue, sp.Remaining, name)
		if sp.Epsilon != nil {
			c.emit(ch, c.budgetSpent, prometheus.GaugeValue, *sp.Epsilon, name)
		}
	}
}

// collectJob exports one job: what its status, metrics and privacy
// report show, and nothing else.
func (c *jobCollector) collectJob(ch chan<- prometheus.Metric, st types.Status) {
	s, id := st.Spec, st.ID
	c.emit(ch, c.info, prometheus.GaugeValue, 1, id, string(st.State), s.Model, s.Dataset, s.Population.Source,
		strconv.FormatBool(s.DP.Enabled), strconv.FormatBool(s.SecureAggregation), s.DP.Budget)
	c.emit(ch, c.rounds, prometheus.CounterValue, float64(st.Round), id)
	if s.Rounds == 0 {
		// Its configuration did not decode (the API shows a zero spec):
		// whether it is a DP job is unknown, so nothing more.
		return
	}
	c.emit(ch, c.planned, prometheus.GaugeValue, float64(s.Rounds), id)
	if met := c.latestRound(st); met != nil {
		switch {
		case !s.DP.Enabled:
			c.emit(ch, c.selected, prometheus.GaugeValue, float64(met.Selected), id)
			c.emit(ch, c.reported, prometheus.GaugeValue, float64(met.Reported), id)
		case s.Sampling.Scheme == "fixed" && s.Population.Source != "devices" && met.Selected > 0:
			// The configured K, which the API releases; never a count of
			// reports.
			c.emit(ch, c.selected, prometheus.GaugeValue, float64(met.Selected), id)
		}
	}
	if !s.DP.Enabled {
		return
	}
	if s.DP.EpsilonBudget > 0 {
		c.emit(ch, c.epsBudget, prometheus.GaugeValue, s.DP.EpsilonBudget, id)
	}
	eps, err := c.m.LedgerEpsilon(id)
	if err != nil {
		c.readError("job", id, err)
		return
	}
	if eps != nil {
		c.emit(ch, c.epsSpent, prometheus.GaugeValue, *eps, id)
		if s.DP.EpsilonBudget > 0 {
			c.emit(ch, c.epsRemaining, prometheus.GaugeValue, s.DP.EpsilonBudget-*eps, id)
		}
	}
}

// latestRound is job st's last committed round as GET /v1/jobs/{id}
// shows it (nil before the first, or when it cannot be read), read once
// per committed round.
func (c *jobCollector) latestRound(st types.Status) *types.RoundMetrics {
	if st.Round == 0 {
		return nil
	}
	c.mu.Lock()
	l, ok := c.latest[st.ID]
	c.mu.Unlock()
	if !ok || l.round != st.Round {
		full, err := c.m.Get(st.ID)
		l = latestRound{round: st.Round, met: full.Latest, err: err}
		if err == nil && full.Round != st.Round {
			l.round = full.Round // a round committed in between
		}
		if err != nil {
			c.readError("job", st.ID, err)
		}
		c.mu.Lock()
		c.latest[st.ID] = l
		c.mu.Unlock()
	}
	if l.err != nil {
		return nil
	}
	return l.met
}

// readError logs a job or budget that a scrape could not read and
// counts it.
func (c *jobCollector) readError(kind, name string, err error) {
	c.errors.Inc()
	c.log.Warn("metrics: reading "+kind+" failed", kind, name, "err", err)
}

// emit sends one constant metric; a label value Prometheus refuses (not
// UTF-8) drops the series, with a log line, rather than the scrape.
func (c *jobCollector) emit(ch chan<- prometheus.Metric, d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
	m, err := prometheus.NewConstMetric(d, t, v, labels...)
	if err != nil {
		c.errors.Inc()
		c.log.Warn("metrics: series dropped", "metric", d.String(), "err", err)
		return
	}
	ch <- m
}
