package main

import "testing"

// The reference's flag names, which scripts/bench.sh once passed to
// both programs, still set the same job as dpfl's names.
func TestOldFlagNamesSetTheSameJob(t *testing.T) {
	old, err := parseFlags([]string{"--data", "/d", "--clients", "50", "--cohort", "7", "--clip", "0.5", "--z", "1.3"})
	if err != nil {
		t.Fatal(err)
	}
	cur, err := parseFlags([]string{"--data-dir", "/d", "--population", "50", "--cohort-size", "7", "--clip-norm", "0.5", "--noise-multiplier", "1.3"})
	if err != nil {
		t.Fatal(err)
	}
	want := config{dataDir: "/d", population: 50, cohort: 7, clipNorm: 0.5, noiseMult: 1.3,
		model: "mlp", rounds: 20, epochs: 1, batch: 20, workers: 1, lr: 0.05, alpha: 0.5}
	if old != want || cur != want {
		t.Fatalf("old names: %+v\nnew names: %+v\nwant:      %+v", old, cur, want)
	}
	if _, err := parseFlags([]string{"stray"}); err == nil {
		t.Fatal("a stray argument was accepted")
	}
}
