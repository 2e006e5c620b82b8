package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dpfl/dpfl/api/client"
	"github.com/dpfl/dpfl/dp"
	"github.com/dpfl/dpfl/fl"
	"github.com/dpfl/dpfl/fl/data"
	"github.com/dpfl/dpfl/secagg"
)

// deviceJob is a one-round job over five real participant processes, with
// secure aggregation and without DP noise, so that the released model
// delta is exactly the survivors' decoded sum over their number.
const deviceJob = `{
  "name": "devices-e2e",
  "model": "logreg",
  "population": {"source": "devices", "clients": 5},
  "sampling": {"scheme": "fixed", "cohort_size": 5},
  "rounds": 1,
  "client": {"epochs": 1, "batch_size": 10, "lr": 0.1},
  "dp": {"enabled": false, "clip_norm": 0.5},
  "secure_aggregation": true,
  "secagg": {"min_clients": 3, "stage_timeout_seconds": 3, "join_timeout_seconds": 60},
  "eval_every": 1
}`

// Five dpfl-client participate processes join a devices job; one is
// SIGKILLed after sending its shares, mid-round. The round completes over
// the four survivors (the server reconstructs the dead device's pairwise
// masks from its neighbours' shares), and the released model is exactly
// the global model plus the survivors' decoded sum over four.
func TestParticipantsWithDropout(t *testing.T) {
	needData(t)
	train, _, err := data.LoadFashionMNIST(data.DefaultFashionMNISTDir)
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, filepath.Join(t.TempDir(), "dpfl.db"), "tok")
	cl := client.New(s.addr, "tok")
	ctx := context.Background()
	st, err := cl.Submit(ctx, []byte(deviceJob))
	if err != nil {
		t.Fatal(err)
	}

	const devices, victim = 5, 4
	type proc struct {
		cmd  *exec.Cmd
		save string
		log  *syncLog
	}
	procs := make([]*proc, devices)
	killed := make(chan struct{})
	for i := range procs {
		dir := t.TempDir()
		writeDeviceData(t, dir, train, i*50, 50)
		p := &proc{save: filepath.Join(dir, "sent"), log: &syncLog{}}
		p.cmd = exec.Command(clientBin, "participate", "--server", s.addr, "--token", "tok",
			"--job", st.ID, "--data", dir, "--save-inputs", p.save, "--poll", "50ms")
		stdout, _ := p.cmd.StdoutPipe()
		p.cmd.Stderr = p.cmd.Stdout
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.cmd.Process.Kill(); p.cmd.Wait() })
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				p.log.add(sc.Text())
				if i == victim && strings.Contains(sc.Text(), "shares sent") {
					p.cmd.Process.Signal(syscall.SIGKILL)
					close(killed)
				}
			}
		}()
		procs[i] = p
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	final, err := cl.Wait(wctx, st.ID, 100*time.Millisecond, nil)
	logs := func() string {
		var b strings.Builder
		for i, p := range procs {
			fmt.Fprintf(&b, "--- device %d\n%s", i, p.log)
		}
		return b.String() + "--- server\n" + s.log.String()
	}
	if err != nil {
		t.Fatalf("%v\n%s", err, logs())
	}
	select {
	case <-killed:
	default:
		t.Fatalf("device %d was never killed mid-round\n%s", victim, logs())
	}
	if final.State != "completed" || final.Round != 1 {
		t.Fatalf("job ended %s at round %d: %s\n%s", final.State, final.Round, final.Message, logs())
	}
	met, err := cl.Metrics(ctx, st.ID)
	if err != nil || len(met) != 1 || met[0].SecAgg == nil {
		t.Fatalf("metrics %+v, err %v", met, err)
	}
	sa := met[0].SecAgg
	if sa.Clients != devices || sa.Survivors != devices-1 || sa.Dropped != 1 {
		t.Fatalf("secure aggregation %+v: want 5 clients, 4 survivors, 1 dropped\n%s", sa, logs())
	}

	// The survivors' own records of what they sent.
	var sum []uint32
	var global []float32
	var enc secagg.Encoding
	for i, p := range procs {
		if i == victim {
			continue
		}
		b, err := os.ReadFile(filepath.Join(p.save, "round-1-attempt-1.json"))
		if err != nil {
			t.Fatalf("device %d: %v\n%s", i, err, logs())
		}
		var in client.SavedInput
		if err := json.Unmarshal(b, &in); err != nil {
			t.Fatal(err)
		}
		if sum == nil {
			sum, global, enc = make([]uint32, len(in.Input)), in.Global, in.Encoding
		}
		for j, v := range in.Input {
			sum[j] += v
		}
	}
	if enc.FracBits != sa.FracBits {
		t.Fatalf("devices encoded with f = %d, the server reports %d", enc.FracBits, sa.FracBits)
	}
	want := append([]float32(nil), global...)
	delta := make([]float32, len(sum))
	fl.ReleaseSecureSum(delta, make([]float64, len(sum)), sum, enc, dp.Params{ClipNorm: 0.5}, devices-1, nil)
	for j := range delta {
		delta[j] = -delta[j]
	}
	(&fl.SGD{LR: 1}).Step(want, delta)
	mod, err := cl.Model(ctx, st.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(mod.Params) != len(want) {
		t.Fatalf("model has %d params, want %d", len(mod.Params), len(want))
	}
	moved := 0
	for j := range want {
		if math.Float32bits(mod.Params[j]) != math.Float32bits(want[j]) {
			t.Fatalf("param %d = %v, want %v from the survivors' exact sum", j, mod.Params[j], want[j])
		}
		if want[j] != global[j] {
			moved++
		}
	}
	if moved < len(want)/2 {
		t.Fatalf("only %d of %d parameters moved: the round released almost nothing", moved, len(want))
	}
}

// writeDeviceData writes examples [from, from+n) of ds as a device's IDX
// pair (pixels back to bytes).
func writeDeviceData(t *testing.T, dir string, ds *data.Dataset, from, n int) {
	t.Helper()
	img := idxHeader(0x08, n, 28, 28)
	for _, v := range ds.X[from*ds.Dim : (from+n)*ds.Dim] {
		img = append(img, byte(math.Round(float64(v)*255)))
	}
	lab := append(idxHeader(0x08, n), ds.Y[from:from+n]...)
	for name, b := range map[string][]byte{"train-images-idx3-ubyte": img, "train-labels-idx1-ubyte": lab} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// idxHeader is the IDX magic (two zero bytes, the type code, the number
// of dimensions) and the big-endian dimensions.
func idxHeader(typ byte, dims ...int) []byte {
	var b bytes.Buffer
	b.Write([]byte{0, 0, typ, byte(len(dims))})
	for _, d := range dims {
		binary.Write(&b, binary.BigEndian, uint32(d))
	}
	return b.Bytes()
}
