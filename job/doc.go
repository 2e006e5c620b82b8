// Package job runs dpfl training jobs: it turns a job spec (types.Spec,
// the wire type of package api/types) into a simulated population, a model
// and a DP-FedAvg loop (package fl), and persists every step in the store
// (package storage) so that a job survives a crash.
//
// A submitted spec is decoded strictly (DecodeSpec: no unknown or repeated
// key; the keys of the previous release with a warning) and validated one
// sub-spec at a time (Validate, validate*.go), every broken rule reported
// in a fixed order as a *ValidationError; the numeric bounds are those of
// limits.go and nowhere else.
//
// The order of one DP round is the write-ahead discipline of the privacy
// ledger: the round's DP event is appended to the job's ledger in its own
// transaction before the noisy aggregate is computed; only then is the
// round trained, released and committed (metrics + checkpoint, one
// transaction). A crash between the two wastes budget (the ledger holds an
// event for a round whose result was never published) but can never
// under-count it. On restart the job resumes from its last committed round
// and the accountant is rebuilt from the ledger, wasted events included.
package job
