// Package client is the Go client of dpfl's REST API (package api), used by
// cmd/dpfl-client and the end-to-end tests. It speaks the wire types of
// package api/types and depends on nothing else of dpfl but secure
// aggregation's messages (package secagg), so that a program that only
// talks to a server links none of the server's code.
package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/dpfl/dpfl/api/types"
)

// Client talks to one dpfl-server.
type Client struct {
	base  string
	token string
	http  *http.Client
}

// Option configures a Client.
type Option func(*Client)

// WithRootCAs makes the client trust, for an https:// server, the
// certificate authorities in pool instead of the system's: for a server
// whose certificate a private CA, or the server itself, signed.
func WithRootCAs(pool *x509.CertPool) Option {
	return func(c *Client) {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		c.http.Transport = t
	}
}

// LoadCA reads PEM certificates from file into a pool for WithRootCAs.
func LoadCA(file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading CA certificates: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s holds no PEM certificate", file)
	}
	return pool, nil
}

// New returns a client for the server at base (e.g.
// "https://dpfl.example:8443") authenticating with token: an API token
// (admin or auditor) for the administrative calls, or a device's
// credential (from EnrollDevice) for the participate calls of
// participate.go. Neither opens the other's routes.
func New(base, token string, opts ...Option) *Client {
	c := &Client{base: strings.TrimRight(base, "/"), token: token, http: &http.Client{Timeout: 60 * time.Second}}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Error is a non-2xx response.
type Error struct {
	Status int
	types.ErrorBody
}

func (e *Error) Error() string {
	text := http.StatusText(e.Status)
	msg := e.ErrorBody.Error
	// Older servers began messages with the status again ("conflict: …"
	// under 409 Conflict); say it once.
	if len(msg) > len(text)+2 && strings.EqualFold(msg[:len(text)], text) && msg[len(text):len(text)+2] == ": " {
		msg = msg[len(text)+2:]
	}
	if msg == "" || msg == text {
		return fmt.Sprintf("server said %d %s", e.Status, text)
	}
	return fmt.Sprintf("server said %d %s: %s", e.Status, text, msg)
}

// maxRateRetries and maxRetryAfter bound how often, and how long, do
// waits out a server's rate limit before it returns the 429.
const (
	maxRateRetries = 5
	maxRetryAfter  = 10 * time.Second
)

// do sends one request; header holds extra header name/value pairs. A
// 429 with Retry-After (a rate limit: the server did nothing with the
// request) is sent again after the wait, up to maxRateRetries times.
func (c *Client) do(ctx context.Context, method, path string, body []byte, out any, header ...string) error {
	for attempt := 0; ; attempt++ {
		status, b, retryAfter, err := c.send(ctx, method, path, body, header)
		if err != nil {
			return err
		}
		if status == http.StatusTooManyRequests && retryAfter > 0 && attempt < maxRateRetries {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(retryAfter):
			}
			continue
		}
		if status/100 != 2 {
			e := &Error{Status: status}
			if json.Unmarshal(b, &e.ErrorBody) != nil || e.ErrorBody.Error == "" {
				e.ErrorBody.Error = strings.TrimSpace(string(b))
			}
			return e
		}
		if out == nil {
			return nil
		}
		return json.Unmarshal(b, out)
	}
}

// send makes one HTTP exchange and returns the status, the body and the
// Retry-After wait (0 if absent, unreadable or over maxRetryAfter).
func (c *Client) send(ctx context.Context, method, path string, body []byte, header []string) (int, []byte, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, 0, err
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, 0, fmt.Errorf("contacting dpfl-server at %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, 0, err
	}
	var wait time.Duration
	if n, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && n > 0 && time.Duration(n)*time.Second <= maxRetryAfter {
		wait = time.Duration(n) * time.Second
	}
	return resp.StatusCode, b, wait, nil
}

// Health checks GET /healthz.
func (c *Client) Health(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/healthz", nil, nil)
}

// Submit creates a job from its JSON spec (fields left out take the
// server's defaults).
func (c *Client) Submit(ctx context.Context, spec []byte) (types.Status, error) {
	var st types.Status
	err := c.do(ctx, http.MethodPost, "/v1/jobs", spec, &st)
	return st, err
}

// List returns every job.
func (c *Client) List(ctx context.Context) ([]types.Status, error) {
	var out struct {
		Jobs []types.Status `json:"jobs"`
	}
	err := c.do(ctx, http.MethodGet, "/v1/jobs", nil, &out)
	return out.Jobs, err
}

// Job returns one job's status.
func (c *Client) Job(ctx context.Context, id string) (types.Status, error) {
	var st types.Status
	err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id), nil, &st)
	return st, err
}

// Metrics returns every committed round of a job.
func (c *Client) Metrics(ctx context.Context, id string) ([]types.RoundMetrics, error) {
	var out struct {
		Rounds []types.RoundMetrics `json:"rounds"`
	}
	err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id)+"/metrics", nil, &out)
	return out.Rounds, err
}

// Rounds returns every committed round's participation and timing.
func (c *Client) Rounds(ctx context.Context, id string) ([]types.RoundRecord, error) {
	var out struct {
		Rounds []types.RoundRecord `json:"rounds"`
	}
	err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id)+"/rounds", nil, &out)
	return out.Rounds, err
}

// Privacy returns a job's privacy ledger and ε.
func (c *Client) Privacy(ctx context.Context, id string) (types.PrivacyReport, error) {
	var rep types.PrivacyReport
	err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id)+"/privacy", nil, &rep)
	return rep, err
}

// Cancel stops a running job.
func (c *Client) Cancel(ctx context.Context, id string) (types.Status, error) {
	var st types.Status
	err := c.do(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(id)+"/cancel", nil, &st)
	return st, err
}

// Model returns a job's latest global model.
func (c *Client) Model(ctx context.Context, id string) (types.ModelExport, error) {
	var m types.ModelExport
	err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id)+"/model", nil, &m)
	return m, err
}

// CreateBudget creates the shared privacy budget name with (ε_max, δ).
func (c *Client) CreateBudget(ctx context.Context, name string, epsilon, delta float64) (types.BudgetReport, error) {
	body, _ := json.Marshal(types.BudgetRequest{EpsilonBudget: epsilon, Delta: delta})
	var rep types.BudgetReport
	err := c.do(ctx, http.MethodPut, "/v1/budgets/"+url.PathEscape(name), body, &rep)
	return rep, err
}

// Budget reports shared budget name: its jobs, spend and remaining ε.
func (c *Client) Budget(ctx context.Context, name string) (types.BudgetReport, error) {
	var rep types.BudgetReport
	err := c.do(ctx, http.MethodGet, "/v1/budgets/"+url.PathEscape(name), nil, &rep)
	return rep, err
}

// EnrollDevice enrolls a new device for devices job id and returns its ID
// and credential. The server keeps only the credential's hash: this is
// the one time it is shown.
func (c *Client) EnrollDevice(ctx context.Context, id string) (types.Enrollment, error) {
	var en types.Enrollment
	err := c.do(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(id)+"/devices", nil, &en)
	return en, err
}

// Devices lists the devices enrolled for devices job id, oldest first.
func (c *Client) Devices(ctx context.Context, id string) ([]types.DeviceInfo, error) {
	var out struct {
		Devices []types.DeviceInfo `json:"devices"`
	}
	err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id)+"/devices", nil, &out)
	return out.Devices, err
}

// Wait polls job id every interval until it reaches a terminal state,
// calling progress (if non-nil) with each status seen. It never gives up
// on a job that stays running; Watch does.
func (c *Client) Wait(ctx context.Context, id string, interval time.Duration, progress func(types.Status)) (types.Status, error) {
	return c.Watch(ctx, id, WatchOptions{Interval: interval, Progress: progress})
}

// WatchOptions configure Watch.
type WatchOptions struct {
	// Interval is the time between polls (≤ 0: one second).
	Interval time.Duration
	// Stall, if > 0, ends the watch with a *StalledError when the job's
	// state and round stay the same for this long.
	Stall time.Duration
	// Progress, if non-nil, sees every status polled.
	Progress func(types.Status)
}

// StalledError is a job that made no progress within WatchOptions.Stall:
// it stays in a running state at one round, as when the server has
// stopped running it (it failed to record its end, say) or a round hangs.
type StalledError struct {
	Job   types.Status
	Stall time.Duration
}

func (e *StalledError) Error() string {
	return fmt.Sprintf("job %s made no progress for %s: still %s after round %d of %d. The server may have stopped running it (look in its log); if its rounds are just slow, allow longer (--stall-timeout)",
		e.Job.ID, e.Stall, e.Job.State, e.Job.Round, e.Job.Spec.Rounds)
}

// Watch polls job id until it reaches a terminal state. It returns an
// error as soon as a poll fails (the server's error, or no answer), and
// a *StalledError when opt.Stall passes without the job's state or
// round changing, so it never waits forever on a job that does not move.
func (c *Client) Watch(ctx context.Context, id string, opt WatchOptions) (types.Status, error) {
	if opt.Interval <= 0 {
		opt.Interval = time.Second
	}
	t := time.NewTicker(opt.Interval)
	defer t.Stop()
	var last types.Status
	var lastChange time.Time
	for first := true; ; first = false {
		st, err := c.Job(ctx, id)
		if err != nil {
			return st, err
		}
		if opt.Progress != nil {
			opt.Progress(st)
		}
		if st.State.Terminal() {
			return st, nil
		}
		if now := time.Now(); first || st.State != last.State || st.Round != last.Round {
			last, lastChange = st, now
		} else if opt.Stall > 0 && now.Sub(lastChange) >= opt.Stall {
			return st, &StalledError{Job: st, Stall: opt.Stall}
		}
		select {
		case <-ctx.Done():
			return st, ctx.Err()
		case <-t.C:
		}
	}
}

// IsStatus reports whether err is a server's answer with status code.
func IsStatus(err error, code int) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == code
}
