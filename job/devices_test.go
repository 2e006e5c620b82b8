package job

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/dp"
	"github.com/dpfl/dpfl/fl"
	"github.com/dpfl/dpfl/secagg"
	"github.com/dpfl/dpfl/storage"
)

// devicesSpec is a one-round devices job of cohort size 3.
func devicesSpec(t *testing.T) types.Spec {
	return small(t, func(s *types.Spec) {
		s.Population.Source = "devices"
		s.Sampling.Scheme = "fixed"
		s.Sampling.CohortSize = 3
		s.SecureAggregation = true
		s.Rounds = 1
	})
}

// openRound submits spec and waits until its first round accepts joins.
func openRound(t *testing.T, m *Manager, spec types.Spec) string {
	t.Helper()
	j, err := m.Submit(spec)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		st, err := m.DeviceRound(j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if st.Stage == types.StageJoin {
			return j.ID
		}
		if time.Now().After(deadline) {
			t.Fatalf("no round opened: %+v", st)
		}
	}
}

// enroll enrolls a device for job id and authenticates it.
func enroll(t *testing.T, m *Manager, id string) (deviceID, credential string) {
	t.Helper()
	en, err := m.Enroll(id)
	if err != nil {
		t.Fatal(err)
	}
	dev, err := m.AuthenticateDevice(id, en.Credential)
	if err != nil || dev != en.DeviceID {
		t.Fatalf("authenticating a fresh enrolment: %q, %v; want %q", dev, err, en.DeviceID)
	}
	return en.DeviceID, en.Credential
}

// Only enrolled devices of a job authenticate to it; each joins an
// attempt once; a round token serves only the device it was issued to.
func TestDeviceEnrollmentAndJoin(t *testing.T) {
	m := manager(t)
	a := openRound(t, m, devicesSpec(t))
	b := openRound(t, m, devicesSpec(t))
	dev1, cred1 := enroll(t, m, a)
	dev2, _ := enroll(t, m, a)
	if len(cred1) != 2*CredentialBytes || dev1 == dev2 {
		t.Fatalf("enrolment: device %s credential %q, second device %s", dev1, cred1, dev2)
	}
	ds, err := m.Devices(a)
	if err != nil || len(ds) != 2 || ds[0].DeviceID != dev1 || ds[1].DeviceID != dev2 || ds[0].EnrolledAt.IsZero() {
		t.Fatalf("devices of job a: %+v, %v", ds, err)
	}
	if ds, err := m.Devices(b); err != nil || len(ds) != 0 {
		t.Fatalf("devices of job b: %+v, %v", ds, err)
	}

	flip := map[bool]string{true: "1", false: "0"}[cred1[len(cred1)-1] == '0']
	wrong := cred1[:len(cred1)-1] + flip
	for what, c := range map[string]struct{ job, cred string }{
		"another job's device":   {b, cred1},
		"a wrong credential":     {a, wrong},
		"a malformed credential": {a, "not-hex"},
		"no credential":          {a, ""},
		"an unknown job":         {"job-nope", cred1},
	} {
		if dev, err := m.AuthenticateDevice(c.job, c.cred); !errors.Is(err, ErrUnauthorized) {
			t.Errorf("%s: device %q, %v; want ErrUnauthorized", what, dev, err)
		}
	}

	info, err := m.Join(a, dev1)
	if err != nil {
		t.Fatal(err)
	}
	if info.DeviceID != dev1 || info.ClientID != 1 {
		t.Fatalf("join: %+v", info)
	}
	if _, err := m.Join(a, dev1); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "already joined") {
		t.Fatalf("second join of one attempt: %v, want ErrConflict saying so", err)
	}
	if _, err := m.Join(a, ""); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("join without a device: %v, want ErrUnauthorized", err)
	}
	_, adv, err := secagg.NewClient(info.ClientID, info.Session, crand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.AdvertiseKeys(a, dev2, info.Token, adv); !errors.Is(err, ErrForbidden) {
		t.Fatalf("device 2 with device 1's round token: %v, want ErrForbidden", err)
	}
	if _, ok := m.DeviceClient(a, dev2, info.Token); ok {
		t.Fatal("DeviceClient names device 1's client for device 2")
	}
	if st, _ := m.DeviceRound(a); st.Joined != 0 {
		t.Fatalf("a refused advertisement counted: %+v", st)
	}
	if err := m.AdvertiseKeys(a, dev1, info.Token, adv); err != nil {
		t.Fatal(err)
	}
	info2, err := m.Join(a, dev2)
	if err != nil || info2.ClientID != 2 {
		t.Fatalf("device 2 joins: %+v, %v", info2, err)
	}

	sim, err := m.Submit(small(t, func(s *types.Spec) { s.Rounds = 1 }))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Enroll(sim.ID); !errors.Is(err, ErrConflict) {
		t.Fatalf("enrolling for a simulated job: %v, want ErrConflict", err)
	}
	if _, err := m.Enroll("job-nope"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("enrolling for an unknown job: %v, want ErrNotFound", err)
	}
	if _, err := m.Cancel(b); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Enroll(b); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("enrolling for a cancelled job: %v, want storage.ErrConflict (409)", err)
	}
}

// Messages that do not fit the round are refused with errors that say
// why, and change nothing.
func TestDeviceMessagesRefused(t *testing.T) {
	m := manager(t)
	id := openRound(t, m, devicesSpec(t))
	dev, _ := enroll(t, m, id)
	info, err := m.Join(id, dev)
	if err != nil {
		t.Fatal(err)
	}
	if info.ClientID != 1 || info.Token == "" || len(info.Params) != 7850 || info.Encoding.FracBits < 8 {
		t.Fatalf("join info %+v", info)
	}
	_, adv, err := secagg.NewClient(info.ClientID, info.Session, crand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	forged := adv
	forged.From = 2
	var pe *secagg.PeerError
	if err := m.AdvertiseKeys(id, dev, info.Token, forged); !errors.As(err, &pe) || pe.Client != 1 {
		t.Fatalf("advertise signed as another client: %v, want a PeerError naming client 1", err)
	}
	if err := m.AdvertiseKeys(id, dev, "not-a-token", adv); !errors.Is(err, ErrConflict) {
		t.Fatalf("unknown token: %v, want ErrConflict", err)
	}
	if _, err := m.ShareKeysRequest(id, dev, info.Token); !errors.Is(err, ErrConflict) {
		t.Fatalf("keys during the join stage: %v, want ErrConflict", err)
	}
	if err := m.AdvertiseKeys(id, dev, info.Token, adv); err != nil {
		t.Fatal(err)
	}
	if err := m.AdvertiseKeys(id, dev, info.Token, adv); err == nil {
		t.Fatal("a replayed advertisement was accepted")
	}
	if st, _ := m.DeviceRound(id); st.Joined != 1 {
		t.Fatalf("after one advertisement and two refused: %d joined", st.Joined)
	}
	sim, err := m.Submit(small(t, func(s *types.Spec) { s.Rounds = 1 }))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Join(sim.ID, dev); !errors.Is(err, ErrConflict) {
		t.Fatalf("joining a simulated job: %v, want ErrConflict", err)
	}
	if _, err := m.Cancel(id); err != nil {
		t.Fatal(err)
	}
	if st, _ := m.DeviceRound(id); st.Stage != types.StageWaiting || st.State != types.StateCancelled {
		t.Fatalf("after cancel: %+v", st)
	}
}

// managerConn is a device's secagg.ClientTransport through the Manager's
// methods: the participate routes without HTTP. It stops (as a device
// that dies) before stage stop, if set.
type managerConn struct {
	m          *Manager
	job, dev   string
	info       types.JoinInfo
	stop       secagg.Stage
	stopBefore bool
}

var errDied = errors.New("device died")

func (c managerConn) Await(ctx context.Context, st secagg.Stage) error {
	if c.stopBefore && st >= c.stop {
		return errDied
	}
	want := deviceStages[st]
	for ctx.Err() == nil {
		rs, err := c.m.DeviceRound(c.job)
		if err != nil {
			return err
		}
		if rs.Stage == want {
			return nil
		}
		if rs.Round != c.info.Round || rs.Stage == types.StageWaiting {
			return fmt.Errorf("round went on: %+v", rs)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return ctx.Err()
}

func (c managerConn) AdvertiseKeys(_ context.Context, msg secagg.AdvertiseKeysMsg) error {
	return c.m.AdvertiseKeys(c.job, c.dev, c.info.Token, msg)
}

func (c managerConn) ShareKeysRequest(context.Context) (secagg.ShareKeysRequest, error) {
	return c.m.ShareKeysRequest(c.job, c.dev, c.info.Token)
}

func (c managerConn) ShareKeys(_ context.Context, msg secagg.ShareKeysMsg) error {
	return c.m.ShareKeys(c.job, c.dev, c.info.Token, msg)
}

func (c managerConn) MaskedInputRequest(context.Context) (secagg.MaskedInputRequest, error) {
	return c.m.MaskedInputRequest(c.job, c.dev, c.info.Token)
}

func (c managerConn) MaskedInput(_ context.Context, msg secagg.MaskedInputMsg) error {
	return c.m.MaskedInput(c.job, c.dev, c.info.Token, msg)
}

func (c managerConn) UnmaskRequest(context.Context) (secagg.UnmaskRequest, error) {
	return c.m.UnmaskRequest(c.job, c.dev, c.info.Token)
}

func (c managerConn) Unmask(_ context.Context, msg secagg.UnmaskMsg) error {
	return c.m.Unmask(c.job, c.dev, c.info.Token, msg)
}

// A devices round runs the secure aggregation drivers over the Manager:
// three devices join, one dies after sharing its keys, the masked_input
// stage closes at its deadline, and the committed model is the round's
// model plus the exact mean of the two survivors' inputs (no DP noise,
// server SGD at learning rate 1), the drop reported as such.
func TestDeviceRoundWithDrivers(t *testing.T) {
	m := manager(t)
	spec := devicesSpec(t)
	spec.DP.Enabled = false
	spec.SecAgg.MinClients, spec.SecAgg.StageTimeoutSeconds = 2, 0.5
	id := openRound(t, m, spec)
	rng := rand.New(rand.NewPCG(5, 6))
	var wg sync.WaitGroup
	errs := make([]error, 3)
	var sum []uint32
	var info0 types.JoinInfo
	for i := range 3 {
		dev, _ := enroll(t, m, id)
		info, err := m.Join(id, dev)
		if err != nil {
			t.Fatal(err)
		}
		x := make([]uint32, len(info.Params))
		for j := range x {
			x[j] = uint32(int32(rng.IntN(2001) - 1000)) // ±1000·2^−f
		}
		if i < 2 {
			if sum == nil {
				sum, info0 = make([]uint32, len(x)), info
			}
			for j, v := range x {
				sum[j] += v
			}
		}
		conn := managerConn{m: m, job: id, dev: dev, info: info, stop: secagg.StageMaskedInput, stopBefore: i == 2}
		drv := &secagg.ClientDriver{ID: info.ClientID, Session: info.Session, Workers: 1,
			Input: func(context.Context) ([]uint32, error) { return x, nil }}
		wg.Go(func() { errs[i] = drv.Run(t.Context(), conn) })
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil || !errors.Is(errs[2], errDied) {
		t.Fatalf("devices: %v", errs)
	}
	m.Wait(id)
	met, err := m.Metrics(id)
	if err != nil || len(met) != 1 || met[0].SecAgg == nil {
		t.Fatalf("metrics %+v, %v", met, err)
	}
	if sa := met[0].SecAgg; sa.Clients != 3 || sa.Survivors != 2 || sa.Dropped != 1 || sa.Attempt != 1 {
		t.Fatalf("secure aggregation %+v: want 3 clients, 2 survivors, 1 dropped", sa)
	}
	want := slices.Clone(info0.Params)
	avg := make([]float32, len(sum))
	fl.ReleaseSecureSum(avg, make([]float64, len(sum)), sum, info0.Encoding, dp.Params{ClipNorm: spec.DP.ClipNorm}, 2, nil)
	for j := range want {
		want[j] += avg[j]
	}
	mod, err := m.Model(id)
	if err != nil {
		t.Fatal(err)
	}
	for j := range want {
		if math.Float32bits(mod.Params[j]) != math.Float32bits(want[j]) {
			t.Fatalf("param %d = %v, want %v from the survivors' exact mean", j, mod.Params[j], want[j])
		}
	}
}

// A message that passes the round's stage check but reaches the server
// after the stage closed (it was in flight) is a 409 conflict, not a
// refused (400) message of the device.
func TestDeviceLateMessageIsConflict(t *testing.T) {
	m := manager(t)
	srv, err := secagg.NewServer(secagg.ServerConfig{Session: []byte("late"), Dim: 1})
	if err != nil {
		t.Fatal(err)
	}
	var advs []secagg.AdvertiseKeysMsg
	for id := range secagg.ClientID(3) {
		_, adv, err := secagg.NewClient(id+1, []byte("late"), crand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		advs = append(advs, adv)
	}
	for _, a := range advs[:2] {
		if err := srv.AdvertiseKeys(a); err != nil {
			t.Fatal(err)
		}
	}
	if err := srv.CloseAdvertiseKeys(); err != nil {
		t.Fatal(err)
	}
	// The runner has closed the stage at the server but not yet
	// published the next one.
	dr := &deviceRound{round: 1, attempt: 1, stage: types.StageJoin, srv: srv, max: 3,
		tokens: map[string]secagg.ClientID{"tok": 3}, owner: map[string]string{"tok": "dev"}, joined: map[string]secagg.ClientID{"dev": 3}}
	m.setLiveRound("job-late", dr)
	err = m.AdvertiseKeys("job-late", "dev", "tok", advs[2])
	var pe *secagg.PeerError
	if !errors.Is(err, ErrConflict) || errors.As(err, &pe) || !strings.Contains(err.Error(), "moved on") {
		t.Fatalf("late advertisement: %v, want ErrConflict and no PeerError", err)
	}
}
