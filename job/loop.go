package job

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/fl"
	"github.com/dpfl/dpfl/secagg"
	"github.com/dpfl/dpfl/simd"
	"github.com/dpfl/dpfl/storage"
)

// The run loop. Every round of a job goes through four steps, in this
// order:
//
//  1. charge: a DP job appends the round's privacy event to its ledger
//     (write-ahead: the event is durable before any noisy output exists),
//     after checking its own budget and its shared budget's;
//  2. run: the round runner (simulated or devices, runners.go) trains
//     and aggregates, and the round is retried while secure aggregation
//     aborts below its threshold;
//  3. evaluate: the round's statistics and, on evaluation rounds, the
//     model's scores become its metrics;
//  4. commit: the metrics (only what a DP job may release) and the
//     checkpoint are stored in one transaction, unless training diverged.
//
// A job interrupted anywhere resumes from its last committed round; a
// charge without its commit stays in the ledger (extraEvents).

// jobEnd ends a job in a state other than failed (budget_exhausted),
// with the message stored with it.
type jobEnd struct {
	state storage.JobState
	msg   string
}

func (e *jobEnd) Error() string { return e.msg }

// errStopped: the job's context ended while a round ran (a user's cancel
// or a server shutdown).
var errStopped = errors.New("job stopped")

// runJob trains j from its last committed round. It returns the terminal
// state and message, or "" when stopped by a server shutdown.
func (m *Manager) runJob(ctx context.Context, db *storage.DB, j storage.Job, spec types.Spec) (storage.JobState, string) {
	jr, err := m.newJobRun(ctx, db, j, spec)
	if err == nil {
		err = jr.rounds()
	}
	return ending(ctx, m.log, j.ID, spec, err, m.lead != nil)
}

// rounds runs the job's remaining rounds (the loop above).
func (jr *jobRun) rounds() error {
	for r := jr.job.Round + 1; r <= jr.spec.Rounds; r++ {
		if jr.ctx.Err() != nil {
			return errStopped
		}
		if jr.m.beforeRound != nil {
			jr.m.beforeRound(jr.ctx, jr.job.ID, r)
		}
		start := time.Now()
		met, err := jr.charge(r)
		if err != nil {
			return err
		}
		jr.observeAccounting(time.Since(start)) // metrics.go
		res, err := jr.run(r)
		if err != nil {
			return err
		}
		jr.evaluate(&met, res, start)
		if err := jr.commit(met, res.RoundStats); err != nil {
			return err
		}
		jr.observeCommit(met) // metrics.go
	}
	return nil
}

// ending is the final state and message of a run that returned err: nil
// completed it, errStopped cancelled it (a user's cancel) or leaves it
// running to resume (a server shutdown, or this replica no longer leading
// the job: ""), a *jobEnd ends it in its state, and any other error fails
// it with the error as its message. A write the store could not make or
// settle (storage.ErrUnavailable: etcd unreachable) or that its fence
// refused (storage.ErrFenced: another replica leads the job now) also
// leaves the job to resume when led (the manager runs under Leadership):
// its leader, this replica or another, runs it again from its last
// committed round once the store answers (lead.go). Without Leadership
// nothing would resume it before a restart, so such an error fails it.
func ending(ctx context.Context, log *slog.Logger, id string, spec types.Spec, err error, led bool) (storage.JobState, string) {
	var end *jobEnd
	switch {
	case err == nil:
		return storage.StateCompleted, fmt.Sprintf("trained %d rounds", spec.Rounds)
	case errors.Is(err, errStopped):
		if errors.Is(context.Cause(ctx), errCancelledByUser) {
			return storage.StateCancelled, "cancelled by user"
		}
		return "", ""
	case led && (errors.Is(err, storage.ErrUnavailable) || errors.Is(err, storage.ErrFenced) || errors.Is(context.Cause(ctx), errLeadershipLost)):
		log.Warn("job stopped, to resume", "job", id, "err", err.Error())
		return "", ""
	case errors.As(err, &end):
		return end.state, end.msg
	}
	log.Error("job failed", "job", id, "err", err.Error())
	return storage.StateFailed, err.Error()
}

// charge records round r's privacy event write-ahead (Manager.charge)
// and starts the round's metrics with ε after it. A round that the job's
// budget or its shared budget cannot pay for ends the job in
// budget_exhausted; an ε that is not finite fails it before anything is
// released. Without DP it charges nothing.
func (jr *jobRun) charge(r int) (types.RoundMetrics, error) {
	met := types.RoundMetrics{Round: r}
	if jr.ledger == nil {
		return met, nil
	}
	stop, err := jr.m.charge(jr.ledger, jr.spec, r)
	if err != nil {
		return met, fmt.Errorf("appending privacy event: %w", err)
	}
	if stop != "" {
		return met, &jobEnd{state: storage.StateBudgetExhausted, msg: stop}
	}
	e := jr.ledger.current.Epsilon()
	if !isFinite(e) {
		return met, fmt.Errorf("round %d: the accountants give no finite ε for this job (ε = %v); nothing was released", r, e)
	}
	met.Epsilon, met.Accountant = &e, jr.ledger.current.Best.Accountant
	return met, nil
}

// run runs round r on the job's parameters. An attempt that secure
// aggregation aborts below its threshold reveals no sum, so it is retried
// with a fresh cohort (up to secagg.max_attempts): the retry is still the
// one release that the round's single ledger event covers.
func (jr *jobRun) run(r int) (roundResult, error) {
	for attempt := 1; ; attempt++ {
		res, err := jr.runner.run(jr.ctx, r, attempt, jr.state.params)
		switch {
		case err == nil:
			return res, nil
		case jr.ctx.Err() != nil:
			return res, errStopped
		case errors.Is(err, secagg.ErrTooFewSurvivors) && attempt < jr.spec.SecAgg.MaxAttempts:
			jr.m.log.Warn("secure aggregation aborted; retrying the round", "job", jr.job.ID, "round", r, "attempt", attempt, "err", err)
			continue
		}
		var pe *fl.PanicError
		if errors.As(err, &pe) {
			jr.m.log.Error("job panicked", "job", jr.job.ID, "round", r, "panic", fmt.Sprint(pe.Value), "stack", string(pe.Stack))
			return res, fmt.Errorf("internal error in round %d: a worker panicked%s; the server logged the panic and its stack and goes on running the other jobs", r, panicDetail(jr.spec, pe.Value))
		}
		return res, fmt.Errorf("round %d: %w", r, err)
	}
}

// evaluate completes the round's metrics: its statistics, the running
// estimate of deployment time, the model's scores on evaluation rounds
// and the round's wall time.
func (jr *jobRun) evaluate(met *types.RoundMetrics, res roundResult, start time.Time) {
	st := res.RoundStats
	met.Selected, met.Reported, met.Examples, met.TrainLoss = st.Cohort, st.Clients, st.Examples, st.TrainLoss
	met.MeanUpdateNorm, met.ClippedFraction, met.Rejected, met.Stragglers = st.MeanNorm, st.ClippedFraction, st.Rejected, st.Stragglers
	met.Unavailable, met.DroppedOut, met.Late = res.unavailable, res.droppedOut, st.Late
	met.SecAgg = wireSecAgg(st.SecAgg)
	if a := st.Adaptive; a != nil {
		met.NoisyClipNorm, met.NoisyUnclippedFraction = &a.ClipNorm, &a.NoisyUnclippedFraction
	}
	if st.EstimatedSeconds > 0 {
		jr.estimatedTotal += st.EstimatedSeconds
		met.EstimatedSeconds, met.EstimatedTotalSeconds = st.EstimatedSeconds, jr.estimatedTotal
	}
	if met.Round%jr.spec.EvalEvery == 0 || met.Round == jr.spec.Rounds {
		jr.scores.score(jr.state.params, met)
	}
	met.Seconds = time.Since(start).Seconds()
	met.Time = time.Now().UTC()
}

// commit stores the round's metrics (under DP only what it releases) and
// its checkpoint in one transaction. Nothing non-finite is stored: JSON
// cannot hold it, and every read of the job would fail; under DP only
// released values are looked at, so that the failure itself releases
// nothing else.
func (jr *jobRun) commit(met types.RoundMetrics, st fl.RoundStats) error {
	r, spec := met.Round, jr.spec
	if spec.DP.Enabled {
		met = released(met, spec)
	}
	if why := diverged(jr.state.params, met, st, spec.DP.Enabled); why != "" {
		return fmt.Errorf("training diverged at round %d: %s; nothing of this round was stored: lower client.lr or server.lr", r, why)
	}
	if name, v := nonFinite(met); name != "" {
		return fmt.Errorf("round %d: metric %s is %v and cannot be stored", r, name, v)
	}
	mj, err := json.Marshal(met)
	if err != nil {
		return fmt.Errorf("encoding metrics: %w", err)
	}
	ck, err := jr.state.checkpoint(r)
	if err != nil {
		return fmt.Errorf("saving server optimizer: %w", err)
	}
	commit := jr.db.CommitRound
	if jr.ledger != nil {
		// The charge must be stored: checked in the commit's transaction.
		commit = jr.db.CommitChargedRound
	}
	if err := commit(jr.job.ID, r, mj, ck); err != nil {
		return fmt.Errorf("committing round %d: %w", r, err)
	}
	if met.Test != nil {
		jr.m.log.Info("round", "job", jr.job.ID, "round", r, "of", spec.Rounds, "test_accuracy", met.Test.Accuracy, "epsilon", valueOr(met.Epsilon, math.Inf(1)))
	}
	return nil
}

// diverged says why a round's result is unusable ("" when it is not):
// non-finite parameters of the global model, a non-finite test loss, or,
// without DP, a non-finite training loss or update norm, or every client's
// update rejected as non-finite. Under DP (private) it looks only at
// what the job releases: the model and its score on public data.
func diverged(params []float32, met types.RoundMetrics, st fl.RoundStats, private bool) string {
	if !simd.AllFinite(params) {
		return "the global model has non-finite parameters"
	}
	if t := met.Test; t != nil && !isFinite(t.Loss) {
		return fmt.Sprintf("the test loss is %v", t.Loss)
	}
	if private {
		return ""
	}
	switch {
	case !isFinite(st.TrainLoss):
		return fmt.Sprintf("the clients' training loss is %v", st.TrainLoss)
	case !isFinite(st.MeanNorm):
		return fmt.Sprintf("the mean update norm is %v", st.MeanNorm)
	case st.Rejected > 0 && st.Clients == 0:
		return fmt.Sprintf("every client's update (%d) was non-finite", st.Rejected)
	}
	return ""
}

func isFinite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// nonFinite names the first field of met that is NaN or ±Inf, and its
// value ("" when all are finite).
func nonFinite(met types.RoundMetrics) (string, float64) {
	type field struct {
		name string
		v    float64
	}
	fields := []field{
		{"train_loss", met.TrainLoss}, {"mean_update_norm", met.MeanUpdateNorm}, {"clipped_fraction", met.ClippedFraction},
		{"estimated_seconds", met.EstimatedSeconds}, {"estimated_total_seconds", met.EstimatedTotalSeconds},
		{"seconds", met.Seconds}, {"epsilon", valueOr(met.Epsilon, 0)},
	}
	if t := met.Test; t != nil {
		fields = append(fields, field{"test.loss", t.Loss}, field{"test.accuracy", t.Accuracy})
	}
	if c := met.EvalUsers; c != nil {
		fields = append(fields, field{"eval_users.weighted.loss", c.Weighted.Loss})
	}
	if c := met.HeldOut; c != nil {
		fields = append(fields, field{"held_out.weighted.loss", c.Weighted.Loss})
	}
	for _, f := range fields {
		if !isFinite(f.v) {
			return f.name, f.v
		}
	}
	return "", 0
}

func valueOr(p *float64, d float64) float64 {
	if p == nil {
		return d
	}
	return *p
}

// estimatedSoFar is the estimated deployment time of j's committed rounds,
// from the last one's metrics in db (0 before the first).
func estimatedSoFar(db *storage.DB, j storage.Job) (float64, error) {
	if j.Round == 0 {
		return 0, nil
	}
	raw, err := db.Metrics(j.ID)
	if err != nil || len(raw) == 0 {
		return 0, err
	}
	var last types.RoundMetrics
	if err := json.Unmarshal(raw[len(raw)-1], &last); err != nil {
		return 0, fmt.Errorf("job %s: last metrics unreadable: %w", j.ID, err)
	}
	return last.EstimatedTotalSeconds, nil
}
