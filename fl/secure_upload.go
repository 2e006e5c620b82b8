package fl

import "github.com/dpfl/dpfl/secagg"

// uploadBytes is what a secure-aggregation client sends in the round st
// describes, the round-time model's S_up: the protocol's traffic with its
// neighbours (secagg.ClientTraffic), or d float32s when no instance ran.
// (It belongs with the rest of SecureAggregator in secure.go.)
func (s *SecureAggregator) uploadBytes(d int, st AggregateStats) float64 {
	if st.SecAgg == nil {
		return 4 * float64(d)
	}
	return float64(secagg.ClientTraffic(st.SecAgg.Neighbors, d).Sent)
}
