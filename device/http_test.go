package device

import (
	"context"
	"encoding/json"
	"log/slog"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
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
	saved, mod := runDevices(t, `{"population":{"source":"devices","size":10},"sampling":{"scheme":"fixed","cohort_size":3},
		"secure_aggregation":true,"rounds":1,"dp":{"enabled":false},"secagg":{"min_clients":3,"stage_timeout_seconds":30}}`)
	sum := ringSum(saved)
	avg := make([]float32, len(sum))
	fl.ReleaseSecureSum(avg, make([]float64, len(sum)), sum, saved[0].Encoding, dp.Params{ClipNorm: 1}, 3, nil)
	checkModel(t, mod, saved[0].Global, avg)
}

// Under the distributed discrete Gaussian each device adds its own noise
// share (dpfl-client participate, fl.EncodeDDGInput): the inputs the
// devices saved are rotated vectors of the padded dimension, and the
// committed model is the round's model plus the decoding of their sum
// with the round's published parameters and seed, bit for bit; the
// server added nothing.
func TestDevicesDistributedDPOverHTTP(t *testing.T) {
	saved, mod := runDevices(t, `{"population":{"source":"devices","size":10},"sampling":{"scheme":"fixed","cohort_size":3},
		"secure_aggregation":true,"rounds":1,"dp":{"enabled":true,"clip_norm":0.5,"noise_multiplier":1,"delta":1e-5,"mechanism":"distributed_discrete_gaussian"},
		"secagg":{"min_clients":3,"stage_timeout_seconds":30}}`)
	w := saved[0].Distributed
	if w == nil {
		t.Fatal("the devices saved no distributed DP round")
	}
	p, err := fl.NewDDGParams(w.ClipNorm, w.Dimension, w.PaddedDimension, w.ModulusBits, w.Gamma, w.Beta, w.Sigma2, w.Clients)
	if err != nil {
		t.Fatal(err)
	}
	r := fl.DDGRound{Params: p}
	copy(r.Seed[:], w.RotationSeed)
	for i, s := range saved {
		if len(s.Input) != p.PaddedDim || !reflect.DeepEqual(s.Distributed, w) {
			t.Fatalf("device %d saved %d values for round %+v, want %d for %+v", i, len(s.Input), s.Distributed, p.PaddedDim, w)
		}
	}
	avg := make([]float32, p.Dim)
	if err := fl.ReleaseDDGSum(avg, ringSum(saved), r, r.Rotation(), 3); err != nil {
		t.Fatal(err)
	}
	checkModel(t, mod, saved[0].Global, avg)
}

// runDevices submits spec (a one-round devices job with a cohort of
// three), runs three devices over HTTP to its end and returns what they
// saved (--save-inputs) for round 1 and the committed model.
func runDevices(t *testing.T, spec string) ([]client.SavedInput, []float32) {
	t.Helper()
	admin, url := inProcessServer(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	st, err := admin.Submit(ctx, []byte(spec))
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
	saved := make([]client.SavedInput, len(dirs))
	for i, dir := range dirs {
		if errs[i] != nil {
			t.Fatalf("device %d: %v", i, errs[i])
		}
		b, err := os.ReadFile(filepath.Join(dir, SavedInputName(1, 1)))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &saved[i]); err != nil {
			t.Fatal(err)
		}
	}
	mod, err := admin.Model(ctx, st.ID)
	if err != nil {
		t.Fatal(err)
	}
	return saved, mod.Params
}

// ringSum is the sum in Z_2³² of the saved inputs.
func ringSum(saved []client.SavedInput) []uint32 {
	sum := make([]uint32, len(saved[0].Input))
	for _, s := range saved {
		for j, v := range s.Input {
			sum[j] += v
		}
	}
	return sum
}

// checkModel checks that params is global + avg bit for bit (server SGD
// at learning rate 1).
func checkModel(t *testing.T, params, global, avg []float32) {
	t.Helper()
	want := append([]float32(nil), global...)
	for j := range want {
		want[j] += avg[j]
	}
	if len(params) != len(want) {
		t.Fatalf("model has %d params, want %d", len(params), len(want))
	}
	for j := range want {
		if math.Float32bits(params[j]) != math.Float32bits(want[j]) {
			t.Fatalf("param %d = %v, want %v from the devices' exact mean", j, params[j], want[j])
		}
	}
}
