package export

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/audit"
)

// Certificate is the privacy certificate an exported model carries: what
// the server states about the model's differential privacy, with the
// transparency log's checkpoint that records its release. Metadata
// writes it as string pairs.
type Certificate struct {
	// JobID, Model, Dataset and Round name the release: the global model
	// of job JobID after Round rounds of training (FedAvg rounds, each one
	// DP release under DP). NumParams is the flat vector's length.
	JobID     string
	Model     string
	Dataset   string
	Round     int
	NumParams int

	// Private says the job trained with user-level DP (DP-FedAvg,
	// McMahan et al. 2018); without it the fields below down to Note are
	// empty and the model carries no guarantee.
	Private bool
	// Epsilon is ε of the (ε, Delta)-DP guarantee under Adjacency
	// ("add_remove" or "replace_one": one user's data), nil when the
	// server stated none. EpsilonSource says where it comes from:
	// "model_certificate" (ε over the job's ledger charges up to this
	// model's release, ChargeSeq of them, from the server's signed model
	// certificate) or "privacy_report" (the job's ε over every event
	// logged when exported: valid for this model too, and larger than its
	// own if the job trained on after it).
	Epsilon       *float64
	EpsilonSource string
	// Delta is the job's δ; AbortDelta is the part of it that secure
	// aggregation's aborts cost, so that the accountant's ε is computed
	// at Delta − AbortDelta.
	Delta      float64
	AbortDelta float64
	Adjacency  string
	// Accountant is the accountant whose bound Epsilon is ("rdp" or
	// "pld"); PLDMethod names the PLD algorithm (e.g. "pld/2",
	// docs/privacy.md) when it is "pld" or the report gives one.
	Accountant string
	PLDMethod  string
	// ChargeSeq is the number of ledger charges Epsilon composes (0:
	// unknown, without a model certificate).
	ChargeSeq uint64
	// ClipNorm is the clip norm C of each user's update, NoiseMultiplier
	// z (Gaussian noise σ = z·C on the sum).
	ClipNorm        float64
	NoiseMultiplier float64
	// Sampling is the cohort's sampling: "poisson" with rate
	// SamplingRate q, or "fixed" with CohortSize K out of PopulationSize
	// N.
	Sampling       string
	SamplingRate   float64
	CohortSize     int
	PopulationSize int
	// Uncovered, when set, says why Epsilon is not a proven bound for the
	// job's configuration; Note qualifies a report without ε.
	Uncovered string
	Note      string

	// ModelSHA256 is audit.ModelHash of the parameters (hex), as the
	// release leaf records it.
	ModelSHA256 string
	// LogSize and LogRoot (base64, as tlog.Hash prints) are the tree
	// head of the signed checkpoint LogCheckpoint (a signed note) that
	// includes the release leaf LogLeafIndex, signed by LogPublicKey:
	// the ledger root. Empty when the server does not sign its log.
	LogSize       int64
	LogRoot       string
	LogLeafIndex  int64
	LogPublicKey  string
	LogCheckpoint string
	// ServerCertificate is the server's audit.ModelCertificate as JSON
	// (with the leaf's inclusion proof), which audit.VerifyModel checks
	// against the parameters; empty without a signed log.
	ServerCertificate string
}

// NewCertificate assembles the certificate of the model me (GET
// /v1/jobs/{id}/model) of a job with spec (GET /v1/jobs/{id}) from the
// server's model certificate in me and, where that is absent (a server
// that does not sign its log), the privacy report rep (GET
// /v1/jobs/{id}/privacy; nil: not fetched). A model certificate is
// checked first with audit.VerifyModel against its own key (the
// checkpoint's signature, the release leaf's inclusion proof and that
// the leaf records these parameters' hash), so a file never carries a
// certificate of other parameters; pin the server's key with dpfl-client
// verify to prove more.
func NewCertificate(me types.ModelExport, spec types.Spec, rep *types.PrivacyReport) (Certificate, error) {
	c := Certificate{
		JobID: me.JobID, Model: me.Model, Dataset: spec.Dataset, Round: me.Round, NumParams: len(me.Params),
		Private: spec.DP.Enabled,
	}
	if rep != nil && rep.Private != spec.DP.Enabled {
		return c, fmt.Errorf("export: job %s: the privacy report says private = %v, the job's spec dp.enabled = %v", me.JobID, rep.Private, spec.DP.Enabled)
	}
	var mc *audit.ModelCertificate
	if len(me.Certificate) > 0 {
		mc = new(audit.ModelCertificate)
		if err := json.Unmarshal(me.Certificate, mc); err != nil {
			return c, fmt.Errorf("export: job %s: the server's model certificate is not readable: %w", me.JobID, err)
		}
		if mc.Job != me.JobID || mc.Round != me.Round {
			return c, fmt.Errorf("export: the model certificate is for job %s round %d, the model is job %s round %d", mc.Job, mc.Round, me.JobID, me.Round)
		}
		if _, err := audit.VerifyModel(mc, me.Params, ""); err != nil {
			return c, fmt.Errorf("export: job %s: %w", me.JobID, err)
		}
		c.ModelSHA256, c.ChargeSeq = mc.ModelSHA256, mc.ChargeSeq
		c.LogSize, c.LogRoot, c.LogLeafIndex = mc.LogSize, mc.LogRoot.String(), mc.LeafIndex
		c.LogPublicKey, c.LogCheckpoint = mc.PublicKey, mc.Checkpoint
		c.ServerCertificate = string(me.Certificate)
	} else {
		c.ModelSHA256 = audit.ModelHash(me.Params)
	}
	if !c.Private {
		c.ChargeSeq = 0
		if rep != nil {
			c.Note = rep.Note
		}
		return c, nil
	}
	dp := spec.DP
	c.Delta, c.AbortDelta, c.ClipNorm, c.NoiseMultiplier = dp.Delta, dp.AbortDelta, dp.ClipNorm, dp.NoiseMultiplier
	c.Sampling, c.PopulationSize = spec.Sampling.Scheme, spec.Population.Size
	switch spec.Sampling.Scheme {
	case "fixed":
		c.CohortSize = spec.Sampling.CohortSize
	default:
		c.SamplingRate = spec.Sampling.Rate
	}
	if rep != nil {
		c.Adjacency, c.Accountant, c.Uncovered, c.Note = rep.Adjacency, rep.Accountant, rep.Uncovered, rep.Note
		if rep.Accounting != nil {
			c.PLDMethod = rep.Accounting.PLDMethod
		}
	}
	switch {
	case mc != nil:
		c.Epsilon, c.EpsilonSource = mc.Epsilon, "model_certificate"
		c.Delta, c.AbortDelta, c.Adjacency, c.Accountant = mc.Delta, mc.AbortDelta, mc.Adjacency, mc.Accountant
		if mc.PLDMethod != "" {
			c.PLDMethod = mc.PLDMethod
		}
	case rep != nil:
		c.Epsilon, c.EpsilonSource = rep.Epsilon, "privacy_report"
		c.Delta, c.AbortDelta = rep.Delta, rep.AbortDelta
	}
	if c.Epsilon == nil {
		c.EpsilonSource = ""
	}
	return c, nil
}

// Metadata is the certificate as string pairs, the form ONNX's
// metadata_props and safetensors' __metadata__ hold. Numbers are in
// Go's shortest round-trip form (strconv 'g', -1); keys without a value
// are left out. The keys:
//
//	dpfl.job_id, dpfl.model, dpfl.dataset, dpfl.round, dpfl.num_params
//	dpfl.model_sha256          audit.ModelHash of the flat parameters
//	dp                         "true" or "false" (no guarantee)
//	dp.epsilon, dp.delta       the (ε, δ)-DP guarantee
//	dp.epsilon_source          "model_certificate" or "privacy_report"
//	dp.abort_delta             part of δ spent on secure-aggregation aborts
//	dp.adjacency               "add_remove" or "replace_one"
//	dp.accountant, dp.pld_method
//	dp.charges                 ledger charges composed into ε
//	dp.rounds                  DP-FedAvg rounds behind the model
//	dp.clip_norm, dp.noise_multiplier
//	dp.sampling                "poisson" (dp.sampling_rate q) or "fixed"
//	                           (dp.cohort_size K); dp.population_size N
//	dp.uncovered, dp.note      qualifications of ε, when the server has any
//	log.root, log.size         the signed checkpoint's tree head: the ledger root
//	log.leaf_index             the model's release leaf in that log
//	log.public_key, log.checkpoint
//	dpfl.certificate           the server's model certificate (JSON)
func (c Certificate) Metadata() map[string]string {
	m := map[string]string{}
	set := func(k, v string) {
		if v != "" {
			m[k] = v
		}
	}
	num := func(k string, v float64) { m[k] = strconv.FormatFloat(v, 'g', -1, 64) }
	set("dpfl.job_id", c.JobID)
	set("dpfl.model", c.Model)
	set("dpfl.dataset", c.Dataset)
	m["dpfl.round"] = strconv.Itoa(c.Round)
	m["dpfl.num_params"] = strconv.Itoa(c.NumParams)
	set("dpfl.model_sha256", c.ModelSHA256)
	m["dp"] = strconv.FormatBool(c.Private)
	if c.Private {
		if c.Epsilon != nil {
			num("dp.epsilon", *c.Epsilon)
		}
		set("dp.epsilon_source", c.EpsilonSource)
		num("dp.delta", c.Delta)
		if c.AbortDelta != 0 {
			num("dp.abort_delta", c.AbortDelta)
		}
		set("dp.adjacency", c.Adjacency)
		set("dp.accountant", c.Accountant)
		set("dp.pld_method", c.PLDMethod)
		if c.ChargeSeq > 0 {
			m["dp.charges"] = strconv.FormatUint(c.ChargeSeq, 10)
		}
		m["dp.rounds"] = strconv.Itoa(c.Round)
		num("dp.clip_norm", c.ClipNorm)
		num("dp.noise_multiplier", c.NoiseMultiplier)
		set("dp.sampling", c.Sampling)
		if c.Sampling == "fixed" {
			m["dp.cohort_size"] = strconv.Itoa(c.CohortSize)
		} else {
			num("dp.sampling_rate", c.SamplingRate)
		}
		if c.PopulationSize > 0 {
			m["dp.population_size"] = strconv.Itoa(c.PopulationSize)
		}
		set("dp.uncovered", c.Uncovered)
	}
	set("dp.note", c.Note)
	if c.LogRoot != "" {
		m["log.root"] = c.LogRoot
		m["log.size"] = strconv.FormatInt(c.LogSize, 10)
		m["log.leaf_index"] = strconv.FormatInt(c.LogLeafIndex, 10)
		set("log.public_key", c.LogPublicKey)
		set("log.checkpoint", c.LogCheckpoint)
	}
	set("dpfl.certificate", c.ServerCertificate)
	return m
}
