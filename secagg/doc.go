// Package secagg will hold dpfl's secure aggregation: the masking protocol of
// Bonawitz et al. 2017 ("Practical Secure Aggregation for Privacy-Preserving
// Machine Learning", CCS), with X25519 key agreement, Shamir shares for
// dropout recovery and PRG-expanded pairwise masks in Z_{2^k}, and the sparse
// communication graph of SecAgg+ (Bell et al. 2020, "Secure Single-Server
// Aggregation with (Poly)Logarithmic Overhead", CCS).
//
// Until that work lands, jobs run with trusted-server aggregation (the server
// sees each clipped update before noise is added); the API refuses
// secure_aggregation: true rather than pretending to provide it.
package secagg
