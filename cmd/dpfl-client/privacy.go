package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/dpfl/dpfl/accounting"
	"github.com/dpfl/dpfl/accounting/pld"
	"github.com/dpfl/dpfl/api/client"
	"github.com/dpfl/dpfl/api/types"
)

func privacy(ctx context.Context, cl *client.Client, id string, asJSON bool, out io.Writer) error {
	rep, err := cl.Privacy(ctx, id)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(out, rep)
	}
	if !rep.Private {
		fmt.Fprintf(out, "%s: %s\n", id, rep.Note)
		return nil
	}
	fmt.Fprintf(out, "job %s: %d rounds committed, %d privacy events recorded\n", id, rep.Rounds, len(rep.Events))
	if rep.Epsilon != nil {
		fmt.Fprintf(out, "ε = %.4f at δ = %g (%s accountant, the tighter valid bound)\n", *rep.Epsilon, rep.Delta, rep.Accountant)
	}
	printEmpirical(out, rep.EmpiricalEpsilon)
	if rep.Uncovered != "" {
		fmt.Fprintf(out, "WARNING: not covered by the analysis: %s\n", rep.Uncovered)
	}
	if a := rep.Accounting; a != nil {
		printEstimates(out, a.RDP, a.PLD)
	}
	if rep.EpsilonBudget > 0 && rep.Remaining != nil {
		fmt.Fprintf(out, "budget ε_max = %g, remaining %.4f\n", rep.EpsilonBudget, *rep.Remaining)
	}
	if len(rep.Events) > 0 {
		fmt.Fprintf(out, "event per round: %s\n", strings.TrimSpace(string(rep.Events[0].Event)))
	}
	return nil
}

// printEmpirical shows the canary audit's empirical ε beside the
// analytical one (nothing when the job has no canaries).
func printEmpirical(out io.Writer, e *types.EmpiricalEpsilon) {
	if e == nil {
		return
	}
	if e.Estimate != nil && e.Lower != nil && e.Upper != nil {
		fmt.Fprintf(out, "empirical ε = %.4f, %.0f%% interval [%.4f, %.4f] (%d canaries, %d held out, model of round %d)\n",
			*e.Estimate, 100*e.Confidence, *e.Lower, *e.Upper, e.Canaries, e.HeldOut, e.Round)
	} else {
		fmt.Fprintf(out, "empirical ε: none yet (%d canaries, %d held out)\n", e.Canaries, e.HeldOut)
	}
	if e.Note != "" {
		fmt.Fprintf(out, "  %s\n", e.Note)
	}
}

func printEstimates(out io.Writer, es ...types.Estimate) {
	for _, e := range es {
		switch {
		case e.Epsilon != nil:
			fmt.Fprintf(out, "  %s: ε = %.4f", e.Accountant, *e.Epsilon)
			if e.Order > 0 {
				fmt.Fprintf(out, " (order α = %g)", e.Order)
			}
			fmt.Fprintln(out)
		default:
			fmt.Fprintf(out, "  %s: %s\n", e.Accountant, e.Note)
		}
	}
}

// audit prints the ledger as a table, one row per recorded event.
func audit(ctx context.Context, cl *client.Client, id string, out io.Writer) error {
	rep, err := cl.Privacy(ctx, id)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tROUND\tTIME\tEVENT")
	for _, e := range rep.Events {
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\n", e.Seq, e.Round, e.Time.Format("2006-01-02T15:04:05.000Z07:00"), describe(e.Event))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if rep.Epsilon != nil {
		fmt.Fprintf(out, "%d events, %d rounds committed: ε = %.4f at δ = %g (%s)\n", len(rep.Events), rep.Rounds, *rep.Epsilon, rep.Delta, rep.Accountant)
	}
	return nil
}

// describe renders a stored event compactly, e.g. "poisson(q=0.02) gaussian(z=1)".
func describe(raw []byte) string {
	e, err := accounting.UnmarshalEvent(raw)
	if err != nil {
		return "unreadable: " + err.Error()
	}
	var f func(accounting.Event) string
	f = func(e accounting.Event) string {
		switch e := e.(type) {
		case accounting.Gaussian:
			return fmt.Sprintf("gaussian(z=%g)", e.NoiseMultiplier)
		case accounting.PoissonSampled:
			return fmt.Sprintf("poisson(q=%g) %s", e.SamplingProbability, f(e.Event))
		case accounting.SampledWithoutReplacement:
			return fmt.Sprintf("without-replacement(%d of %d) %s", e.SampleSize, e.SourceDatasetSize, f(e.Event))
		}
		return string(raw)
	}
	return f(e)
}

// privacyOffline answers 'privacy compute' (ε of a planned job, like TF
// Privacy's compute_dp_sgd_privacy) and 'privacy calibrate' (the smallest
// z for a target ε) without a server.
func privacyOffline(c *command, verb string, args []string, out io.Writer) error {
	fs := c.fs
	q := fs.Float64("sampling-rate", 0, "Poisson sampling rate q ∈ (0, 1]")
	rounds := fs.Int("rounds", 0, "number of rounds T")
	delta := fs.Float64("delta", 1e-5, "δ")
	z := fs.Float64("noise-multiplier", 0, "noise multiplier z (compute)")
	eps := fs.Float64("target-epsilon", 0, "target ε (calibrate)")
	c.deprecatedFlag("q", "sampling-rate")
	c.deprecatedFlag("steps", "rounds")
	c.deprecatedFlag("noise", "noise-multiplier")
	c.deprecatedFlag("epsilon", "target-epsilon")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case !(*q > 0 && *q <= 1):
		return fmt.Errorf("--sampling-rate must be in (0, 1], got %v", *q)
	case *rounds < 1:
		return fmt.Errorf("--rounds must be ≥ 1, got %d", *rounds)
	case !(*delta > 0 && *delta < 1):
		return fmt.Errorf("--delta must be in (0, 1), got %v", *delta)
	}
	if verb == "calibrate" {
		return calibrate(*eps, *delta, *q, *rounds, out)
	}
	if !(*z > 0) {
		return fmt.Errorf("--noise-multiplier must be > 0, got %v", *z)
	}
	ev := accounting.SelfComposed{Event: accounting.PoissonSampled{SamplingProbability: *q, Event: accounting.Gaussian{NoiseMultiplier: *z}}, Count: *rounds}
	rep, err := accounting.Account([]accounting.Event{ev}, *delta)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%d rounds of the Poisson-sampled Gaussian (q = %g, z = %g) at δ = %g:\n", *rounds, *q, *z, *delta)
	printEstimates(out, types.Estimate(rep.RDP), types.Estimate(rep.PLD))
	return nil
}

// calibrate prints the smallest z of each accountant for ε ≤ eps after
// rounds Poisson-sampled rounds at rate q.
func calibrate(eps, delta, q float64, rounds int, out io.Writer) error {
	if !(eps > 0) {
		return fmt.Errorf("--target-epsilon must be > 0, got %v", eps)
	}
	zr, err := accounting.CalibrateNoise(accounting.EpsilonPoissonGaussian, eps, delta, q, rounds)
	if err != nil {
		return err
	}
	zp, err := accounting.CalibrateNoise(pld.EpsilonPoissonGaussian, eps, delta, q, rounds)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "smallest noise multiplier for ε ≤ %g at δ = %g, q = %g, %d rounds:\n", eps, delta, q, rounds)
	fmt.Fprintf(out, "  rdp: z = %.4f\n  pld: z = %.4f\n", zr, zp)
	return nil
}

// budget creates or shows a shared privacy budget.
func budget(ctx context.Context, c *command, args []string, out io.Writer) error {
	if len(args) > 0 && args[0] == "create" {
		eps := c.fs.Float64("epsilon-budget", 0, "the budget's ε_max")
		delta := c.fs.Float64("delta", 1e-5, "the budget's δ")
		c.deprecatedFlag("epsilon", "epsilon-budget")
		name, err := c.jobArg(args[1:])
		if err != nil {
			return err
		}
		cl, err := c.client()
		if err != nil {
			return err
		}
		rep, err := cl.CreateBudget(ctx, name, *eps, *delta)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "created budget %s: ε_max = %g at δ = %g\n", rep.Name, rep.EpsilonBudget, rep.Delta)
		return nil
	}
	name, err := c.jobArg(args)
	if err != nil {
		return err
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	rep, err := cl.Budget(ctx, name)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "budget %s: ε_max = %g at δ = %g, %d jobs, %d events\n", rep.Name, rep.EpsilonBudget, rep.Delta, len(rep.Jobs), rep.Events)
	if rep.Epsilon != nil {
		fmt.Fprintf(out, "spent ε = %.4f (%s), remaining %.4f\n", *rep.Epsilon, rep.Accountant, rep.Remaining)
	}
	return nil
}
