package accounting

import (
	"bytes"
	"math"
	"math/big"
	"reflect"
	"strings"
	"testing"
)

// fuzzSeedEvents are valid events of every type, the seeds of
// FuzzUnmarshalEvent in MarshalEvent's own encoding.
func fuzzSeedEvents() []Event {
	return []Event{
		Gaussian{NoiseMultiplier: 1.1},
		poisson(120.0/3383, 1.2),
		SampledWithoutReplacement{SourceDatasetSize: 6000, SampleSize: 120, Event: Gaussian{NoiseMultiplier: 0.5}},
		SelfComposed{Event: poisson(0.02, 1), Count: 100},
		Composed{Events: []Event{NoOp{}, Gaussian{NoiseMultiplier: 3}, NonPrivate{}}},
		Composed{Events: []Event{}},
		SelfComposed{Event: SelfComposed{Event: poisson(1, 5), Count: 3}, Count: 4},
		NoOp{}, NonPrivate{},
		ZCDP{Rho: 0.0123}, ZCDP{Rho: 0.5, Xi: 0.25},
		Composed{Events: []Event{SelfComposed{Event: ZCDP{Rho: 1e-3}, Count: 50}, poisson(0.02, 1)}},
	}
}

// checkEventParams walks e and fails t on any parameter that Validate's
// rules (restated here, independently of Validate) forbid.
func checkEventParams(t *testing.T, e Event, depth int) {
	t.Helper()
	if depth > MaxEventDepth {
		t.Fatalf("decoded an event nested %d deep", depth)
	}
	switch e := e.(type) {
	case Gaussian:
		if math.IsNaN(e.NoiseMultiplier) || math.IsInf(e.NoiseMultiplier, 0) || e.NoiseMultiplier <= 0 {
			t.Fatalf("accepted noise multiplier %v", e.NoiseMultiplier)
		}
	case PoissonSampled:
		if math.IsNaN(e.SamplingProbability) || e.SamplingProbability <= 0 || e.SamplingProbability > 1 {
			t.Fatalf("accepted sampling probability %v", e.SamplingProbability)
		}
		checkEventParams(t, e.Event, depth+1)
	case SampledWithoutReplacement:
		if e.SampleSize < 1 || e.SampleSize > e.SourceDatasetSize {
			t.Fatalf("accepted sample %d of %d", e.SampleSize, e.SourceDatasetSize)
		}
		checkEventParams(t, e.Event, depth+1)
	case SelfComposed:
		if e.Count < 0 {
			t.Fatalf("accepted count %d", e.Count)
		}
		checkEventParams(t, e.Event, depth+1)
	case Composed:
		for _, s := range e.Events {
			checkEventParams(t, s, depth+1)
		}
	case ZCDP:
		for _, v := range []float64{e.Rho, e.Xi} {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				t.Fatalf("accepted zCDP parameters ρ = %v, ξ = %v", e.Rho, e.Xi)
			}
		}
	case NoOp, NonPrivate:
	default:
		t.Fatalf("decoded %#v", e)
	}
}

// poissonCount is the number of Poisson-sampled events in e, nested
// counts multiplied, in exact arithmetic.
func poissonCount(e Event) *big.Int {
	switch e := e.(type) {
	case PoissonSampled:
		return big.NewInt(1)
	case SelfComposed:
		return new(big.Int).Mul(big.NewInt(int64(e.Count)), poissonCount(e.Event))
	case Composed:
		n := new(big.Int)
		for _, s := range e.Events {
			n.Add(n, poissonCount(s))
		}
		return n
	}
	return new(big.Int)
}

// FuzzUnmarshalEvent: decoding arbitrary bytes never panics; an accepted
// event has in-range parameters, re-encodes to a canonical form that
// decodes to the same event, and, where the PLD accountant takes the
// ledger, its round count is the exact one (no int overflow).
func FuzzUnmarshalEvent(f *testing.F) {
	for _, e := range fuzzSeedEvents() {
		b, err := MarshalEvent(e)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"type":"SelfComposedDpEvent","count":4294967296,"event":{"type":"SelfComposedDpEvent","count":4294967296,"event":{"type":"PoissonSampledDpEvent","sampling_probability":0.5,"event":{"type":"GaussianDpEvent","noise_multiplier":1}}}}`))
	f.Add([]byte(`{"type":"ComposedDpEvent","events":[{"type":"NonPrivateDpEvent"}],"Events":[]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := UnmarshalEvent(b)
		if err != nil {
			if e != nil {
				t.Fatalf("error %v with event %#v", err, e)
			}
			return
		}
		checkEventParams(t, e, 1)
		m, err := MarshalEvent(e)
		if err != nil {
			t.Fatalf("accepted %q but cannot re-encode %#v: %v", b, e, err)
		}
		back, err := UnmarshalEvent(m)
		if err != nil {
			t.Fatalf("re-encoding %s of accepted %q does not decode: %v", m, b, err)
		}
		if !reflect.DeepEqual(back, e) {
			t.Fatalf("%q decodes to %#v, its re-encoding %s to %#v", b, e, m, back)
		}
		if m2, _ := MarshalEvent(back); !bytes.Equal(m, m2) {
			t.Fatalf("encoding not canonical: %s then %s", m, m2)
		}
		// The input was a single JSON object whose keys MarshalEvent
		// writes: nothing may follow it.
		if s := strings.TrimSpace(string(b)); !strings.HasSuffix(s, "}") {
			t.Fatalf("accepted %q with trailing data", b)
		}
		if _, _, n, ok := homogeneousPoisson([]Event{e}); ok {
			if want := poissonCount(e); !want.IsInt64() || want.Int64() != int64(n) {
				t.Fatalf("%s: PLD would account %d rounds, the ledger holds %v", m, n, want)
			}
		}
	})
}

// A ledger whose nested counts multiply past int (2³² × 2³² = 2⁶⁴ ≡ 0)
// must not read as zero rounds of PLD with ε = 0: RDP takes it, and its
// bound is not small.
func TestAccountCountOverflow(t *testing.T) {
	ev := SelfComposed{Event: SelfComposed{Event: poisson(0.5, 1), Count: 1 << 32}, Count: 1 << 32}
	rep, err := Account([]Event{ev}, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	if rep.PLD.Valid || rep.Best.Accountant != "rdp" || !(rep.Epsilon() > 1e6) {
		t.Fatalf("2⁶⁴ rounds: %+v, ε = %v", rep, rep.Epsilon())
	}
	// The sum of counts overflowing is refused too.
	half := SelfComposed{Event: poisson(0.5, 1), Count: math.MaxInt/2 + 1}
	if _, _, _, ok := homogeneousPoisson([]Event{half, half}); ok {
		t.Fatal("overflowing sum of counts accepted")
	}
	if _, _, n, ok := homogeneousPoisson([]Event{ev.Event, ev.Event}); !ok || n != 1<<33 {
		t.Fatalf("2 × 2³² rounds: n = %d, ok = %v", n, ok)
	}
}

// Inputs that encoding/json alone would accept but that read as a
// different (often cheaper) event than the JSON says.
func TestUnmarshalEventRefusesAmbiguousJSON(t *testing.T) {
	deep := `{"type":"NoOpDpEvent"}`
	for range MaxEventDepth {
		deep = `{"type":"SelfComposedDpEvent","count":1,"event":` + deep + `}`
	}
	for _, bad := range []string{
		// A second event after the first would be ignored.
		`{"type":"NoOpDpEvent"}{"type":"NonPrivateDpEvent"}`,
		`{"type":"NoOpDpEvent"} x`,
		// Duplicate keys: the last would win and drop the release.
		`{"type":"ComposedDpEvent","events":[{"type":"NonPrivateDpEvent"}],"events":[]}`,
		// encoding/json matches keys up to case; dp_accounting does not.
		`{"type":"ComposedDpEvent","Events":[{"type":"NonPrivateDpEvent"}]}`,
		`{"TYPE":"NonPrivateDpEvent"}`,
		// A field of another type would be silently dropped.
		`{"type":"GaussianDpEvent","noise_multiplier":1,"events":[{"type":"NonPrivateDpEvent"}]}`,
		`{"type":"NoOpDpEvent","event":{"type":"NonPrivateDpEvent"}}`,
		`{"type":"PoissonSampledDpEvent","sampling_probability":0.5,"event":null}`,
		`{"type":"PoissonSampledDpEvent","sampling_probability":0,"event":{"type":"GaussianDpEvent","noise_multiplier":1}}`,
		`{"type":"PoissonSampledDpEvent","sampling_probability":-0.5,"event":{"type":"GaussianDpEvent","noise_multiplier":1}}`,
		`{"type":"GaussianDpEvent","noise_multiplier":1e999}`,
		`{"type":"GaussianDpEvent","noise_multiplier":"NaN"}`,
		`{"type":"SelfComposedDpEvent","count":-1,"event":{"type":"NoOpDpEvent"}}`,
		deep,
	} {
		if e, err := UnmarshalEvent([]byte(bad)); err == nil {
			t.Errorf("%s accepted as %#v", bad, e)
		}
	}
	// One level less than the refused nesting is fine, as is white space.
	ok := deep[strings.Index(deep[1:], "{")+1 : len(deep)-1]
	for _, good := range []string{ok, " {\"type\":\"NoOpDpEvent\"}\n", `{"type":"ComposedDpEvent","events":[]}`, `{"type":"ComposedDpEvent"}`} {
		if _, err := UnmarshalEvent([]byte(good)); err != nil {
			t.Errorf("%.80s: %v", good, err)
		}
	}
}
