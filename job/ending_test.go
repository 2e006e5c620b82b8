package job

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/storage"
)

// TestEndingResumesOnlyWhenLed checks that a store that cannot be reached,
// or a fenced write, leaves a job to resume ("") only for a manager under
// Leadership, whose leader resumes it; without one nothing would before a
// restart, so the job fails.
func TestEndingResumesOnlyWhenLed(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	spec := small(t, func(*types.Spec) {})
	for _, err := range []error{
		fmt.Errorf("commit: %w", storage.ErrUnavailable),
		fmt.Errorf("charge: %w", storage.ErrFenced),
	} {
		if state, _ := ending(context.Background(), log, "j", spec, err, true); state != "" {
			t.Errorf("%v, led: state %q, want the job left to resume", err, state)
		}
		if state, _ := ending(context.Background(), log, "j", spec, err, false); state != storage.StateFailed {
			t.Errorf("%v, not led: state %q, want failed", err, state)
		}
	}
}
