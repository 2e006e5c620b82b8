package hatest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/dpfl/dpfl/audit"
)

// JobView is what the suite reads of GET /v1/jobs/{id}: its own type, so
// that it reads the leader whether or not api/types has the field.
type JobView struct {
	ID        string      `json:"id"`
	State     string      `json:"state"`
	Message   string      `json:"message"`
	Round     int         `json:"round"`
	UpdatedAt time.Time   `json:"updated_at"`
	Leader    *LeaderView `json:"leader"`
}

// LeaderView is the job's "leader" (issue 18): the replica that runs it,
// its term's epoch, its advertised URL.
type LeaderView struct {
	Replica string `json:"replica"`
	Epoch   int64  `json:"epoch"`
	URL     string `json:"url"`
}

// Terminal reports whether the state is one a job does not leave.
func (j JobView) Terminal() bool {
	switch j.State {
	case "completed", "failed", "cancelled", "budget_exhausted":
		return true
	}
	return false
}

// httpClient is the suite's HTTP client: no keep-alive reuse across a
// replica's restarts matters, but a paused replica must not hang a
// poller, so every call has a context deadline.
var httpClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8, IdleConnTimeout: 5 * time.Second}}

// APIError is a non-2xx answer.
type APIError struct {
	Status int
	Body   string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("HTTP %d: %s", e.Status, strings.TrimSpace(e.Body))
}

// getJSON GETs base+path with the token and decodes the answer into out.
func getJSON(ctx context.Context, base, token, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return &APIError{Status: resp.StatusCode, Body: string(b)}
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(b, out)
}

// GetJob reads GET /v1/jobs/{id} from base.
func GetJob(ctx context.Context, base, token, id string) (JobView, error) {
	var j JobView
	err := getJSON(ctx, base, token, "/v1/jobs/"+url.PathEscape(id), &j)
	return j, err
}

// Leaf is a transparency log leaf with its index.
type Leaf struct {
	Index int64
	audit.Leaf
}

// GetLeaves reads the log's leaves from start on (up to the server's page
// size, api.MaxLogLeaves).
func GetLeaves(ctx context.Context, base, token string, start int64) ([]Leaf, error) {
	var out struct {
		Start  int64    `json:"start"`
		Leaves []string `json:"leaves"`
	}
	if err := getJSON(ctx, base, token, "/v1/log/leaves?start="+strconv.FormatInt(start, 10), &out); err != nil {
		return nil, err
	}
	if out.Start != start {
		return nil, fmt.Errorf("GET /v1/log/leaves?start=%d answered from %d", start, out.Start)
	}
	ls := make([]Leaf, len(out.Leaves))
	for i, s := range out.Leaves {
		ls[i].Index = start + int64(i)
		if err := json.Unmarshal([]byte(s), &ls[i].Leaf); err != nil {
			return nil, fmt.Errorf("leaf %d: %v", ls[i].Index, err)
		}
	}
	return ls, nil
}

// AllLeaves reads the whole log, page by page.
func AllLeaves(ctx context.Context, base, token string) ([]Leaf, error) {
	var all []Leaf
	for {
		ls, err := GetLeaves(ctx, base, token, int64(len(all)))
		if err != nil {
			return nil, err
		}
		if len(ls) == 0 {
			return all, nil
		}
		all = append(all, ls...)
	}
}

// Counters are the HA counters of one replica's GET /metrics (summed over
// labels); a family the server does not export is absent.
type Counters map[string]float64

// haCounters are the families the suite reads.
var haCounters = []string{"dpfl_store_fenced_writes_total", "dpfl_leader_phantom_wins_total"}

// GetCounters scrapes base's GET /metrics for haCounters.
func GetCounters(ctx context.Context, base, token string) (Counters, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, &APIError{Status: resp.StatusCode, Body: string(b)}
	}
	return parseCounters(resp.Body)
}

// parseCounters sums the samples of each haCounters family in a
// Prometheus text exposition.
func parseCounters(r io.Reader) (Counters, error) {
	c := Counters{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		for _, name := range haCounters {
			rest, ok := strings.CutPrefix(line, name)
			if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '{') {
				continue
			}
			if i := strings.LastIndexByte(rest, '}'); i >= 0 {
				rest = rest[i+1:]
			}
			f := strings.Fields(rest)
			if len(f) == 0 {
				continue
			}
			v, err := strconv.ParseFloat(f[0], 64)
			if err != nil {
				return nil, fmt.Errorf("metrics line %q: %v", line, err)
			}
			c[name] += v
		}
	}
	return c, sc.Err()
}
