package secagg

// Traffic is the payload one client sends and receives in one instance,
// in bytes: 4 per ClientID, count and ring element, keys, scalars and
// ciphertexts at their length. Framing, JSON and transport overhead are the
// caller's and not counted.
type Traffic struct {
	Sent     int // bytes from the client to the server
	Received int // bytes from the server to the client
}

// ClientTraffic is the Traffic of a client with k neighbours, all in U2,
// in an instance of dimension d where the client reaches round 4 (the
// worst case: every message sent, one share revealed per holder). It is the
// per-client communication whose expansion over sending the data in the
// clear Bonawitz et al. 2017 report (1.73× for 2^10 users and 2^20 16-bit
// entries): the masked vector (4d bytes) dominates and the overhead grows
// with k, so SecAgg+'s logarithmic k keeps it small (Bell et al. 2020).
func ClientTraffic(k, d int) Traffic {
	const (
		id       = 4
		pubKeys  = id + 2*keySize        // AdvertiseMsg, PeerKeys
		encShare = 2*id + shareCipherLen // EncryptedShare
		share    = 2*id + keySize        // Share
		params   = 2 * id                // Params
		keysHdr  = id + params + 2*id    // KeysMsg without neighbours
		unmask   = id                    // UnmaskMsg.From
		unmaskRq = id                    // UnmaskRequestMsg.To
		masked   = id                    // MaskedInputMsg.From
		shares   = id                    // ShareKeysMsg.From, SharesMsg.To
	)
	return Traffic{
		Sent: pubKeys + // round 0
			shares + k*encShare + // round 1
			masked + 4*d + // round 2
			unmask + (k+1)*share, // round 4: one share per neighbour and its own
		Received: keysHdr + k*pubKeys + // round 1 input
			shares + k*encShare + // round 2 input
			unmaskRq + (k+1)*id, // round 4 input
	}
}
