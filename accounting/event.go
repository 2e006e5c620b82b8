// Package accounting turns a job's record of differentially private
// releases into (ε, δ).
//
// Privacy is described by immutable event values that mirror, class for
// class and field for field, Google's dp_accounting dp_event module
// (GaussianDpEvent, PoissonSampledDpEvent, SampledWithoutReplacementDpEvent,
// SelfComposedDpEvent, ComposedDpEvent, NoOpDpEvent, NonPrivateDpEvent,
// ZCDpEvent).
// Events are data: the store keeps events, never ε, and accountants are
// functions of events, so ε is always recomputable from the ledger by us or
// by an auditor running dp_accounting on the same JSON.
//
// The RDP accountant (Mironov 2017, "Rényi Differential Privacy") computes
// the Rényi divergence of each event at a grid of orders α, adds them under
// composition, and converts to (ε, δ) with the bound of Balle et al. 2020 /
// Canonne, Kamath, Steinke 2020.
package accounting

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
)

// Event is a differentially private release, or a composition of them.
// The concrete types below are the whole vocabulary.
type Event interface {
	// dpEventType is the dp_accounting class name.
	dpEventType() string
}

// Gaussian is the Gaussian mechanism with noise standard deviation
// NoiseMultiplier × (L2 sensitivity) — dp_accounting's GaussianDpEvent.
type Gaussian struct{ NoiseMultiplier float64 }

// PoissonSampled runs Event on a Poisson subsample: every record is
// included independently with probability SamplingProbability —
// dp_accounting's PoissonSampledDpEvent. Add/remove adjacency.
type PoissonSampled struct {
	SamplingProbability float64
	Event               Event
}

// SampledWithoutReplacement runs Event on a uniformly random subset of
// SampleSize of SourceDatasetSize records — dp_accounting's
// SampledWithoutReplacementDpEvent. Replace-one adjacency.
type SampledWithoutReplacement struct {
	SourceDatasetSize, SampleSize int
	Event                         Event
}

// SelfComposed is Event repeated Count times — SelfComposedDpEvent.
type SelfComposed struct {
	Event Event
	Count int
}

// Composed is the sequential composition of Events — ComposedDpEvent.
type Composed struct{ Events []Event }

// NoOp releases nothing — NoOpDpEvent.
type NoOp struct{}

// NonPrivate releases data without a guarantee (ε = ∞) — NonPrivateDpEvent.
type NonPrivate struct{}

// ZCDP is a mechanism that satisfies (Xi, Rho)-zero-concentrated DP
// (Bun & Steinke 2016, Def. 1.1): its Rényi divergence at every order
// α > 1 is at most Xi + Rho·α, in both directions, for every pair of
// neighbouring inputs. It is dp_accounting's ZCDpEvent, whose xi defaults
// to 0 (ρ-zCDP): the JSON is {"type":"ZCDpEvent","rho":ρ} and, only when
// ξ ≠ 0, "xi":ξ. It records mechanisms that are bounded in zCDP rather
// than by a Gaussian noise multiplier, such as the distributed discrete
// Gaussian (DistributedDiscreteGaussianRho).
//
// Accountants refuse a ZCDP inside PoissonSampled or
// SampledWithoutReplacement: zCDP alone does not determine the privacy of
// a subsampled mechanism (in general zCDP does not amplify under
// subsampling as the sampled Gaussian does: a motivation of the truncated
// CDP of Bun, Dwork, Rothblum, Steinke 2018), and this package implements
// no amplification bound for it. (dp_accounting's RDP
// accountant reads a sampled ZCDpEvent with ξ = 0 as a sampled Gaussian of
// noise multiplier 1/√(2ρ); that is valid only for a mechanism that is a
// Gaussian, which the distributed discrete Gaussian is not.) A job that
// records ZCDP events therefore claims no amplification by sampling: a
// fixed cohort, each round composed at its full ρ.
type ZCDP struct{ Rho, Xi float64 }

func (Gaussian) dpEventType() string                  { return "GaussianDpEvent" }
func (PoissonSampled) dpEventType() string            { return "PoissonSampledDpEvent" }
func (SampledWithoutReplacement) dpEventType() string { return "SampledWithoutReplacementDpEvent" }
func (SelfComposed) dpEventType() string              { return "SelfComposedDpEvent" }
func (Composed) dpEventType() string                  { return "ComposedDpEvent" }
func (NoOp) dpEventType() string                      { return "NoOpDpEvent" }
func (NonPrivate) dpEventType() string                { return "NonPrivateDpEvent" }
func (ZCDP) dpEventType() string                      { return "ZCDpEvent" }

// canonical is z with −0 read as 0.
func (z ZCDP) canonical() ZCDP {
	if z.Rho == 0 {
		z.Rho = 0
	}
	if z.Xi == 0 {
		z.Xi = 0
	}
	return z
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// Validate reports the first parameter of e (or of a nested event) that
// breaks its rule: z > 0, q ∈ (0, 1], 1 ≤ sample ≤ source, count ≥ 0,
// ρ ≥ 0 and ξ ≥ 0, all finite, no nil events.
func Validate(e Event) error {
	switch e := e.(type) {
	case Gaussian:
		if !(e.NoiseMultiplier > 0) || !finite(e.NoiseMultiplier) {
			return fmt.Errorf("GaussianDpEvent: noise_multiplier must be a finite number > 0, got %v", e.NoiseMultiplier)
		}
	case PoissonSampled:
		if !(e.SamplingProbability > 0 && e.SamplingProbability <= 1) {
			return fmt.Errorf("PoissonSampledDpEvent: sampling_probability must be in (0, 1], got %v", e.SamplingProbability)
		}
		return Validate(e.Event)
	case SampledWithoutReplacement:
		if e.SampleSize < 1 || e.SampleSize > e.SourceDatasetSize {
			return fmt.Errorf("SampledWithoutReplacementDpEvent: need 1 ≤ sample_size ≤ source_dataset_size, got %d of %d", e.SampleSize, e.SourceDatasetSize)
		}
		return Validate(e.Event)
	case SelfComposed:
		if e.Count < 0 {
			return fmt.Errorf("SelfComposedDpEvent: count must be ≥ 0, got %d", e.Count)
		}
		return Validate(e.Event)
	case Composed:
		for i, sub := range e.Events {
			if err := Validate(sub); err != nil {
				return fmt.Errorf("ComposedDpEvent.events[%d]: %w", i, err)
			}
		}
	case ZCDP:
		if !(e.Rho >= 0) || !finite(e.Rho) {
			return fmt.Errorf("ZCDpEvent: rho must be a finite number ≥ 0, got %v", e.Rho)
		}
		if !(e.Xi >= 0) || !finite(e.Xi) {
			return fmt.Errorf("ZCDpEvent: xi must be a finite number ≥ 0, got %v", e.Xi)
		}
	case NoOp, NonPrivate:
	case nil:
		return errors.New("missing event")
	default:
		return fmt.Errorf("unknown event type %T", e)
	}
	return nil
}

// wire is the JSON form of every event: dp_accounting's class name in
// "type" and its constructor arguments under their Python names.
type wire struct {
	Type                string            `json:"type"`
	NoiseMultiplier     *float64          `json:"noise_multiplier,omitempty"`
	SamplingProbability *float64          `json:"sampling_probability,omitempty"`
	SourceDatasetSize   *int              `json:"source_dataset_size,omitempty"`
	SampleSize          *int              `json:"sample_size,omitempty"`
	Count               *int              `json:"count,omitempty"`
	Event               json.RawMessage   `json:"event,omitempty"`
	Events              []json.RawMessage `json:"events,omitempty"`
	Rho                 *float64          `json:"rho,omitempty"`
	Xi                  *float64          `json:"xi,omitempty"`
}

// MarshalEvent encodes e as JSON, e.g.
// {"type":"PoissonSampledDpEvent","sampling_probability":0.02,"event":{"type":"GaussianDpEvent","noise_multiplier":1}}.
// Invalid events are refused.
func MarshalEvent(e Event) ([]byte, error) {
	if err := Validate(e); err != nil {
		return nil, err
	}
	w, err := toWire(e)
	if err != nil {
		return nil, err
	}
	return json.Marshal(w)
}

func toWire(e Event) (wire, error) {
	w := wire{Type: e.dpEventType()}
	sub := func(e Event) (json.RawMessage, error) {
		sw, err := toWire(e)
		if err != nil {
			return nil, err
		}
		return json.Marshal(sw)
	}
	var err error
	switch e := e.(type) {
	case Gaussian:
		w.NoiseMultiplier = &e.NoiseMultiplier
	case PoissonSampled:
		w.SamplingProbability = &e.SamplingProbability
		w.Event, err = sub(e.Event)
	case SampledWithoutReplacement:
		w.SourceDatasetSize, w.SampleSize = &e.SourceDatasetSize, &e.SampleSize
		w.Event, err = sub(e.Event)
	case SelfComposed:
		w.Count = &e.Count
		w.Event, err = sub(e.Event)
	case Composed:
		w.Events = []json.RawMessage{}
		for _, s := range e.Events {
			b, err := sub(s)
			if err != nil {
				return w, err
			}
			w.Events = append(w.Events, b)
		}
	case ZCDP:
		// ξ = 0 is dp_accounting's default and is left out, and −0 is
		// written as 0, so equal events have one canonical form.
		e = e.canonical()
		w.Rho = &e.Rho
		if e.Xi != 0 {
			w.Xi = &e.Xi
		}
	}
	return w, err
}

// UnmarshalEvent decodes and validates MarshalEvent's JSON. Unknown types,
// missing fields, fields that do not belong to the type, duplicate or
// differently cased keys, trailing data, nesting deeper than
// MaxEventDepth and invalid parameters are errors: the input may be a
// corrupted store or a hostile server, and an event that decodes to
// anything but what an auditor running dp_accounting on the same JSON
// would read can make ε wrong.
func UnmarshalEvent(b []byte) (Event, error) {
	e, err := decodeEvent(b, 1)
	if err != nil {
		return nil, err
	}
	// An invalid event is not returned beside its error: a caller that
	// logged the error and went on must not account a z = 0 or q = 10.
	if err := Validate(e); err != nil {
		return nil, err
	}
	return e, nil
}

// MaxEventDepth bounds the nesting of decoded events. Real ledgers nest
// two or three deep (a Poisson-sampled Gaussian, maybe self-composed);
// the bound keeps decoding linear in the input, since each level decodes
// its own sub-document again.
const MaxEventDepth = 32

// wireFields is the set of JSON keys each event type may carry, spelt
// exactly as MarshalEvent writes them.
var wireFields = map[string][]string{
	"GaussianDpEvent":                  {"type", "noise_multiplier"},
	"PoissonSampledDpEvent":            {"type", "sampling_probability", "event"},
	"SampledWithoutReplacementDpEvent": {"type", "source_dataset_size", "sample_size", "event"},
	"SelfComposedDpEvent":              {"type", "event", "count"},
	"ComposedDpEvent":                  {"type", "events"},
	"NoOpDpEvent":                      {"type"},
	"NonPrivateDpEvent":                {"type"},
	"ZCDpEvent":                        {"type", "rho", "xi"},
}

// decodeEvent decodes one event at nesting depth depth (the top is 1).
func decodeEvent(b []byte, depth int) (Event, error) {
	if depth > MaxEventDepth {
		return nil, fmt.Errorf("decoding DP event: nested deeper than %d", MaxEventDepth)
	}
	var w wire
	keys, err := decodeStrict(b, &w)
	if err != nil {
		return nil, fmt.Errorf("decoding DP event: %w", err)
	}
	allowed, ok := wireFields[w.Type]
	if !ok {
		return nil, fmt.Errorf("unknown DP event type %q", w.Type)
	}
	for _, k := range keys {
		if !slices.Contains(allowed, k) {
			return nil, fmt.Errorf("%s: field %q does not belong to this type", w.Type, k)
		}
	}
	return fromWire(w, depth)
}

// decodeStrict decodes one JSON object into w and returns its keys. It
// refuses unknown fields (a misspelt "events" must not make a composition
// read as empty, i.e. free), keys that match a field only up to case or
// occur twice (encoding/json would accept both, silently, where
// dp_accounting's Python would read a different event), and anything
// after the object.
func decodeStrict(b []byte, w *wire) ([]string, error) {
	keys, err := objectKeys(b)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(w); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the event")
	}
	return keys, nil
}

// objectKeys returns the keys of the JSON object b, in order, refusing a
// non-object, a key that is not one of wire's exact JSON names, and a
// repeated key.
func objectKeys(b []byte) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil {
		return nil, err
	} else if tok != json.Delim('{') {
		return nil, errors.New("not a JSON object")
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k, _ := tok.(string) // a key inside an object is always a string
		if !slices.Contains(wireKeys, k) {
			return nil, fmt.Errorf("unknown field %q", k)
		}
		if slices.Contains(keys, k) {
			return nil, fmt.Errorf("duplicate field %q", k)
		}
		keys = append(keys, k)
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// wireKeys is every JSON name of wire.
var wireKeys = []string{"type", "noise_multiplier", "sampling_probability", "source_dataset_size", "sample_size", "count", "event", "events", "rho", "xi"}

func fromWire(w wire, depth int) (Event, error) {
	missing := func(f string) error { return fmt.Errorf("%s: missing field %s", w.Type, f) }
	sub := func(raw json.RawMessage) (Event, error) {
		if len(raw) == 0 {
			return nil, missing("event")
		}
		return decodeEvent(raw, depth+1)
	}
	switch w.Type {
	case "GaussianDpEvent":
		if w.NoiseMultiplier == nil {
			return nil, missing("noise_multiplier")
		}
		return Gaussian{NoiseMultiplier: *w.NoiseMultiplier}, nil
	case "PoissonSampledDpEvent":
		if w.SamplingProbability == nil {
			return nil, missing("sampling_probability")
		}
		e, err := sub(w.Event)
		return PoissonSampled{SamplingProbability: *w.SamplingProbability, Event: e}, err
	case "SampledWithoutReplacementDpEvent":
		if w.SourceDatasetSize == nil || w.SampleSize == nil {
			return nil, missing("source_dataset_size/sample_size")
		}
		e, err := sub(w.Event)
		return SampledWithoutReplacement{SourceDatasetSize: *w.SourceDatasetSize, SampleSize: *w.SampleSize, Event: e}, err
	case "SelfComposedDpEvent":
		if w.Count == nil {
			return nil, missing("count")
		}
		e, err := sub(w.Event)
		return SelfComposed{Event: e, Count: *w.Count}, err
	case "ComposedDpEvent":
		// No "events" key is the empty composition: MarshalEvent omits
		// the empty list, so stored ledgers hold that form.
		c := Composed{}
		for _, raw := range w.Events {
			e, err := sub(raw)
			if err != nil {
				return nil, err
			}
			c.Events = append(c.Events, e)
		}
		return c, nil
	case "NoOpDpEvent":
		return NoOp{}, nil
	case "NonPrivateDpEvent":
		return NonPrivate{}, nil
	case "ZCDpEvent":
		if w.Rho == nil {
			return nil, missing("rho")
		}
		z := ZCDP{Rho: *w.Rho}
		if w.Xi != nil { // absent: dp_accounting's default, 0
			z.Xi = *w.Xi
		}
		return z.canonical(), nil
	}
	return nil, fmt.Errorf("unknown DP event type %q", w.Type)
}
