package pld

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/dsp/fourier"
)

// directLimit is the largest len(a)·len(b) convolved directly; above it the
// FFT is faster.
const directLimit = 1 << 16

// Compose returns the PLD of running the mechanisms of p and o on the same
// pair of neighbouring datasets: per adjacency direction, the distribution
// of the sum of the independent losses, i.e. the convolution of the pmfs
// (Koskela, Jälkö, Honkela 2020, §3) computed with the FFT. The +∞ masses
// combine as 1 − (1−a)(1−b). Tails of total mass ≤ 1e-16 on each side are
// truncated pessimistically (upper to +∞, lower up to the lowest kept bin).
// It returns an error if o is nil, the intervals of p and o differ (they
// must be equal, not merely close), or the result exceeds 2²² bins.
func (p *PLD) Compose(o *PLD) (*PLD, error) {
	if o == nil {
		return nil, errors.New("pld: compose with nil PLD")
	}
	if p.h != o.h {
		return nil, fmt.Errorf("pld: grids differ: interval %v vs %v", p.h, o.h)
	}
	n := max(len(p.dirs), len(o.dirs))
	out := &PLD{h: p.h, dirs: make([]dist, n)}
	for i := range n {
		d, err := convolve(p.dir(i), o.dir(i))
		if err != nil {
			return nil, err
		}
		out.dirs[i] = d
	}
	return out, nil
}

// SelfCompose returns the n-fold composition of p with itself. Per direction
// it takes one real FFT of the pmf, raises the spectrum to the n-th power by
// repeated squaring and transforms back, as dp_accounting does. The window
// of composed losses is chosen with Chernoff bounds on the n-fold sum
// (P(S ≥ u) ≤ e^{−tu}·M(t)^n, t > 0, and its mirror image) so that each
// tail outside it has mass ≤ 1e-16: the bound on the upper tail is added to
// the +∞ mass, and the lower tail wraps around the circular convolution
// onto larger losses, which only increases δ. SelfCompose(0) is the
// identity and SelfCompose(1) a copy. It returns an error if n < 0 or the
// window exceeds 2²² bins.
func (p *PLD) SelfCompose(n int) (*PLD, error) {
	if n < 0 {
		return nil, fmt.Errorf("pld: negative composition count %d", n)
	}
	out := &PLD{h: p.h, dirs: make([]dist, len(p.dirs))}
	for i := range p.dirs {
		d, err := selfConvolve(&p.dirs[i], n)
		if err != nil {
			return nil, err
		}
		out.dirs[i] = d
	}
	return out, nil
}

// dir returns direction i, reusing the single stored one when the two
// directions coincide.
func (p *PLD) dir(i int) *dist {
	if i < len(p.dirs) {
		return &p.dirs[i]
	}
	return &p.dirs[0]
}

// convolve returns the convolution of a and b, truncated with tailMass.
func convolve(a, b *dist) (dist, error) {
	n := len(a.pmf) + len(b.pmf) - 1
	if n > maxBins {
		return dist{}, fmt.Errorf("pld: composition needs %d bins (limit %d)", n, maxBins)
	}
	out := make([]float64, n)
	if len(a.pmf)*len(b.pmf) <= directLimit || min(len(a.pmf), len(b.pmf)) <= 32 {
		for i, x := range a.pmf {
			if x == 0 {
				continue
			}
			for j, y := range b.pmf {
				out[i+j] += x * y
			}
		}
	} else {
		fftConvolve(out, a.pmf, b.pmf)
	}
	inf := a.inf + b.inf - a.inf*b.inf
	return trim(dist{lo: a.lo + b.lo, pmf: out, inf: inf}, tailMass), nil
}

// fftConvolve writes the linear convolution of x and y into dst, which must
// have length len(x)+len(y)−1. Round-off negatives are clamped to 0.
func fftConvolve(dst, x, y []float64) {
	if len(dst) != len(x)+len(y)-1 {
		panic("pld: convolution length mismatch")
	}
	n := fastLen(len(dst))
	f := fourier.NewFFT(n)
	buf := make([]float64, n)
	copy(buf, x)
	cx := f.Coefficients(nil, buf)
	clear(buf)
	copy(buf, y)
	cy := f.Coefficients(nil, buf)
	for k := range cx {
		cx[k] *= cy[k]
	}
	f.Sequence(buf, cx)
	inv := 1 / float64(n)
	for i := range dst {
		dst[i] = math.Max(buf[i]*inv, 0)
	}
}

// selfConvolve returns the n-fold convolution of d (see SelfCompose).
func selfConvolve(d *dist, n int) (dist, error) {
	switch n {
	case 0:
		return dist{lo: 0, pmf: []float64{1}}, nil
	case 1:
		return dist{lo: d.lo, pmf: append([]float64(nil), d.pmf...), inf: d.inf}, nil
	}
	inf := -math.Expm1(float64(n) * math.Log1p(-d.inf)) // 1 − (1−inf)^n
	mass := 0.0
	for _, v := range d.pmf {
		mass += v
	}
	if !(float64(n)*math.Log(mass) > math.Log(tailMass)) {
		// The finite part is negligible: everything is at +∞.
		return dist{lo: n * d.lo, pmf: []float64{0}, inf: 1}, nil
	}
	top := n * (len(d.pmf) - 1) // largest offset of the n-fold sum
	ch := newChernoff(d.pmf, n)
	tU, uStar := ch.minimize(1, tailMass)
	_, vStar := ch.minimize(-1, tailMass)
	wlo := max(0, int(math.Min(math.Floor(-vStar), float64(top))))
	whi := int(math.Max(math.Min(math.Ceil(uStar), float64(top)), float64(wlo)))
	if whi-wlo+1 > maxBins {
		return dist{}, fmt.Errorf("pld: %d-fold composition needs %d bins (limit %d)", n, whi-wlo+1, maxBins)
	}
	size := fastLen(whi - wlo + 1)
	// The whole circular window is kept, so mass aliased from below the
	// window always lands on a kept, larger loss.
	whi = wlo + size - 1
	tb := 0.0
	if whi < top {
		tb = ch.upperTail(tU, whi+1)
	}

	f := fourier.NewFFT(size)
	buf := make([]float64, size)
	for i, v := range d.pmf {
		buf[i%size] += v
	}
	c := f.Coefficients(nil, buf)
	for k, z := range c {
		c[k] = cpow(z, n)
	}
	f.Sequence(buf, c)
	pmf := make([]float64, size)
	inv := 1 / float64(size)
	s := wlo % size
	for j := range pmf {
		pmf[j] = math.Max(buf[(s+j)%size]*inv, 0)
	}
	out := dist{lo: n*d.lo + wlo, pmf: pmf, inf: math.Min(1, inf+tb)}
	return trim(out, tailMass), nil
}

// cpow returns z^n by repeated squaring: exact at z = 0 and free of the
// branch cut of exp(n·log z).
func cpow(z complex128, n int) complex128 {
	r := complex(1, 0)
	for n > 0 {
		if n&1 == 1 {
			r *= z
		}
		z *= z
		n >>= 1
	}
	return r
}

// trim moves the longest upper run of bins with total mass ≤ tau to +∞ and
// the longest lower run with total mass ≤ tau up onto the lowest kept bin.
func trim(d dist, tau float64) dist {
	hi, s := len(d.pmf)-1, 0.0
	for hi > 0 && s+d.pmf[hi] <= tau {
		s += d.pmf[hi]
		hi--
	}
	d.inf += s
	lo, s := 0, 0.0
	for lo < hi && s+d.pmf[lo] <= tau {
		s += d.pmf[lo]
		lo++
	}
	d.pmf[lo] += s
	kept := d.pmf[lo : hi+1]
	if 2*len(kept) < cap(d.pmf) {
		kept = append([]float64(nil), kept...) // release the large array
	}
	d.pmf = kept
	d.lo += lo
	return d
}

// fastLen returns the smallest 2^a·3^b·5^c ≥ n, lengths on which gonum's
// mixed-radix FFT is fast.
func fastLen(n int) int {
	best := math.MaxInt
	for p5 := 1; p5 < best; p5 *= 5 {
		for p35 := p5; p35 < best; p35 *= 3 {
			p := p35
			for p < n {
				p *= 2
			}
			best = min(best, p)
			if p35 >= n {
				break
			}
		}
		if p5 >= n {
			break
		}
	}
	return best
}
