// Package client is the Go client of dpfl's REST API (package api), used by
// cmd/dpfl-client and the end-to-end tests.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/dpfl/dpfl/api"
	"github.com/dpfl/dpfl/fl/job"
)

// Client talks to one dpfl-server.
type Client struct {
	base  string
	token string
	http  *http.Client
}

// New returns a client for the server at base (e.g.
// "http://127.0.0.1:8080") authenticating with token: the API token for
// the administrative calls, or a device's credential (from
// EnrollDevice) for the participate calls of participate.go. Neither
// opens the other's routes.
func New(base, token string) *Client {
	return &Client{base: strings.TrimRight(base, "/"), token: token, http: &http.Client{Timeout: 60 * time.Second}}
}

// Error is a non-2xx response.
type Error struct {
	Status int
	api.ErrorBody
}

func (e *Error) Error() string {
	return fmt.Sprintf("server said %d %s: %s", e.Status, http.StatusText(e.Status), e.ErrorBody.Error)
}

// do sends one request; header holds extra header name/value pairs.
func (c *Client) do(ctx context.Context, method, path string, body []byte, out any, header ...string) error {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return err
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
		return fmt.Errorf("contacting dpfl-server at %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		e := &Error{Status: resp.StatusCode}
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

// Health checks GET /healthz.
func (c *Client) Health(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/healthz", nil, nil)
}

// Submit creates a job from its JSON spec (fields left out take the
// server's defaults).
func (c *Client) Submit(ctx context.Context, spec []byte) (job.Status, error) {
	var st job.Status
	err := c.do(ctx, http.MethodPost, "/v1/jobs", spec, &st)
	return st, err
}

// List returns every job.
func (c *Client) List(ctx context.Context) ([]job.Status, error) {
	var out struct {
		Jobs []job.Status `json:"jobs"`
	}
	err := c.do(ctx, http.MethodGet, "/v1/jobs", nil, &out)
	return out.Jobs, err
}

// Job returns one job's status.
func (c *Client) Job(ctx context.Context, id string) (job.Status, error) {
	var st job.Status
	err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id), nil, &st)
	return st, err
}

// Metrics returns every committed round of a job.
func (c *Client) Metrics(ctx context.Context, id string) ([]job.RoundMetrics, error) {
	var out struct {
		Rounds []job.RoundMetrics `json:"rounds"`
	}
	err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id)+"/metrics", nil, &out)
	return out.Rounds, err
}

// Rounds returns every committed round's participation and timing.
func (c *Client) Rounds(ctx context.Context, id string) ([]job.RoundRecord, error) {
	var out struct {
		Rounds []job.RoundRecord `json:"rounds"`
	}
	err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id)+"/rounds", nil, &out)
	return out.Rounds, err
}

// Privacy returns a job's privacy ledger and ε.
func (c *Client) Privacy(ctx context.Context, id string) (job.PrivacyReport, error) {
	var rep job.PrivacyReport
	err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id)+"/privacy", nil, &rep)
	return rep, err
}

// Cancel stops a running job.
func (c *Client) Cancel(ctx context.Context, id string) (job.Status, error) {
	var st job.Status
	err := c.do(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(id)+"/cancel", nil, &st)
	return st, err
}

// Model returns a job's latest global model.
func (c *Client) Model(ctx context.Context, id string) (job.ModelExport, error) {
	var m job.ModelExport
	err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id)+"/model", nil, &m)
	return m, err
}

// CreateBudget creates privacy unit name with budget (ε_max, δ).
func (c *Client) CreateBudget(ctx context.Context, name string, epsilon, delta float64) (job.UnitReport, error) {
	body, _ := json.Marshal(api.BudgetRequest{EpsilonBudget: epsilon, Delta: delta})
	var rep job.UnitReport
	err := c.do(ctx, http.MethodPut, "/v1/budgets/"+url.PathEscape(name), body, &rep)
	return rep, err
}

// Budget reports privacy unit name.
func (c *Client) Budget(ctx context.Context, name string) (job.UnitReport, error) {
	var rep job.UnitReport
	err := c.do(ctx, http.MethodGet, "/v1/budgets/"+url.PathEscape(name), nil, &rep)
	return rep, err
}

// EnrollDevice enrolls a new device for devices job id and returns its ID
// and credential. The server keeps only the credential's hash: this is
// the one time it is shown.
func (c *Client) EnrollDevice(ctx context.Context, id string) (job.Enrollment, error) {
	var en job.Enrollment
	err := c.do(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(id)+"/devices", nil, &en)
	return en, err
}

// Devices lists the devices enrolled for devices job id, oldest first.
func (c *Client) Devices(ctx context.Context, id string) ([]job.DeviceInfo, error) {
	var out struct {
		Devices []job.DeviceInfo `json:"devices"`
	}
	err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id)+"/devices", nil, &out)
	return out.Devices, err
}

// Wait polls job id every interval until it reaches a terminal state,
// calling progress (if non-nil) with each status seen.
func (c *Client) Wait(ctx context.Context, id string, interval time.Duration, progress func(job.Status)) (job.Status, error) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		st, err := c.Job(ctx, id)
		if err != nil {
			return st, err
		}
		if progress != nil {
			progress(st)
		}
		if st.State.Terminal() {
			return st, nil
		}
		select {
		case <-ctx.Done():
			return st, ctx.Err()
		case <-t.C:
		}
	}
}
