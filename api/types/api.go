package types

// ErrorBody is the JSON body of every error response.
type ErrorBody struct {
	// Error is the message: the field and the rule it breaks for a 400.
	Error string `json:"error"`
	// Field is the JSON path of the offending request field, if any.
	Field string `json:"field,omitempty"`
	// ErrorID, on a 500, is the ID under which the server logged the
	// internal error.
	ErrorID string `json:"error_id,omitempty"`
	// Errors, on a 400 for a request body, are every broken rule in a
	// fixed order (for a job: data, population, sampling, training,
	// privacy, systems); Error and Field repeat the first.
	Errors []FieldError `json:"errors,omitempty"`
}

// FieldError is one broken rule of a request: the field, the kind of
// rule and a message that names the bound or the alternatives.
type FieldError struct {
	// Field is the JSON path of the field, e.g. "dp.clip_norm" ("body"
	// for the request as a whole).
	Field string `json:"field"`
	// Rule is the kind of rule broken, one of the Rule names.
	Rule string `json:"rule"`
	// Message says what the rule asks and what the request gave.
	Message string `json:"message"`
}

// Kinds of rule a FieldError names.
const (
	// RuleRange: a number outside its bounds (job/limits.go).
	RuleRange = "range"
	// RuleOneOf: a name that is not one of the known values.
	RuleOneOf = "one_of"
	// RuleRequired: a value the rest of the request needs is missing.
	RuleRequired = "required"
	// RuleConflict: a value that does not combine with another field's.
	RuleConflict = "conflict"
	// RuleFormat: a name or label of the wrong form, or a body that is
	// not the JSON object the route takes.
	RuleFormat = "format"
	// RuleUnknown: a key that names no field.
	RuleUnknown = "unknown"
	// RuleCapacity: a request the server's limits (memory, data) cannot
	// hold.
	RuleCapacity = "capacity"
)

// BudgetRequest is the body of PUT /v1/budgets/:name.
type BudgetRequest struct {
	// EpsilonBudget is the budget's ε_max, > 0.
	EpsilonBudget float64 `json:"epsilon_budget"`
	// Delta is the budget's δ, in (0, 1).
	Delta float64 `json:"delta"`
}

// LogKeyResponse is the body of GET /v1/log/key.
type LogKeyResponse struct {
	// PublicKey is the note verifier key "<name>+<hash>+<base64 key>"
	// (golang.org/x/mod/sumdb/note) of the Ed25519 key that signs every
	// checkpoint; Origin is its name, the checkpoints' first line.
	PublicKey string `json:"public_key"`
	Origin    string `json:"origin"`
}

// CheckpointResponse is the body of GET /v1/log/checkpoint and, with
// Old and Proof, of GET /v1/log/consistency.
type CheckpointResponse struct {
	// Size is the number of leaves, Root their Merkle tree hash (32
	// bytes, base64 in JSON like tlog.Hash), Checkpoint the signed note
	// stating both.
	Size       int64  `json:"size"`
	Root       []byte `json:"root"`
	Checkpoint string `json:"checkpoint"`
	// Old and Proof (consistency only): the proof that the log of Old
	// leaves is a prefix of this one (tlog.ProveTree: hashes of 32 bytes,
	// base64 in JSON like tlog.TreeProof).
	Old   int64    `json:"old,omitempty"`
	Proof [][]byte `json:"proof,omitempty"`
}

// LeavesResponse is the body of GET /v1/log/leaves.
type LeavesResponse struct {
	// Start is the index of Leaves[0]; each leaf is its exact bytes
	// (audit.Leaf JSON) as a string.
	Start  int64    `json:"start"`
	Leaves []string `json:"leaves"`
}
