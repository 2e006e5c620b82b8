package storage

import (
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// bucketUnits holds one framed-JSON Unit per privacy unit, keyed by name.
var bucketUnits = []byte("units")

// Unit is a named privacy unit (a population or dataset) whose budget every
// job that trains on it shares. Its spend is the union of those jobs'
// ledgers; the unit record holds only the budget.
type Unit struct {
	Name string `json:"name"`
	// EpsilonBudget is ε_max for the unit, > 0.
	EpsilonBudget float64 `json:"epsilon_budget"`
	// Delta is the unit's δ, which every job on it uses.
	Delta     float64   `json:"delta"`
	CreatedAt time.Time `json:"created_at"`
}

// CreateUnit stores u; ErrExists if the name is taken. Budget and δ are
// immutable once created, so a spend can never be re-judged against a
// looser budget; the same transaction logs them in the transparency log
// (tlog.go). EpsilonBudget must be finite and > 0, Delta in (0, 1).
func (db *DB) CreateUnit(u Unit) error {
	if u.Name == "" || len(u.Name) > MaxJobIDLen {
		return fmt.Errorf("storage: unit name must have 1..%d bytes", MaxJobIDLen)
	}
	if !(u.EpsilonBudget > 0) || math.IsInf(u.EpsilonBudget, 0) || !(u.Delta > 0 && u.Delta < 1) {
		return fmt.Errorf("storage: privacy unit %q: ε_max %v must be finite and > 0, δ %v in (0, 1)", u.Name, u.EpsilonBudget, u.Delta)
	}
	if u.CreatedAt.IsZero() {
		u.CreatedAt = time.Now().UTC()
	}
	b, err := json.Marshal(u)
	if err != nil {
		return err
	}
	return db.update(func(tx kvTx) error {
		units := tx.Bucket(bucketUnits)
		if units.Get([]byte(u.Name)) != nil {
			return fmt.Errorf("storage: privacy unit %q: %w", u.Name, ErrExists)
		}
		if err := units.Put([]byte(u.Name), frame(b)); err != nil {
			return err
		}
		// The unit's budget is logged (tlog.go) in this transaction.
		_, err := db.appendLeaf(tx, unitLeaf(u))
		return err
	})
}

// Unit returns the unit named name; ErrNotFound if none, ErrCorrupt on a
// checksum mismatch.
func (db *DB) Unit(name string) (Unit, error) {
	var u Unit
	err := db.view(func(tx kvTx) error {
		raw := tx.Bucket(bucketUnits).Get([]byte(name))
		if raw == nil {
			return fmt.Errorf("storage: privacy unit %q: %w", name, ErrNotFound)
		}
		p, err := unframe(raw)
		if err != nil {
			return fmt.Errorf("storage: privacy unit %q: %w", name, err)
		}
		if err := json.Unmarshal(p, &u); err != nil {
			return fmt.Errorf("storage: privacy unit %q: %v: %w", name, err, ErrCorrupt)
		}
		return nil
	})
	return u, err
}

// Units lists every unit, by name.
func (db *DB) Units() ([]Unit, error) {
	var out []Unit
	err := db.view(func(tx kvTx) error {
		return tx.Bucket(bucketUnits).ForEach(func(k, v []byte) error {
			p, err := unframe(v)
			if err != nil {
				return fmt.Errorf("storage: privacy unit %q: %w", k, err)
			}
			var u Unit
			if err := json.Unmarshal(p, &u); err != nil {
				return fmt.Errorf("storage: privacy unit %q: %v: %w", k, err, ErrCorrupt)
			}
			out = append(out, u)
			return nil
		})
	})
	return out, err
}
