package types

import (
	"time"

	"github.com/dpfl/dpfl/secagg"
)

// Enrollment is what enrolling a device returns, once: the device's ID
// and its credential.
type Enrollment struct {
	// JobID is the devices job the device may take part in.
	JobID string `json:"job_id"`
	// DeviceID names the device in the job's logs and device list.
	DeviceID string `json:"device_id"`
	// Credential is the device's bearer credential for the job's
	// participate routes (hex). The server keeps only its SHA-256 hash,
	// so it cannot be shown again.
	Credential string `json:"credential"`
	// EnrolledAt is when the device was enrolled (UTC).
	EnrolledAt time.Time `json:"enrolled_at"`
}

// DeviceInfo describes an enrolled device, without its credential.
type DeviceInfo struct {
	// DeviceID names the device.
	DeviceID string `json:"device_id"`
	// EnrolledAt is when the device was enrolled (UTC).
	EnrolledAt time.Time `json:"enrolled_at"`
}

// ClientTokenHeader carries the per-round token that join returns; every
// later message of that device in that round presents it next to the
// device's credential, so one participant cannot speak for another's
// client ID. The token is bound to the device that joined: another
// enrolled device presenting it is refused (403).
const ClientTokenHeader = "X-DPFL-Client-Token"

// RoundStatus is what a participant polls.
type RoundStatus struct {
	// JobID is the devices job polled.
	JobID string `json:"job_id"`
	// State is the job's state: a participant stops when it is terminal.
	State JobState `json:"state"`
	// Round and Attempt identify the open protocol instance (0 when
	// waiting). Attempt > 1 after an abort below threshold.
	Round   int `json:"round"`
	Attempt int `json:"attempt"`
	// Stage is the protocol stage now open (one of the Stage names).
	Stage string `json:"stage"`
	// Deadline is when the stage closes (the join stage may be extended
	// until secagg.min_clients devices are present).
	Deadline *time.Time `json:"deadline,omitempty"`
	// Joined counts the devices that advertised keys in this attempt.
	Joined int `json:"joined"`
	// CohortSize is the most devices a round takes.
	CohortSize int `json:"cohort_size"`
}

// JoinInfo is what a device needs to take part in one round.
type JoinInfo struct {
	// JobID is the devices job joined.
	JobID string `json:"job_id"`
	// DeviceID is the enrolled device that joined.
	DeviceID string `json:"device_id"`
	// Round and Attempt identify the protocol instance joined.
	Round   int `json:"round"`
	Attempt int `json:"attempt"`
	// ClientID is the device's ID in the protocol instance.
	ClientID secagg.ClientID `json:"client_id"`
	// Token is the device's token for this round (ClientTokenHeader),
	// valid only together with the same device's credential.
	Token string `json:"token"`
	// Session binds the protocol instance (secagg.ServerConfig.Session).
	Session []byte `json:"session"`
	// Encoding is the fixed-point encoding of the update.
	Encoding secagg.Encoding `json:"encoding"`
	// ClipNorm is C: the device clips its delta before encoding
	// (fl.EncodeSecureInput).
	ClipNorm float64 `json:"clip_norm"`
	// Client is the job's local training configuration.
	Client ClientSpec `json:"client"`
	// ClientLR is this round's client learning rate (client.lr under its
	// schedule).
	ClientLR float64 `json:"client_lr"`
	// Model is the architecture's name (fl/model).
	Model string `json:"model"`
	// Params is the global model x_t the round starts from.
	Params []float32 `json:"params"`
	// Distributed, under dp.mechanism distributed_discrete_gaussian, is
	// the round's public parameters: the device encodes its update with
	// fl.EncodeDDGInput (its own noise share included) instead of
	// Encoding, into PaddedDimension values.
	Distributed *DistributedRound `json:"distributed,omitempty"`
}

// DistributedRound is one round of the distributed discrete Gaussian
// (Kairouz, Liu & Steinke, ICML 2021, Algorithm 1) as a device receives
// it: the job's parameters (dp.distributed; fl.DDGParams) and the round's
// rotation seed, all public.
type DistributedRound struct {
	// ClipNorm is C; Dimension d and PaddedDimension p the update's and
	// the rotated vector's lengths; ModulusBits b.
	ClipNorm        float64 `json:"clip_norm"`
	Dimension       int     `json:"dimension"`
	PaddedDimension int     `json:"padded_dimension"`
	ModulusBits     int     `json:"modulus_bits"`
	// Gamma is γ (model units per integer step), Beta the conditional
	// rounding's β.
	Gamma float64 `json:"gamma"`
	Beta  float64 `json:"beta"`
	// Sigma2 is σ² of the device's discrete Gaussian share, an exact
	// rational "num/den"; Clients the n shares it is sized for.
	Sigma2  string `json:"sigma2"`
	Clients int    `json:"clients"`
	// RotationSeed (32 bytes) seeds the round's randomized Hadamard
	// rotation (simd.NewHadamardRotation).
	RotationSeed []byte `json:"rotation_seed"`
}

// Stages of a round with real devices, as GET /v1/jobs/{id}/participate
// reports them. Each protocol stage is a round of Bonawitz et al. 2017,
// Fig. 4; the server closes a stage when every expected device has
// answered or the stage's deadline passes, and goes on without the late.
const (
	// StageWaiting: no round is open (between rounds, or the job ended).
	StageWaiting = "waiting"
	// StageJoin: devices join (POST .../join) and advertise their keys.
	StageJoin = "join"
	// StageShareKeys: devices fetch their neighbours' keys and send
	// encrypted shares.
	StageShareKeys = "share_keys"
	// StageMaskedInput: devices fetch the shares sent to them and send
	// their masked input.
	StageMaskedInput = "masked_input"
	// StageUnmask: devices fetch the unmask request and send shares.
	StageUnmask = "unmask"
)
