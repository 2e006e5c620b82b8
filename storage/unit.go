package storage

import (
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
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
// looser budget.
func (db *DB) CreateUnit(u Unit) error {
	if u.Name == "" || len(u.Name) > MaxJobIDLen {
		return fmt.Errorf("storage: unit name must have 1..%d bytes", MaxJobIDLen)
	}
	if u.CreatedAt.IsZero() {
		u.CreatedAt = time.Now().UTC()
	}
	b, err := json.Marshal(u)
	if err != nil {
		return err
	}
	return db.bolt.Update(func(tx *bolt.Tx) error {
		units := tx.Bucket(bucketUnits)
		if units.Get([]byte(u.Name)) != nil {
			return fmt.Errorf("storage: privacy unit %q: %w", u.Name, ErrExists)
		}
		return units.Put([]byte(u.Name), frame(b))
	})
}

// Unit returns the unit named name; ErrNotFound if none, ErrCorrupt on a
// checksum mismatch.
func (db *DB) Unit(name string) (Unit, error) {
	var u Unit
	err := db.bolt.View(func(tx *bolt.Tx) error {
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
	err := db.bolt.View(func(tx *bolt.Tx) error {
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
