package fl

// ClientVariant is what sets a client-side algorithm apart from plain
// FedAvg (and FedProx, which is a ClientConfig setting): hooks around one
// client's local training and around the server step, in the spirit of
// FedJAX's client init/step/final. FedAvg.Round calls them in this order:
//
//	setup(d, workers, cfg)             once, before the first round
//	beforeTraining(w, id)              on worker w, before client id trains
//	afterTraining(id, Δ_i, K_i, η_l)   in cohort order, after it trained
//	beforeServerStep(Δ_t, ā)           on the released average
//	afterRound()                       after the round's aggregation
//
// afterTraining runs for every client that took at least one local step,
// whether or not its report then reaches the aggregate (a deadline or a
// target may discard it), and in cohort order whatever the number of
// workers, so that a variant's sums are the same for every worker count.
// The variants are SCAFFOLD (*Scaffold) and FedNova (*FedNova); the
// interface is closed (its methods are unexported) because the hooks see
// the round's internals.
type ClientVariant interface {
	// setup allocates the variant's state for models of d parameters,
	// workers training workers and the clients' configuration cfg. It is
	// called once per FedAvg and must keep state restored before it.
	setup(d, workers int, cfg ClientConfig)
	// beforeTraining returns the correction added to every local gradient
	// of client id, trained on worker w (nil: none). The slice may be the
	// worker's scratch: it is used only until the worker's next call.
	beforeTraining(w, id int) []float32
	// afterTraining sees client id's update Δ_i = delta after steps ≥ 1
	// local steps at learning rate lr; it may rescale delta in place and
	// returns the client's weight a_i in the aggregate's mean ā (FedNova's
	// ‖a_i‖₁; 0 when unused).
	afterTraining(id int, delta []float32, steps int, lr float32) (weight float64)
	// beforeServerStep adjusts the released average Δ_t in place, given
	// the example-weighted mean ā = Σ n_i a_i / Σ n_i over the reports
	// that entered it; only after a successful release with at least one
	// example in it.
	beforeServerStep(avg []float32, meanWeight float64)
	// afterRound ends the round once the aggregate was released (or the
	// release failed).
	afterRound()
}

// plain is FedAvg's (and FedProx's) client: no hook does anything.
type plain struct{}

func (plain) setup(int, int, ClientConfig)                       {}
func (plain) beforeTraining(int, int) []float32                  { return nil }
func (plain) afterTraining(int, []float32, int, float32) float64 { return 0 }
func (plain) beforeServerStep([]float32, float64)                {}
func (plain) afterRound()                                        {}
