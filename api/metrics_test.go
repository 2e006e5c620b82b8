package api

import (
	"context"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/dpfl/dpfl/api/client"
	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/secagg"
)

// scrape GETs /metrics with bearer and returns the status and, on 200,
// the parsed families.
func (s *testServer) scrape(bearer string) (int, map[string]*dto.MetricFamily, string) {
	s.t.Helper()
	req, _ := http.NewRequest("GET", s.url+"/metrics", nil)
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, nil, string(b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(b)))
	if err != nil {
		s.t.Fatalf("parsing the exposition: %v\n%s", err, b)
	}
	return resp.StatusCode, fams, string(b)
}

// labels is a metric's labels as a map.
func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// series returns the metrics of family name whose labels include want.
func series(fams map[string]*dto.MetricFamily, name string, want map[string]string) []*dto.Metric {
	var out []*dto.Metric
	for _, m := range fams[name].GetMetric() {
		l := labels(m)
		ok := true
		for k, v := range want {
			ok = ok && l[k] == v
		}
		if ok {
			out = append(out, m)
		}
	}
	return out
}

// value is the value of the one metric of family name with labels want
// (a gauge's, a counter's, or a histogram's count); ok is false when
// there is none.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	t.Helper()
	ms := series(fams, name, want)
	switch len(ms) {
	case 0:
		return 0, false
	case 1:
	default:
		t.Fatalf("%s%v: %d series, want one", name, want, len(ms))
	}
	m := ms[0]
	switch {
	case m.Gauge != nil:
		return m.Gauge.GetValue(), true
	case m.Counter != nil:
		return m.Counter.GetValue(), true
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount()), true
	}
	t.Fatalf("%s%v: unexpected type", name, want)
	return 0, false
}

// submitAndWait submits spec and waits for the job to end.
func (s *testServer) submitAndWait(spec string) types.Status {
	s.t.Helper()
	var st types.Status
	if code, e := s.call("POST", "/v1/jobs", "tok", "", spec, &st); code != http.StatusCreated {
		s.t.Fatalf("submit %s: %d %s", spec, code, e.Error)
	}
	s.m.Wait(st.ID)
	if code, e := s.call("GET", "/v1/jobs/"+st.ID, "tok", "", "", &st); code != 200 || st.State != types.StateCompleted {
		s.t.Fatalf("job %s: %d %s, state %s: %s", st.ID, code, e.Error, st.State, st.Message)
	}
	return st
}

// runDevicesRound runs a devices job's one round with n enrolled devices
// over HTTP (secagg.ClientDriver over client.Participation) and waits for
// the job to end. It returns the devices' IDs.
func (s *testServer) runDevicesRound(spec string, n int) (types.Status, []string) {
	s.t.Helper()
	id := s.openJob(spec)
	ctx, cancel := context.WithTimeout(s.t.Context(), time.Minute)
	defer cancel()
	var devices []string
	parts := make([]*client.Participation, n)
	for i := range n {
		en := s.enroll(id)
		devices = append(devices, en.DeviceID)
		p, err := client.New(s.url, en.Credential).Join(ctx, id)
		if err != nil {
			s.t.Fatalf("device %d joins: %v", i, err)
		}
		p.Poll = 10 * time.Millisecond
		parts[i] = p
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, p := range parts {
		drv := &secagg.ClientDriver{ID: p.Info.ClientID, Session: p.Info.Session, Workers: 1,
			Input: func(context.Context) ([]uint32, error) { return make([]uint32, len(p.Info.Params)), nil }}
		wg.Go(func() { errs[i] = drv.Run(ctx, p) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			s.t.Fatalf("device %d: %v", i, err)
		}
	}
	s.m.Wait(id)
	var st types.Status
	if code, e := s.call("GET", "/v1/jobs/"+id, "tok", "", "", &st); code != 200 || st.State != types.StateCompleted {
		s.t.Fatalf("devices job %s: %d %s, state %s: %s", id, code, e.Error, st.State, st.Message)
	}
	return st, devices
}

// GET /metrics after a few small jobs: the families are there and agree
// with the API (rounds with the job's status, ε with its privacy report,
// a budget's ε with the budget's report), the HTTP series are by route
// template, and only a token opens it.
func TestMetrics(t *testing.T) {
	s := newTestServerWith(t, Config{DeviceRate: 1000, DeviceBurst: 1000})
	for _, bearer := range []string{"", "wrong"} {
		if code, _, body := s.scrape(bearer); code != http.StatusUnauthorized {
			t.Fatalf("scrape with token %q: %d %s, want 401", bearer, code, body)
		}
	}
	if code, e := s.call("PUT", "/v1/budgets/team", "tok", "", `{"epsilon_budget": 40, "delta": 1e-5}`, nil); code != 201 {
		t.Fatalf("budget: %d %s", code, e.Error)
	}
	own := s.submitAndWait(`{"population": {"size": 300}, "sampling": {"rate": 0.1}, "rounds": 2, "eval_every": 1, "dp": {"epsilon_budget": 50}}`)
	shared := s.submitAndWait(`{"population": {"size": 300}, "sampling": {"scheme": "fixed", "cohort_size": 20}, "rounds": 2, "dp": {"budget": "team"}}`)
	plain := s.submitAndWait(`{"population": {"size": 300}, "sampling": {"rate": 0.1}, "rounds": 3, "dp": {"enabled": false}}`)
	devices, _ := s.runDevicesRound(`{"population": {"source": "devices"}, "sampling": {"scheme": "fixed", "cohort_size": 3}, "secure_aggregation": true, "rounds": 1, "dp": {"enabled": false}}`, 3)
	s.call("GET", "/v1/jobs/job-000000000000", "tok", "", "", nil) // a 404, by its route

	for _, tok := range []string{"tok", "audit"} {
		if code, _, body := s.scrape(tok); code != 200 {
			t.Fatalf("scrape with the %s token: %d %s", tok, code, body)
		}
	}
	_, fams, text := s.scrape("audit")
	for _, name := range []string{
		"dpfl_http_requests_total", "dpfl_http_request_duration_seconds", "dpfl_jobs", "dpfl_job_info",
		"dpfl_job_rounds_committed_total", "dpfl_job_rounds_planned", "dpfl_job_round_selected_clients", "dpfl_job_round_reported_clients",
		"dpfl_job_epsilon_spent", "dpfl_job_epsilon_budget", "dpfl_job_epsilon_remaining",
		"dpfl_budget_epsilon_spent", "dpfl_budget_epsilon_budget", "dpfl_budget_epsilon_remaining",
		"dpfl_job_round_duration_seconds", "dpfl_job_accounting_duration_seconds", "dpfl_secagg_stage_duration_seconds",
		"go_goroutines",
	} {
		if fams[name] == nil {
			t.Fatalf("no family %s in the exposition:\n%s", name, text)
		}
	}
	if v, _ := value(t, fams, "dpfl_jobs", map[string]string{"state": "completed"}); v != 4 {
		t.Errorf("dpfl_jobs{state=completed} = %v, want 4", v)
	}

	// Rounds, against each job's status.
	for _, st := range []types.Status{own, shared, plain, devices} {
		j := map[string]string{"job": st.ID}
		if v, ok := value(t, fams, "dpfl_job_rounds_committed_total", j); !ok || v != float64(st.Round) || st.Round != st.Spec.Rounds {
			t.Errorf("%s: rounds committed %v (%v), status says %d of %d", st.ID, v, ok, st.Round, st.Spec.Rounds)
		}
		info := series(fams, "dpfl_job_info", j)
		if len(info) != 1 || labels(info[0])["state"] != "completed" || labels(info[0])["dp"] != boolLabel(st.Spec.DP.Enabled) {
			t.Errorf("%s: info %v", st.ID, info)
		}
	}

	// ε, against the privacy reports and the budget's.
	for _, st := range []types.Status{own, shared} {
		var rep types.PrivacyReport
		if code, e := s.call("GET", "/v1/jobs/"+st.ID+"/privacy", "audit", "", "", &rep); code != 200 || rep.Epsilon == nil {
			t.Fatalf("privacy %s: %d %s %+v", st.ID, code, e.Error, rep)
		}
		j := map[string]string{"job": st.ID}
		if v, ok := value(t, fams, "dpfl_job_epsilon_spent", j); !ok || v != *rep.Epsilon {
			t.Errorf("%s: ε %v (%v), privacy report %v", st.ID, v, ok, *rep.Epsilon)
		}
		v, ok := value(t, fams, "dpfl_job_epsilon_remaining", j)
		if (rep.Remaining != nil) != ok || ok && v != *rep.Remaining {
			t.Errorf("%s: remaining %v (%v), privacy report %v", st.ID, v, ok, rep.Remaining)
		}
		if n, _ := value(t, fams, "dpfl_job_accounting_duration_seconds", j); n != float64(len(rep.Events)) {
			t.Errorf("%s: %v accounting observations, %d ledger events", st.ID, n, len(rep.Events))
		}
	}
	if v, ok := value(t, fams, "dpfl_job_epsilon_budget", map[string]string{"job": own.ID}); !ok || v != 50 {
		t.Errorf("own ε_max %v (%v)", v, ok)
	}
	var br types.BudgetReport
	if code, e := s.call("GET", "/v1/budgets/team", "audit", "", "", &br); code != 200 || br.Epsilon == nil {
		t.Fatalf("budget: %d %s %+v", code, e.Error, br)
	}
	b := map[string]string{"budget": "team"}
	if v, _ := value(t, fams, "dpfl_budget_epsilon_spent", b); v != *br.Epsilon {
		t.Errorf("budget ε %v, report %v", v, *br.Epsilon)
	}
	if v, _ := value(t, fams, "dpfl_budget_epsilon_remaining", b); v != br.Remaining {
		t.Errorf("budget remaining %v, report %v", v, br.Remaining)
	}
	if v, _ := value(t, fams, "dpfl_budget_epsilon_budget", b); v != 40 {
		t.Errorf("budget ε_max %v", v)
	}

	// Participation and timings of the jobs without DP, against their
	// rounds.
	var rounds struct {
		Rounds []types.RoundRecord `json:"rounds"`
	}
	s.call("GET", "/v1/jobs/"+plain.ID+"/rounds", "tok", "", "", &rounds)
	last := rounds.Rounds[len(rounds.Rounds)-1]
	j := map[string]string{"job": plain.ID}
	if v, _ := value(t, fams, "dpfl_job_round_selected_clients", j); v != float64(last.Selected) || v == 0 {
		t.Errorf("selected %v, last round %+v", v, last)
	}
	if v, _ := value(t, fams, "dpfl_job_round_reported_clients", j); v != float64(last.Reported) || v == 0 {
		t.Errorf("reported %v, last round %+v", v, last)
	}
	h := series(fams, "dpfl_job_round_duration_seconds", j)
	total := 0.0
	for _, r := range rounds.Rounds {
		total += r.Seconds
	}
	if len(h) != 1 || h[0].Histogram.GetSampleCount() != uint64(len(rounds.Rounds)) || math.Abs(h[0].Histogram.GetSampleSum()-total) > 1e-9 {
		t.Errorf("round durations %v, want %d rounds summing to %v", h, len(rounds.Rounds), total)
	}
	for _, stage := range []string{"advertise_keys", "share_keys", "masked_input", "unmask", "unmask_sum"} {
		if n, _ := value(t, fams, "dpfl_secagg_stage_duration_seconds", map[string]string{"job": devices.ID, "stage": stage}); n != 1 {
			t.Errorf("devices job: %v observations of stage %s, want 1", n, stage)
		}
	}
	if v, _ := value(t, fams, "dpfl_job_round_reported_clients", map[string]string{"job": devices.ID}); v != 3 {
		t.Errorf("devices job: %v reported, want 3", v)
	}

	// HTTP series: route templates only.
	var saw404, saw401 bool
	for _, m := range fams["dpfl_http_request_duration_seconds"].GetMetric() {
		l := labels(m)
		switch {
		case strings.Contains(l["url"], "job-") || !strings.HasPrefix(l["url"], "/") && l["url"] != "unmatched":
			t.Errorf("HTTP series labelled by a URL: %v", l)
		case strings.HasPrefix(l["url"], participatePrefix):
			t.Errorf("a participate route is measured: %v", l)
		case l["host"] != "":
			t.Errorf("host label %q", l["host"])
		}
		saw404 = saw404 || l["url"] == "/v1/jobs/:id" && l["code"] == "404" && l["method"] == "GET"
		saw401 = saw401 || l["url"] == "/metrics" && l["code"] == "401"
	}
	if !saw404 || !saw401 {
		t.Errorf("no series for the 404 of GET /v1/jobs/:id (%v) or the 401 of /metrics (%v)", saw404, saw401)
	}
}

func boolLabel(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// A DP job's series hold nothing but public configuration, ε and its
// committed rounds: every label value is an ID or a public name, the
// participation counts the API withholds are absent (reports always, the
// cohort unless it is a fixed simulated one), and so are round and
// secure aggregation times. The devices' IDs appear nowhere.
func TestMetricsDPJobsReleaseNothingPrivate(t *testing.T) {
	s := newTestServerWith(t, Config{DeviceRate: 1000, DeviceBurst: 1000})
	if code, e := s.call("PUT", "/v1/budgets/team", "tok", "", `{"epsilon_budget": 40, "delta": 1e-5}`, nil); code != 201 {
		t.Fatalf("budget: %d %s", code, e.Error)
	}
	poisson := s.submitAndWait(`{"population": {"size": 300}, "sampling": {"rate": 0.1}, "rounds": 2, "participation": {"dropout_rate": 0.2}, "dp": {"epsilon_budget": 50}}`)
	fixed := s.submitAndWait(`{"population": {"size": 300}, "sampling": {"scheme": "fixed", "cohort_size": 20}, "secure_aggregation": true, "rounds": 2, "dp": {"budget": "team"}}`)
	devices, deviceIDs := s.runDevicesRound(devicesJob, 3)
	_, fams, text := s.scrape("tok")

	private := map[string]types.Status{poisson.ID: poisson, fixed.ID: fixed, devices.ID: devices}
	// What a DP job's series may be, and the values each label may take.
	allowed := map[string]bool{
		"dpfl_job_info": true, "dpfl_job_rounds_committed_total": true, "dpfl_job_rounds_planned": true,
		"dpfl_job_round_selected_clients": true, "dpfl_job_epsilon_spent": true, "dpfl_job_epsilon_budget": true,
		"dpfl_job_epsilon_remaining": true, "dpfl_job_accounting_duration_seconds": true,
	}
	jobID := regexp.MustCompile(`^job-[0-9a-f]{12}$`)
	public := map[string][]string{
		"state":              {"pending", "running", "completed", "failed", "cancelled", "budget_exhausted"},
		"model":              {"logreg", "mlp", "cnn"},
		"dataset":            {"fashion-mnist", "synthetic", "leaf"},
		"population":         {"simulated", "devices", ""},
		"dp":                 {"true"},
		"secure_aggregation": {"true", "false"},
		"budget":             {"team", ""},
	}
	seen := map[string]map[string]bool{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			l := labels(m)
			st, ok := private[l["job"]]
			if !ok {
				continue
			}
			if !allowed[name] {
				t.Errorf("DP job %s has a series %s%v", st.ID, name, l)
			}
			if seen[st.ID] == nil {
				seen[st.ID] = map[string]bool{}
			}
			seen[st.ID][name] = true
			for k, v := range l {
				switch {
				case k == "job":
					if !jobID.MatchString(v) {
						t.Errorf("%s: job label %q", name, v)
					}
				case !slices.Contains(public[k], v):
					t.Errorf("%s{job=%s}: label %s=%q is not a public name", name, st.ID, k, v)
				}
			}
			if name == "dpfl_job_round_selected_clients" {
				if st.ID != fixed.ID || m.Gauge.GetValue() != 20 {
					t.Errorf("DP job %s: selected %v; only a fixed simulated cohort's configured K may show", st.ID, m.Gauge.GetValue())
				}
			}
		}
	}
	for id := range private {
		for _, name := range []string{"dpfl_job_info", "dpfl_job_rounds_committed_total", "dpfl_job_epsilon_spent", "dpfl_job_accounting_duration_seconds"} {
			if !seen[id][name] {
				t.Errorf("DP job %s: no %s", id, name)
			}
		}
	}
	if !seen[fixed.ID]["dpfl_job_round_selected_clients"] {
		t.Errorf("the fixed cohort's configured size is missing")
	}
	for _, d := range deviceIDs {
		if strings.Contains(text, d) {
			t.Errorf("device ID %s in the exposition", d)
		}
	}
}

// Several handlers over one manager each have their own registry.
func TestMetricsRegistryPerServer(t *testing.T) {
	s := newTestServer(t)
	cfg := Config{Tokens: &Tokens{}}
	cfg.Tokens.Add(HashToken("x"), RoleAuditor)
	for range 2 {
		srv := httptest.NewServer(New(s.m, cfg))
		req, _ := http.NewRequest("GET", srv.URL+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer x")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		srv.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("scrape: %d", resp.StatusCode)
		}
	}
}
