package types

import "encoding/json"

// Keys of earlier releases. A database keeps the jobs and round metrics
// that an earlier release wrote, under its keys, and a client may still
// send them; for one release they are read as the keys that replaced
// them (job.ParseSpec warns of them in a submission, and refuses a
// submission that gives both names). When both are present in stored
// data the new key wins.

// DeprecatedKeys maps each spec key (a JSON path) of an earlier release to
// the key that replaced it.
var DeprecatedKeys = map[string]string{
	"population.clients": "population.size",
	"dp.privacy_unit":    "dp.budget",
}

// UnmarshalJSON decodes a population, reading population.clients, the
// earlier name of population.size.
func (p *PopulationSpec) UnmarshalJSON(b []byte) error {
	type plain PopulationSpec // without this method
	var old struct {
		Size    *int `json:"size"`
		Clients *int `json:"clients"`
	}
	if err := json.Unmarshal(b, (*plain)(p)); err != nil {
		return err
	}
	if err := json.Unmarshal(b, &old); err != nil {
		return err
	}
	if old.Clients != nil && old.Size == nil {
		p.Size = *old.Clients
	}
	return nil
}

// UnmarshalJSON decodes a DP section, reading dp.privacy_unit, the
// earlier name of dp.budget.
func (d *DPSpec) UnmarshalJSON(b []byte) error {
	type plain DPSpec // without this method
	var old struct {
		Budget      *string `json:"budget"`
		PrivacyUnit *string `json:"privacy_unit"`
	}
	if err := json.Unmarshal(b, (*plain)(d)); err != nil {
		return err
	}
	if err := json.Unmarshal(b, &old); err != nil {
		return err
	}
	if old.PrivacyUnit != nil && old.Budget == nil {
		d.Budget = *old.PrivacyUnit
	}
	return nil
}

// UnmarshalJSON decodes a round's metrics, reading the keys of earlier
// releases: cohort (now selected) and clients (now held_out).
func (m *RoundMetrics) UnmarshalJSON(b []byte) error {
	type plain RoundMetrics // without this method
	var old struct {
		Selected *int             `json:"selected"`
		Cohort   *int             `json:"cohort"`
		HeldOut  *ClientMetrics   `json:"held_out"`
		Clients  *json.RawMessage `json:"clients"`
	}
	if err := json.Unmarshal(b, (*plain)(m)); err != nil {
		return err
	}
	if err := json.Unmarshal(b, &old); err != nil {
		return err
	}
	if old.Cohort != nil && old.Selected == nil {
		m.Selected = *old.Cohort
	}
	if old.Clients != nil && old.HeldOut == nil {
		var c *ClientMetrics
		if err := json.Unmarshal(*old.Clients, &c); err != nil {
			return err
		}
		m.HeldOut = c
	}
	return nil
}
