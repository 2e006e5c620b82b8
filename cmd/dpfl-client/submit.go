package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"gopkg.in/yaml.v3"

	"github.com/dpfl/dpfl/api/client"
	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/internal/strictjson"
)

// override maps a submit flag to the job field (JSON path) it sets;
// old are its names of earlier releases, accepted with a warning.
type override struct {
	flag, path, help string
	kind             byte // 's' string, 'i' int, 'f' float, 'b' bool
	old              []string
}

var overrides = []override{
	{"name", "name", "job name", 's', nil},
	{"model", "model", "model: logreg | mlp | cnn", 's', nil},
	{"dataset", "dataset", "fashion-mnist | synthetic | leaf", 's', nil},
	{"algorithm", "algorithm", "fedavg | scaffold | fednova", 's', nil},
	{"optimizer", "server.optimizer", "server optimizer: sgd | momentum | adagrad | adam | yogi", 's', nil},
	{"prox-mu", "client.prox_mu", "FedProx μ", 'f', nil},
	{"secure-aggregation", "secure_aggregation", "aggregate through secure aggregation", 'b', nil},
	{"on-demand", "population.on_demand", "derive users' data on demand (populations up to 10M)", 'b', nil},
	{"rounds", "rounds", "number of rounds T", 'i', nil},
	{"population", "population.size", "population size N", 'i', []string{"clients"}},
	{"partition", "population.partition", "iid | dirichlet | shards | labels", 's', nil},
	{"alpha", "population.dirichlet_alpha", "Dirichlet concentration α", 'f', nil},
	{"sampling", "sampling.scheme", "poisson | fixed", 's', nil},
	{"sampling-rate", "sampling.rate", "Poisson sampling rate q", 'f', []string{"q"}},
	{"cohort-size", "sampling.cohort_size", "fixed cohort size K", 'i', []string{"cohort"}},
	{"epochs", "client.epochs", "local epochs E", 'i', nil},
	{"batch", "client.batch_size", "local batch size B", 'i', nil},
	{"client-lr", "client.lr", "client learning rate η_l", 'f', nil},
	{"server-lr", "server.lr", "server learning rate η_s", 'f', nil},
	{"dp", "dp.enabled", "train with user-level DP", 'b', nil},
	{"clip-norm", "dp.clip_norm", "clip norm C", 'f', []string{"clip"}},
	{"noise-multiplier", "dp.noise_multiplier", "noise multiplier z", 'f', []string{"z", "noise"}},
	{"delta", "dp.delta", "δ", 'f', nil},
	{"epsilon-budget", "dp.epsilon_budget", "ε_max (0 = none)", 'f', nil},
	{"target-epsilon", "dp.target_epsilon", "calibrate z to this ε after all rounds (0 = use --noise-multiplier)", 'f', nil},
	{"budget", "dp.budget", "shared budget to charge the job to ('budget create')", 's', nil},
	{"eval-every", "eval_every", "evaluate every this many rounds", 'i', nil},
	{"seed", "seed", "simulation seed", 'i', nil},
}

func submit(ctx context.Context, c *command, args []string, out io.Writer) error {
	file := c.fs.String("file", "", "job file, JSON or YAML (fields left out take the server's defaults)")
	doWatch := c.fs.Bool("watch", false, "watch the job until it ends")
	stall := stallFlag(c.fs)
	vals := map[string]*string{}
	for _, o := range overrides {
		vals[o.flag] = c.fs.String(o.flag, "", o.help+" (sets "+o.path+")")
		for _, old := range o.old {
			c.deprecatedFlag(old, o.flag)
		}
	}
	if err := c.fs.Parse(args); err != nil {
		return err
	}
	spec := map[string]any{}
	if *file != "" {
		b, err := os.ReadFile(*file)
		if err != nil {
			return err
		}
		if ext := strings.ToLower(filepath.Ext(*file)); ext == ".yaml" || ext == ".yml" {
			err = yaml.Unmarshal(b, &spec) // yaml.v3 refuses a repeated key itself
		} else {
			// The server would refuse a repeated key or trailing data, but
			// the map below would hide them: check the file as written.
			err = strictjson.Decode(b, &spec)
		}
		if err != nil {
			return fmt.Errorf("reading job file %s: %w", *file, err)
		}
	}
	var err error
	c.fs.Visit(func(f *flag.Flag) {
		for _, o := range overrides {
			if o.flag == f.Name && err == nil {
				err = setPath(spec, o, *vals[o.flag])
			}
		}
	})
	if err != nil {
		return err
	}
	body, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	st, err := cl.Submit(ctx, body)
	if err != nil {
		return err
	}
	for _, w := range st.Warnings {
		fmt.Fprintln(c.stderr, "dpfl-client: the server warns:", w)
	}
	fmt.Fprintf(out, "submitted %s: %s on %d users, %d rounds, %s\n", st.ID, st.Spec.Model,
		st.Spec.Population.Size, st.Spec.Rounds, privacyLine(st.Spec))
	if !*doWatch {
		return nil
	}
	return watch(ctx, cl, st.ID, *stall, out)
}

// defaultStall is how long watch waits for a job to move before it gives
// up. A round of the largest jobs on a small machine, or of a devices job
// waiting out its join and stage timeouts over several attempts, takes
// minutes: ten leaves a wide margin.
const defaultStall = 10 * time.Minute

// watchInterval is how often --watch polls the job's status: often enough
// that a job's end is seen within a quarter second (the demo's timing is
// read from it), rarely enough to cost the server nothing (one status
// read; docs/performance.md measures thousands per second).
const watchInterval = 250 * time.Millisecond

// stallFlag defines --stall-timeout on fs.
func stallFlag(fs *flag.FlagSet) *time.Duration {
	return fs.Duration("stall-timeout", defaultStall, "give up (exit 1) when the job's state and round stay the same this long")
}

func privacyLine(s types.Spec) string {
	if !s.DP.Enabled {
		return "no DP"
	}
	return fmt.Sprintf("DP with C=%g z=%g δ=%g", s.DP.ClipNorm, s.DP.NoiseMultiplier, s.DP.Delta)
}

// setPath sets spec[a][b] = value parsed by o.kind.
func setPath(spec map[string]any, o override, raw string) error {
	var v any
	var err error
	switch o.kind {
	case 's':
		v = raw
	case 'i':
		var n int64
		_, err = fmt.Sscan(raw, &n)
		v = n
	case 'f':
		var f float64
		_, err = fmt.Sscan(raw, &f)
		v = f
	case 'b':
		var b bool
		_, err = fmt.Sscan(raw, &b)
		v = b
	}
	if err != nil {
		return fmt.Errorf("--%s: cannot parse %q: %v", o.flag, raw, err)
	}
	parts := strings.Split(o.path, ".")
	m := spec
	for _, p := range parts[:len(parts)-1] {
		sub, ok := m[p].(map[string]any)
		if !ok {
			sub = map[string]any{}
			m[p] = sub
		}
		m = sub
	}
	m[parts[len(parts)-1]] = v
	// A file of an earlier release may name the field by its old key,
	// which the server would refuse beside the new one.
	for old, repl := range types.DeprecatedKeys {
		if repl == o.path {
			delete(m, old[strings.LastIndex(old, ".")+1:])
		}
	}
	return nil
}

// watch shows a progress bar of job id until it ends, then a summary. It
// fails, rather than waiting forever, when a poll fails or the job makes
// no progress for stall (client.Watch).
func watch(ctx context.Context, cl *client.Client, id string, stall time.Duration, out io.Writer) error {
	if stall <= 0 {
		return fmt.Errorf("--stall-timeout must be > 0, got %v", stall)
	}
	start := time.Now()
	var bar *progressbar.ProgressBar
	st, err := cl.Watch(ctx, id, client.WatchOptions{Interval: watchInterval, Stall: stall, Progress: func(st types.Status) {
		if bar == nil {
			bar = progressbar.NewOptions(st.Spec.Rounds,
				progressbar.OptionSetWriter(os.Stderr),
				progressbar.OptionSetDescription(id),
				progressbar.OptionShowCount(),
				progressbar.OptionSetWidth(30),
				progressbar.OptionSetPredictTime(true),
				progressbar.OptionThrottle(200*time.Millisecond))
		}
		bar.Describe(progressLine(st))
		_ = bar.Set(st.Round)
	}})
	if bar != nil {
		_ = bar.Finish()
		fmt.Fprintln(os.Stderr)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s %s: %s\n", st.ID, st.State, st.Message)
	if st.LatestTest != nil && st.LatestTest.Test != nil {
		fmt.Fprintf(out, "final test accuracy %.4f (loss %.4f) after round %d\n",
			st.LatestTest.Test.Accuracy, st.LatestTest.Test.Loss, st.LatestTest.Round)
	}
	if st.Spec.DP.Enabled {
		rep, err := cl.Privacy(ctx, id)
		if err != nil {
			return err
		}
		if rep.Epsilon != nil {
			fmt.Fprintf(out, "privacy: (ε, δ) = (%.3f, %g), user-level, %s accountant over %d rounds\n",
				*rep.Epsilon, rep.Delta, rep.Accountant, len(rep.Events))
		}
		if rep.Uncovered != "" {
			fmt.Fprintf(out, "WARNING: not covered by the privacy analysis: %s\n", rep.Uncovered)
		}
	} else {
		fmt.Fprintln(out, "privacy: none (trained without DP)")
	}
	fmt.Fprintf(out, "watched for %s; the job ran %s on the server (created → last update)\n",
		time.Since(start).Round(100*time.Millisecond), st.UpdatedAt.Sub(st.CreatedAt).Round(100*time.Millisecond))
	// Running out of budget is a normal end; failing or being cancelled is not.
	if st.State == types.StateFailed || st.State == types.StateCancelled {
		return fmt.Errorf("job %s ended %s", id, st.State)
	}
	return nil
}

func progressLine(st types.Status) string {
	s := fmt.Sprintf("%s %s", st.ID, st.State)
	if t := st.LatestTest; t != nil && t.Test != nil {
		s += fmt.Sprintf(" acc=%.3f", t.Test.Accuracy)
	}
	if l := st.Latest; l != nil && l.Epsilon != nil {
		s += fmt.Sprintf(" ε=%.3f", *l.Epsilon)
	}
	if l := st.Latest; l != nil && l.Selected > 0 && l.Reported > 0 { // both absent under DP
		s += fmt.Sprintf(" users %d→%d", l.Selected, l.Reported)
	}
	if l := st.Latest; l != nil && l.EstimatedTotalSeconds > 0 {
		s += " on devices ≈ " + (time.Duration(l.EstimatedTotalSeconds) * time.Second).String()
	}
	return s
}
