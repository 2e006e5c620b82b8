package data

// Population is a federated dataset as training sees it: client id →
// that client's examples, as indices into Base(). *Federated is one (an
// exact partition held in memory); a population derived on demand from
// (seed, id) is another, for populations far larger than memory would
// allow as a table.
type Population interface {
	// Base is the dataset the clients' indices point into.
	Base() *Dataset
	// NumClients is the population size N.
	NumClients() int
	// Client returns client id's examples; it panics for id outside
	// [0, N) (a programmer error).
	Client(id int) Client
}

var _ Population = (*Federated)(nil)
