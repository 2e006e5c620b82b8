package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
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
	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/dp"
	"github.com/dpfl/dpfl/fl"
	"github.com/dpfl/dpfl/fl/data"
	"github.com/dpfl/dpfl/internal/hatest"
	"github.com/dpfl/dpfl/secagg"
)

// deviceJob is a one-round job over five real participant processes, with
// secure aggregation and without DP noise, so that the released model
// delta is exactly the survivors' decoded sum over their number.
const deviceJob = `{
  "name": "devices-e2e",
  "model": "logreg",
  "population": {"source": "devices", "size": 5},
  "sampling": {"scheme": "fixed", "cohort_size": 5},
  "rounds": 1,
  "client": {"epochs": 1, "batch_size": 10, "lr": 0.1},
  "dp": {"enabled": false, "clip_norm": 0.5},
  "secure_aggregation": true,
  "secagg": {"min_clients": 3, "stage_timeout_seconds": 3, "join_timeout_seconds": 60},
  "eval_every": 1
}`

// An administrator enrolls five devices with 'dpfl-client devices
// enroll'; five dpfl-client participate processes, each with its own
// credential, join the devices job; one is SIGKILLed after sending its
// shares, mid-round. The round completes over
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
	creds := make([]string, devices)
	for i := range creds {
		creds[i] = enrollCLI(t, s, st.ID).Credential
	}
	out, err := exec.Command(clientBin, "devices", "list", st.ID, "--server", s.addr, "--token", "tok").CombinedOutput()
	if err != nil || strings.Count(string(out), "dev-") != devices || strings.Contains(string(out), creds[0]) {
		t.Fatalf("devices list: %v\n%s", err, out)
	}
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
		// Half take the credential from the environment, half from
		// --credential; device 0 names the job with --job.
		args := []string{"participate", st.ID, "--server", s.addr, "--data-dir", dir, "--save-inputs", p.save, "--poll", "50ms"}
		if i == 0 {
			args[1] = "--job=" + st.ID
		}
		p.cmd = exec.Command(clientBin, args...)
		p.cmd.Env = append(os.Environ(), "DPFL_TOKEN=", "DPFL_DEVICE_CREDENTIAL="+creds[i])
		if i%2 == 1 {
			p.cmd.Env = append(os.Environ(), "DPFL_TOKEN=", "DPFL_DEVICE_CREDENTIAL=")
			p.cmd.Args = append(p.cmd.Args, "--credential", creds[i])
		}
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
		// The unmasked update is the device's alone (issue 13).
		fi, err1 := os.Stat(filepath.Join(p.save, "round-1-attempt-1.json"))
		di, err2 := os.Stat(p.save)
		if err1 != nil || err2 != nil || fi.Mode().Perm() != 0o600 || di.Mode().Perm() != 0o700 {
			t.Fatalf("device %d: saved input mode %v in a directory of mode %v (%v, %v), want 0600 in 0700", i, fi.Mode().Perm(), di.Mode().Perm(), err1, err2)
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

// enrollCLI enrolls a device for job id with 'dpfl-client devices enroll
// --json' and the API token.
func enrollCLI(t *testing.T, s *server, id string) types.Enrollment {
	t.Helper()
	out, err := exec.Command(clientBin, "devices", "enroll", id, "--json", "--server", s.addr, "--token", "tok").Output()
	if err != nil {
		t.Fatalf("devices enroll: %v\n%s", err, out)
	}
	var en types.Enrollment
	if err := json.Unmarshal(out, &en); err != nil || en.DeviceID == "" || len(en.Credential) != 64 || en.JobID != id {
		t.Fatalf("devices enroll printed %s (%v)", out, err)
	}
	return en
}

// Devices carry identities, end to end: 'dpfl-client participate' with
// the API token, with another job's device credential or with none is
// refused, and a device credential opens no administrative route. Over
// the Go client, a device joins an attempt once.
func TestDeviceCredentialsAreScoped(t *testing.T) {
	needData(t)
	train, _, err := data.LoadFashionMNIST(data.DefaultFashionMNISTDir)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeDeviceData(t, dir, train, 0, 20)
	s := startServer(t, filepath.Join(t.TempDir(), "dpfl.db"), "tok")
	admin := client.New(s.addr, "tok")
	ctx := context.Background()
	a, err := admin.Submit(ctx, []byte(deviceJob))
	if err != nil {
		t.Fatal(err)
	}
	b, err := admin.Submit(ctx, []byte(deviceJob))
	if err != nil {
		t.Fatal(err)
	}
	en := enrollCLI(t, s, a.ID)

	participate := func(job, cred string) string {
		cmd := exec.Command(clientBin, "participate", job, "--server", s.addr, "--data-dir", dir, "--rounds", "1")
		cmd.Env = append(os.Environ(), "DPFL_TOKEN=tok", "DPFL_DEVICE_CREDENTIAL="+cred)
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Fatalf("participate %s with credential %q succeeded:\n%s", job, cred, out)
		}
		return string(out)
	}
	if out := participate(a.ID, "tok"); !strings.Contains(out, "401") {
		t.Errorf("participate with the API token: want 401, got\n%s", out)
	}
	if out := participate(b.ID, en.Credential); !strings.Contains(out, "401") {
		t.Errorf("participate in job B with job A's device: want 401, got\n%s", out)
	}
	if out := participate(a.ID, ""); !strings.Contains(out, "credential is required") {
		t.Errorf("participate without a credential: got\n%s", out)
	}
	out, err := exec.Command(clientBin, "list", "--server", s.addr, "--token", en.Credential).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "401") {
		t.Errorf("list with a device credential: %v\n%s", err, out)
	}

	dev := client.New(s.addr, en.Credential)
	var apiErr *client.Error
	if _, err := dev.Cancel(ctx, a.ID); !errors.As(err, &apiErr) || apiErr.Status != 401 {
		t.Errorf("a device cancelling its job: %v, want 401", err)
	}
	if _, err := admin.Join(ctx, a.ID); !errors.As(err, &apiErr) || apiErr.Status != 401 {
		t.Errorf("joining with the API token: %v, want 401", err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		st, err := dev.RoundStatus(ctx, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		if st.Stage == "join" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no round opened: %+v\n%s", st, s.log)
		}
	}
	p, err := dev.Join(ctx, a.ID)
	if err != nil || p.Info.DeviceID != en.DeviceID {
		t.Fatalf("join: %+v, %v", p, err)
	}
	if _, err := dev.Join(ctx, a.ID); !errors.As(err, &apiErr) || apiErr.Status != 409 || !strings.Contains(apiErr.ErrorBody.Error, "already joined") {
		t.Errorf("second join in one attempt: %v, want 409", err)
	}
	for _, id := range []string{a.ID, b.ID} {
		if _, err := admin.Cancel(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
}

// writeDeviceData writes examples [from, from+n) of ds as a device's IDX
// pair (hatest.WriteDeviceData).
func writeDeviceData(t *testing.T, dir string, ds *data.Dataset, from, n int) {
	t.Helper()
	if err := hatest.WriteDeviceData(dir, ds, from, n); err != nil {
		t.Fatal(err)
	}
}
