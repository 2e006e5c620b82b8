package storage

import (
	"fmt"
	"sync"
	"testing"
)

func TestSettings(t *testing.T) {
	db, path := openTemp(t)
	if v, ok, err := db.Setting("k"); ok || err != nil || v != nil {
		t.Fatalf("absent: %q %v %v", v, ok, err)
	}
	if err := db.SetSetting("k", []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := db.SetSetting("k", []byte("two")); err != nil {
		t.Fatal(err)
	}
	if err := db.SetSetting("empty", nil); err != nil {
		t.Fatal(err)
	}
	if err := db.SetSetting("", []byte("x")); err == nil {
		t.Fatal("empty key accepted")
	}
	db.Close()
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if v, ok, err := db.Setting("k"); !ok || err != nil || string(v) != "two" {
		t.Fatalf("k = %q %v %v", v, ok, err)
	}
	if v, ok, err := db.Setting("empty"); !ok || err != nil || len(v) != 0 {
		t.Fatalf("empty = %q %v %v", v, ok, err)
	}
	if err := db.Verify(); err != nil {
		t.Fatal(err)
	}
}

// Racing first writers must all see the single value that won.
func TestSetSettingIfAbsentRace(t *testing.T) {
	db, _ := openTemp(t)
	const n = 16
	got := make([][]byte, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			got[i], errs[i] = db.SetSettingIfAbsent("server-id", []byte(fmt.Sprintf("id-%d", i)))
		})
	}
	wg.Wait()
	stored, ok, err := db.Setting("server-id")
	if !ok || err != nil {
		t.Fatalf("stored %q %v %v", stored, ok, err)
	}
	for i := range n {
		if errs[i] != nil || string(got[i]) != string(stored) {
			t.Fatalf("caller %d got %q (%v), stored %q", i, got[i], errs[i], stored)
		}
	}
	again, err := db.SetSettingIfAbsent("server-id", []byte("late"))
	if err != nil || string(again) != string(stored) {
		t.Fatalf("late caller got %q %v", again, err)
	}
}
