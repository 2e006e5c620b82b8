// Package types holds dpfl's wire types: the JSON bodies of its REST API
// (package api), the job states, the protocol stage names and the
// headers. It is a leaf: it depends only on the standard library and on
// package secagg for the secure-aggregation messages, so that a client
// (package api/client) links neither the server nor its numerics.
//
// The Spec's doc comments are the reference of the job spec: every JSON
// field is documented where it is declared (a test checks it), and
// docs/job-spec.md indexes them. Validation and behaviour live with the
// server (package job), as functions over these types.
package types
