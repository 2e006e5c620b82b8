package storage

import (
	"strings"
	"testing"
)

func TestOpenLocked(t *testing.T) {
	db, path := openTemp(t)
	second, err := Open(path)
	if err == nil {
		second.Close()
		t.Fatal("second Open of a held file succeeded")
	}
	wantErr(t, err, ErrLocked, path, "locked by another dpfl-server?")
	db.Close()
	third, err := Open(path)
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	third.Close()
	if !strings.HasSuffix(third.Path(), "dpfl.db") {
		t.Fatalf("Path() = %q", third.Path())
	}
}
