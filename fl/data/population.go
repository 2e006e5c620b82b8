package data

// Population is a federated dataset: client id → the client's examples in
// Base() (FedJAX's FederatedData). Federated stores every client's index
// list; OnDemand derives each client's list from its id when asked, so that
// populations of millions of users cost no per-user memory.
//
// Implementations are safe for concurrent use. The slices of a returned
// Client must not be modified: Federated's alias its storage (OnDemand's
// are fresh, but callers should not rely on that).
type Population interface {
	// Base is the dataset that the clients' indices point into.
	Base() *Dataset
	// NumClients is the population size N ≥ 1; client IDs are 0, …, N−1.
	NumClients() int
	// Client returns client id's training and held-out example indices
	// into Base. It panics for id outside [0, N) (a programmer error).
	Client(id int) Client
}

// Both population kinds satisfy Population.
var (
	_ Population = (*Federated)(nil)
	_ Population = (*OnDemand)(nil)
)
