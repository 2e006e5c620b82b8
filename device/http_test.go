package device

import (
	"context"
	"encoding/json"
	"log/slog"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dpfl/dpfl/api"
	"github.com/dpfl/dpfl/api/client"
	"github.com/dpfl/dpfl/dp"
	"github.com/dpfl/dpfl/fl"
	"github.com/dpfl/dpfl/fl/data"
	"github.com/dpfl/dpfl/internal/contracttest"
	"github.com/dpfl/dpfl/job"
	"github.com/dpfl/dpfl/storage"
)

// inProcessServer is the real API and job manager over a fresh store,
// with API token "tok", serving synthetic data in Fashion-MNIST's shape
// (the server's test split for a devices job).
func inProcessServer(t *testing.T) (admin *client.Client, url string) {
	t.Helper()
	db, err := storage.Open(filepath.Join(t.TempDir(), "dpfl.db"))
	if err != nil {
		t.Fatal(err)
	}
	m := job.NewManager(db, job.Options{Workers: 2, Logger: slog.New(slog.DiscardHandler),
		FashionMNIST: func() (*data.Dataset, *data.Dataset, error) { return syntheticData(100, 7), syntheticData(50, 8), nil }})
	tokens := &api.Tokens{}
	tokens.Add(api.HashToken("tok"), api.RoleAdmin)
	// Every request and response is checked against the OpenAPI contract.
	srv := httptest.NewServer(contracttest.Handler(t, api.New(m, api.Config{Tokens: tokens, Logger: slog.New(slog.DiscardHandler)})))
	t.Cleanup(func() { srv.Close(); m.Shutdown(context.Background()); db.Close() })
	return client.New(srv.URL, "tok"), srv.URL
}

// Three devices take part in a one-round devices job over HTTP against
// the real API: the job completes, and the committed model is the
// round's model plus the mean of the three encoded updates the devices
// saved (decoded exactly, no noise: server SGD at learning rate 1).
func TestDevicesOverHTTP(t *testing.T) {
	admin, url := inProcessServer(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	st, err := admin.Submit(ctx, []byte(`{"population":{"source":"devices","size":10},"sampling":{"scheme":"fixed","cohort_size":3},
		"secure_aggregation":true,"rounds":1,"dp":{"enabled":false},"secagg":{"min_clients":3,"stage_timeout_seconds":30}}`))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	dirs := make([]string, 3)
	errs := make([]error, 3)
	outs := make([]strings.Builder, 3)
	for i := range dirs {
		en, err := admin.EnrollDevice(ctx, st.ID)
		if err != nil {
			t.Fatal(err)
		}
		dirs[i] = t.TempDir()
		d := &Device{Server: HTTP(client.New(url, en.Credential), 10*time.Millisecond), JobID: st.ID, Data: syntheticData(20, uint64(10+i)),
			Poll: 10 * time.Millisecond, SaveDir: dirs[i], Workers: 1, Out: &outs[i]}
		wg.Go(func() { errs[i] = d.Run(ctx) })
	}
	wg.Wait()
	final, err := admin.Job(ctx, st.ID)
	if err != nil || final.State != "completed" {
		t.Fatalf("job %+v, %v; devices: %v\n%s\n%s\n%s", final, err, errs, outs[0].String(), outs[1].String(), outs[2].String())
	}
	var sum []uint32
	var saved client.SavedInput
	for i, dir := range dirs {
		if errs[i] != nil {
			t.Fatalf("device %d: %v", i, errs[i])
		}
		b, err := os.ReadFile(filepath.Join(dir, SavedInputName(1, 1)))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &saved); err != nil {
			t.Fatal(err)
		}
		if sum == nil {
			sum = make([]uint32, len(saved.Input))
		}
		for j, v := range saved.Input {
			sum[j] += v
		}
	}
	want := append([]float32(nil), saved.Global...)
	avg := make([]float32, len(sum))
	fl.ReleaseSecureSum(avg, make([]float64, len(sum)), sum, saved.Encoding, dp.Params{ClipNorm: 1}, 3, nil)
	for j := range want {
		want[j] += avg[j]
	}
	mod, err := admin.Model(ctx, st.ID)
	if err != nil || len(mod.Params) != len(want) {
		t.Fatalf("model: %v, %d params", err, len(mod.Params))
	}
	for j := range want {
		if math.Float32bits(mod.Params[j]) != math.Float32bits(want[j]) {
			t.Fatalf("param %d = %v, want %v from the devices' exact mean", j, mod.Params[j], want[j])
		}
	}
}
