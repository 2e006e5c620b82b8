package storage

import (
	"errors"
	"path/filepath"
	"testing"
)

func TestUnits(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "u.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Unit("fmnist"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing unit: %v", err)
	}
	u := Unit{Name: "fmnist", EpsilonBudget: 8, Delta: 1e-6}
	if err := db.CreateUnit(u); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateUnit(Unit{Name: "fmnist", EpsilonBudget: 100, Delta: 1e-6}); !errors.Is(err, ErrExists) {
		t.Fatalf("re-creating a unit (looser budget): %v", err)
	}
	if err := db.CreateUnit(Unit{Name: "", EpsilonBudget: 1, Delta: 1e-6}); err == nil {
		t.Fatal("empty name accepted")
	}
	db.CreateUnit(Unit{Name: "emnist", EpsilonBudget: 2, Delta: 1e-5})
	got, err := db.Unit("fmnist")
	if err != nil || got.EpsilonBudget != 8 || got.Delta != 1e-6 || got.CreatedAt.IsZero() {
		t.Fatalf("unit %+v, %v", got, err)
	}
	all, err := db.Units()
	if err != nil || len(all) != 2 || all[0].Name != "emnist" || all[1].Name != "fmnist" {
		t.Fatalf("units %+v, %v", all, err)
	}
}
