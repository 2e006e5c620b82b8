package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The fedprox experiment runs end to end (at a fifth of its rounds) and
// writes its table and one training-loss plot per dataset.
func TestFedProxQuick(t *testing.T) {
	dir := t.TempDir()
	var out strings.Builder
	if err := run([]string{"--quick", "--out", dir, "fedprox"}, &out); err != nil {
		t.Fatal(err)
	}
	table, err := os.ReadFile(filepath.Join(dir, "fedprox.md"))
	if err != nil {
		t.Fatal(err)
	}
	// 4 datasets × (2 variants without stragglers + 3 with).
	if rows := strings.Count(string(table), "\n| Synthetic"); rows != 20 {
		t.Fatalf("%d result rows, want 20:\n%s", rows, table)
	}
	for i := range 4 {
		if st, err := os.Stat(filepath.Join(dir, "fedprox-"+string(rune('0'+i))+".png")); err != nil || st.Size() < 1000 {
			t.Fatalf("plot %d: %v", i, err)
		}
	}
	if err := run([]string{"--out", dir, "fedsplit"}, &out); err == nil {
		t.Fatal("unknown experiment accepted")
	}
}
