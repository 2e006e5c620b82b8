package job

import (
	crand "crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dpfl/dpfl/secagg"
	"github.com/dpfl/dpfl/storage"
)

// devicesSpec is a one-round devices job of cohort size 3.
func devicesSpec(t *testing.T) Spec {
	return small(t, func(s *Spec) {
		s.Population.Source = "devices"
		s.Sampling.Scheme = "fixed"
		s.Sampling.CohortSize = 3
		s.SecureAggregation = true
		s.Rounds = 1
	})
}

// openRound submits spec and waits until its first round accepts joins.
func openRound(t *testing.T, m *Manager, spec Spec) string {
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
		if st.Stage == StageJoin {
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
	if err := m.Advertise(a, dev2, info.Token, adv); !errors.Is(err, ErrForbidden) {
		t.Fatalf("device 2 with device 1's round token: %v, want ErrForbidden", err)
	}
	if _, ok := m.DeviceClient(a, dev2, info.Token); ok {
		t.Fatal("DeviceClient names device 1's client for device 2")
	}
	if st, _ := m.DeviceRound(a); st.Joined != 0 {
		t.Fatalf("a refused advertisement counted: %+v", st)
	}
	if err := m.Advertise(a, dev1, info.Token, adv); err != nil {
		t.Fatal(err)
	}
	info2, err := m.Join(a, dev2)
	if err != nil || info2.ClientID != 2 {
		t.Fatalf("device 2 joins: %+v, %v", info2, err)
	}

	sim, err := m.Submit(small(t, func(s *Spec) { s.Rounds = 1 }))
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
	if err := m.Advertise(id, dev, info.Token, forged); !errors.As(err, &pe) || pe.Client != 1 {
		t.Fatalf("advertise signed as another client: %v, want a PeerError naming client 1", err)
	}
	if err := m.Advertise(id, dev, "not-a-token", adv); !errors.Is(err, ErrConflict) {
		t.Fatalf("unknown token: %v, want ErrConflict", err)
	}
	if _, err := m.Keys(id, dev, info.Token); !errors.Is(err, ErrConflict) {
		t.Fatalf("keys during the join stage: %v, want ErrConflict", err)
	}
	if err := m.Advertise(id, dev, info.Token, adv); err != nil {
		t.Fatal(err)
	}
	if err := m.Advertise(id, dev, info.Token, adv); err == nil {
		t.Fatal("a replayed advertisement was accepted")
	}
	if st, _ := m.DeviceRound(id); st.Joined != 1 {
		t.Fatalf("after one advertisement and two refused: %d joined", st.Joined)
	}
	sim, err := m.Submit(small(t, func(s *Spec) { s.Rounds = 1 }))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Join(sim.ID, dev); !errors.Is(err, ErrConflict) {
		t.Fatalf("joining a simulated job: %v, want ErrConflict", err)
	}
	if _, err := m.Cancel(id); err != nil {
		t.Fatal(err)
	}
	if st, _ := m.DeviceRound(id); st.Stage != StageWaiting || st.State != storage.StateCancelled {
		t.Fatalf("after cancel: %+v", st)
	}
}
