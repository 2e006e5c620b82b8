package job

import (
	crand "crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/dpfl/dpfl/secagg"
	"github.com/dpfl/dpfl/storage"
)

// A simulated DP job over secure aggregation trains like the plain one,
// and a round that the protocol aborts (cohort below secagg.min_clients)
// is retried under the same write-ahead ledger event: the ledger holds
// exactly one event per round however many attempts ran.
func TestSecureAggregationJobChargesEachRoundOnce(t *testing.T) {
	m := manager(t)
	const rounds = 10
	st := runToEnd(t, m, small(t, func(s *Spec) {
		s.Rounds = rounds
		s.SecureAggregation = true
		// Cohorts are Binomial(300, 0.1), mean 30: about half fall below 31
		// and abort.
		s.SecAgg.MinClients = 31
		s.SecAgg.MaxAttempts = 20
		s.SecAgg.DropoutRate = 0.05
	}))
	if st.State != storage.StateCompleted || st.Round != rounds {
		t.Fatalf("job ended %s at round %d: %s", st.State, st.Round, st.Message)
	}
	met, err := m.Metrics(st.ID)
	if err != nil {
		t.Fatal(err)
	}
	retried := 0
	for _, r := range met {
		if r.SecAgg == nil || r.SecAgg.Clients < 31 || r.SecAgg.Survivors+r.SecAgg.Dropped != r.SecAgg.Clients {
			t.Fatalf("round %d: secure aggregation stats %+v", r.Round, r.SecAgg)
		}
		if r.SecAgg.Attempt > 1 {
			retried++
		}
	}
	if retried == 0 {
		t.Fatalf("no round was retried; P(cohort ≥ 31 in all %d rounds) ≈ 3e-4", rounds)
	}
	rep, err := m.Privacy(st.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Events) != rounds {
		t.Fatalf("%d ledger events for %d rounds (%d retried)", len(rep.Events), rounds, retried)
	}
	if st.LatestTest == nil || st.LatestTest.Test.Accuracy < 0.6 {
		t.Fatalf("final test metrics %+v, want accuracy ≥ 0.6 as without secure aggregation", st.LatestTest)
	}
}

// Messages that do not fit the round are refused with errors that say
// why, and change nothing.
func TestDeviceMessagesRefused(t *testing.T) {
	m := manager(t)
	spec := small(t, func(s *Spec) {
		s.Population.Source = "devices"
		s.Sampling.Scheme = "fixed"
		s.Sampling.CohortSize = 3
		s.SecureAggregation = true
		s.Rounds = 1
	})
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
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no round opened: %+v", st)
		}
	}
	info, err := m.Join(j.ID)
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
	if err := m.Advertise(j.ID, info.Token, forged); !errors.As(err, &pe) || pe.Client != 1 {
		t.Fatalf("advertise signed as another client: %v, want a PeerError naming client 1", err)
	}
	if err := m.Advertise(j.ID, "not-a-token", adv); !errors.Is(err, ErrConflict) {
		t.Fatalf("unknown token: %v, want ErrConflict", err)
	}
	if _, err := m.Keys(j.ID, info.Token); !errors.Is(err, ErrConflict) {
		t.Fatalf("keys during the join stage: %v, want ErrConflict", err)
	}
	if err := m.Advertise(j.ID, info.Token, adv); err != nil {
		t.Fatal(err)
	}
	if err := m.Advertise(j.ID, info.Token, adv); err == nil {
		t.Fatal("a replayed advertisement was accepted")
	}
	if st, _ := m.DeviceRound(j.ID); st.Joined != 1 {
		t.Fatalf("after one advertisement and two refused: %d joined", st.Joined)
	}
	sim, err := m.Submit(small(t, func(s *Spec) { s.Rounds = 1 }))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Join(sim.ID); !errors.Is(err, ErrConflict) {
		t.Fatalf("joining a simulated job: %v, want ErrConflict", err)
	}
	if _, err := m.Cancel(j.ID); err != nil {
		t.Fatal(err)
	}
	if st, _ := m.DeviceRound(j.ID); st.Stage != StageWaiting || st.State != storage.StateCancelled {
		t.Fatalf("after cancel: %+v", st)
	}
}
