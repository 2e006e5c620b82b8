package secagg

import (
	"crypto/rand"
	"slices"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"
)

// maskedZero runs rounds 0–1 of a 3-client complete instance and returns
// client 1's masked vector of the all-zero input of length d.
func maskedZero(t *testing.T, d int) []uint32 {
	t.Helper()
	in := map[ClientID][]uint32{1: make([]uint32, d), 2: make([]uint32, d), 3: make([]uint32, d)}
	h := newHarness(t, ServerConfig{Session: []byte("uniform"), Dim: d, Params: Params{Neighbors: 2, Threshold: 2}}, in, nil)
	if err := h.advertise(); err != nil {
		t.Fatal(err)
	}
	if err := h.shareKeys(); err != nil {
		t.Fatal(err)
	}
	sm, err := h.srv.MaskedInputRequest(1)
	if err != nil {
		t.Fatal(err)
	}
	m, err := h.clients[1].MaskedInput(sm, in[1])
	if err != nil {
		t.Fatal(err)
	}
	return m.Masked
}

// TestMaskedLooksUniform applies a chi-square test (255 degrees of
// freedom) to the byte histogram of a masked all-zero vector: under
// uniformity the statistic falls outside its two-sided 1−10^−6 interval
// with probability 10^−6, so a correct implementation almost never fails,
// while a missing or weak mask (zeros, a short-period stream) fails at
// once. Two instances must also give different vectors.
func TestMaskedLooksUniform(t *testing.T) {
	const d = 1 << 16
	y := maskedZero(t, d)
	var hist [256]float64
	for _, w := range y {
		hist[byte(w)]++
		hist[byte(w>>8)]++
		hist[byte(w>>16)]++
		hist[byte(w>>24)]++
	}
	exp := float64(4*d) / 256
	var chi2 float64
	for _, c := range hist {
		chi2 += (c - exp) * (c - exp) / exp
	}
	dist := distuv.ChiSquared{K: 255}
	lo, hi := dist.Quantile(0.5e-6), dist.Quantile(1-0.5e-6)
	if chi2 < lo || chi2 > hi {
		t.Fatalf("chi-square %v outside [%v, %v]", chi2, lo, hi)
	}
	t.Logf("chi-square %.1f, acceptance [%.1f, %.1f]", chi2, lo, hi)
	if slices.Equal(y, maskedZero(t, d)) {
		t.Fatal("two instances gave the same masked vector")
	}
}

// TestNewClientErrors covers NewClient's argument checks.
func TestNewClientErrors(t *testing.T) {
	if _, _, err := NewClient(0, []byte("s"), rand.Reader); err == nil {
		t.Error("client ID 0 accepted")
	}
	if _, _, err := NewClient(1, nil, rand.Reader); err == nil {
		t.Error("empty session accepted")
	}
}
