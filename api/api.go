// Package api is dpfl's REST interface: JSON over HTTP, served with echo.
// Handlers are thin: bind, call the job manager (package job), and map
// its errors to status codes in one place (errorResponse).
//
// Callers authenticate with "Authorization: Bearer <secret>". An API token
// has a role (Tokens, Role): the admin's opens every route below except
// the participate routes; an auditor's opens only the GET routes (403 on
// the others). A device's credential, from enrolment (POST
// /v1/jobs/:id/devices), opens only the participate routes of the job it
// was enrolled for. The server stores every secret only as its SHA-256
// hash. No secret opens another's routes. /healthz needs none.
//
// Routes (API token; "admin" marks those an auditor may not use):
//
//	GET  /healthz                 liveness, no auth
//	POST /v1/jobs                 admin: create and start a job (body: types.Spec JSON)
//	GET  /v1/jobs                 list jobs
//	GET  /v1/jobs/:id             state, round, latest metrics
//	GET  /v1/jobs/:id/metrics     every committed round's metrics
//	GET  /v1/jobs/:id/rounds      per-round participation and estimated time
//	GET  /v1/jobs/:id/privacy     privacy ledger and ε at the job's δ
//	POST /v1/jobs/:id/cancel      admin: stop a running job
//	GET  /v1/jobs/:id/model       latest global model parameters
//	PUT  /v1/budgets/:name        admin: create a shared budget {epsilon_budget, delta}
//	GET  /v1/budgets              every shared budget's report
//	GET  /v1/budgets/:name        a budget's jobs, spend and remaining ε
//	POST /v1/jobs/:id/devices     admin: enroll a device for a devices job: its ID and credential, once
//	GET  /v1/jobs/:id/devices     the job's enrolled devices (IDs and enrolment times)
//	GET  /v1/log/...              the transparency log: key, checkpoint, proofs, audit bundles (log.go)
//
// A devices job's participants (participate.go) use, with their device
// credential,
//
//	GET  /v1/jobs/:id/participate                the open round and its stage
//	POST /v1/jobs/:id/participate/join           client ID, round token, model (once per device per attempt)
//	POST /v1/jobs/:id/participate/advertise_keys secagg.AdvertiseKeysMsg
//	GET  /v1/jobs/:id/participate/share_keys     secagg.ShareKeysRequest
//	POST /v1/jobs/:id/participate/share_keys     secagg.ShareKeysMsg
//	GET  /v1/jobs/:id/participate/masked_input   secagg.MaskedInputRequest
//	POST /v1/jobs/:id/participate/masked_input   secagg.MaskedInputMsg
//	GET  /v1/jobs/:id/participate/unmask         secagg.UnmaskRequest
//	POST /v1/jobs/:id/participate/unmask         secagg.UnmaskMsg
//
// The routes of the previous release (advertise, keys, shares,
// masked-input) remain as deprecated aliases for one release.
//
// Request bodies are read strictly (package strictjson): exactly one JSON
// object, no repeated or unknown key, nothing after it, within a size
// limit (MaxBodyBytes; the participate routes: ParticipateBodyLimit).
//
// Errors are types.ErrorBody, {"error": message, "field": json-path}
// with 400 (bad input, naming the field and rule, with every broken rule
// in "errors" in a fixed order; or a protocol message refused, naming
// the client), 401 (missing or wrong API token or device credential), 403 (an
// auditor's token on a route that changes state, or a round token of
// another device), 404 (unknown job), 409 (request does not fit the job's
// state, or a device's second join of one attempt), 413 (body too large),
// 429 (a device sending faster than its rate limit, or the server at
// capacity), 500 otherwise. A 500 never carries the internal error: it
// names an error ID that the server's log holds next to the error.
package api

import (
	crand "crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/internal/strictjson"
	"github.com/dpfl/dpfl/job"
	"github.com/dpfl/dpfl/secagg"
	"github.com/dpfl/dpfl/storage"
)

// MaxBodyBytes bounds the body of a request to the API token's routes (a
// job spec or a budget is a few KiB).
const MaxBodyBytes = 1 << 20

// Config configures the handler.
type Config struct {
	// Tokens holds the accepted API tokens and their roles (at least one).
	Tokens *Tokens
	// Logger receives the server's errors (nil: slog.Default()).
	Logger *slog.Logger
	// DeviceRate is how many requests per second one device (one
	// credential) may make to the participate routes; beyond, 429.
	// Zero: DefaultDeviceRate.
	DeviceRate float64
	// DeviceBurst is how many requests a device may make at once before
	// DeviceRate applies. Zero: DefaultDeviceBurst.
	DeviceBurst int
	// PeerCAs are the certificate authorities trusted when a device's
	// request is forwarded to the https --advertise-url of the replica
	// that leads its job (forward.go); nil: the system's roots.
	PeerCAs *x509.CertPool
}

// New returns the HTTP handler serving jobs through m. The administrative
// routes are guarded by cfg.Tokens, the participate routes by the
// credentials of the devices enrolled for each job
// (job.Manager.AuthenticateDevice).
func New(m *job.Manager, cfg Config) http.Handler {
	if cfg.Tokens == nil || cfg.Tokens.Len() == 0 {
		panic("api: no API token")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = errorHandler(log)
	e.Use(middleware.Recover())
	observeHTTP(e, m, cfg) // metrics.go: request metrics and GET /metrics
	e.GET("/healthz", func(c echo.Context) error {
		return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
	})
	h := &handlers{m: m, log: log, forward: newForwardTransport(cfg.PeerCAs)}
	// Devices: only their own job's participate routes, only with a device
	// credential. These routes are more specific than the admin group's
	// catch-all, so no API token reaches them.
	h.participate(e.Group("/v1/jobs/:id/participate", deviceAuth(m), deviceRateLimit(cfg.DeviceRate, cfg.DeviceBurst),
		limitBody(func(c echo.Context) int64 { return h.participateLimit(c.Param("id")) })))
	v1 := e.Group("/v1", tokenAuth(cfg.Tokens), limitBody(func(echo.Context) int64 { return MaxBodyBytes }))
	v1.POST("/jobs", h.create, adminOnly)
	v1.GET("/jobs", h.list)
	v1.GET("/jobs/:id", h.get)
	v1.GET("/jobs/:id/metrics", h.metrics)
	v1.GET("/jobs/:id/rounds", h.rounds)
	v1.GET("/jobs/:id/privacy", h.privacy)
	v1.POST("/jobs/:id/cancel", h.cancel, adminOnly)
	v1.GET("/jobs/:id/model", h.model)
	v1.PUT("/budgets/:name", h.createBudget, adminOnly)
	v1.GET("/budgets", h.budgets)
	v1.GET("/budgets/:name", h.budget)
	v1.POST("/jobs/:id/devices", h.enroll, adminOnly)
	v1.GET("/jobs/:id/devices", h.devices)
	h.registerLog(v1)
	serveOpenAPI(e) // openapi.go: GET /v1/openapi.json
	serveUI(e)      // ui.go: the dashboard at /ui
	return e
}

// errorID is a random ID for one internal error.
func errorID() string {
	var b [8]byte
	_, _ = crand.Read(b[:]) // crypto/rand.Read does not fail (Go ≥ 1.24)
	return hex.EncodeToString(b[:])
}

// limitBody bounds the request body at limit(c) bytes: a larger
// Content-Length is refused at once, and a body without one (chunked) is
// cut off at the limit by http.MaxBytesReader, which readBody turns into
// the same 413. (echo's BodyLimit takes one fixed limit; the participate
// routes' limit depends on the job.)
func limitBody(limit func(c echo.Context) int64) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			n := limit(c)
			req := c.Request()
			if req.ContentLength > n {
				return tooLarge(n)
			}
			req.Body = http.MaxBytesReader(c.Response(), req.Body, n)
			return next(c)
		}
	}
}

func tooLarge(limit int64) error {
	return echo.NewHTTPError(http.StatusRequestEntityTooLarge, fmt.Sprintf("request body too large: at most %d bytes here", limit))
}

// readBody reads the request body: 413 past limitBody's limit, 400 if it
// cannot be read.
func readBody(c echo.Context) ([]byte, error) {
	b, err := io.ReadAll(c.Request().Body)
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, tooLarge(mbe.Limit)
	case err != nil:
		return nil, job.NewValidationError("body", types.RuleFormat, "unreadable: "+err.Error())
	}
	return b, nil
}

type handlers struct {
	m   *job.Manager
	log *slog.Logger
	// limits caches each devices job's participate body limit
	// (participateLimit): job ID → int64.
	limits sync.Map
	// forward carries device requests to their job's leader (forward.go).
	forward http.RoundTripper
}

func (h *handlers) create(c echo.Context) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	spec, warnings, err := job.DecodeSpec(body)
	if err != nil {
		return err
	}
	j, err := h.m.Submit(spec)
	if err != nil {
		return err
	}
	st, err := h.m.Get(j.ID)
	if err != nil {
		return err
	}
	for _, w := range warnings {
		h.log.Warn("deprecated job spec key", "job", st.ID, "warning", w)
	}
	st.Warnings = warnings
	return c.JSON(http.StatusCreated, st)
}

func (h *handlers) list(c echo.Context) error {
	jobs, err := h.m.List()
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"jobs": jobs})
}

func (h *handlers) get(c echo.Context) error {
	st, err := h.m.Get(c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, st)
}

func (h *handlers) metrics(c echo.Context) error {
	met, err := h.m.Metrics(c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"job_id": c.Param("id"), "rounds": met})
}

func (h *handlers) rounds(c echo.Context) error {
	rs, err := h.m.Rounds(c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"job_id": c.Param("id"), "rounds": rs})
}

func (h *handlers) privacy(c echo.Context) error {
	rep, err := h.m.Privacy(c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, rep)
}

func (h *handlers) cancel(c echo.Context) error {
	if _, err := h.m.Cancel(c.Param("id")); err != nil {
		return err
	}
	st, err := h.m.Get(c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, st)
}

func (h *handlers) model(c echo.Context) error {
	mod, err := h.m.Model(c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, mod)
}

func (h *handlers) createBudget(c echo.Context) error {
	name := c.Param("name")
	if err := job.CheckName("name", name); err != nil {
		return err
	}
	body, err := readBody(c)
	if err != nil {
		return err
	}
	var req types.BudgetRequest
	if err := strictjson.Decode(body, &req); err != nil {
		return job.NewValidationError("body", types.RuleFormat, "must be one JSON object {\"epsilon_budget\": ε, \"delta\": δ}: "+err.Error())
	}
	if _, err := h.m.CreateBudget(name, req.EpsilonBudget, req.Delta); err != nil {
		return err
	}
	rep, err := h.m.Budget(name)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, rep)
}

func (h *handlers) enroll(c echo.Context) error {
	en, err := h.m.Enroll(c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, en)
}

func (h *handlers) devices(c echo.Context) error {
	ds, err := h.m.Devices(c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"job_id": c.Param("id"), "devices": ds})
}

func (h *handlers) budgets(c echo.Context) error {
	reps, err := h.m.Budgets()
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, types.BudgetList{Budgets: reps})
}

func (h *handlers) budget(c echo.Context) error {
	// Looking up is lenient with budgets named before job.CheckName
	// existed, but a name never carries a control character into the log.
	name := c.Param("name")
	if len(name) > 128 || strings.IndexFunc(name, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return job.NewValidationError("name", types.RuleFormat, "must be at most 128 bytes of printable characters")
	}
	rep, err := h.m.Budget(name)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, rep)
}

// errorHandler is the echo error handler: it answers err as
// errorResponse maps it. A 5xx's internal text may name files, keys or
// state: it goes to the log only, under an ID the caller can quote. A 503
// (the store unavailable) also says so, with a Retry-After header.
func errorHandler(log *slog.Logger) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		if c.Response().Committed {
			return
		}
		code, body := errorResponse(err)
		switch {
		case code == http.StatusServiceUnavailable:
			id := errorID()
			log.Warn("request failed: store unavailable", "error_id", id, "method", c.Request().Method, "path", c.Path(), "status", code, "err", err)
			c.Response().Header().Set("Retry-After", strconv.Itoa(int(RetryAfterUnavailable/time.Second)))
			body = types.ErrorBody{Error: fmt.Sprintf("%s (id %s)", unavailableMessage, id), ErrorID: id}
		case code >= 500:
			id := errorID()
			log.Error("request failed", "error_id", id, "method", c.Request().Method, "path", c.Path(), "status", code, "err", err)
			body = types.ErrorBody{Error: fmt.Sprintf("internal error (id %s); see the server log", id), ErrorID: id}
		}
		_ = c.JSON(code, body)
	}
}

// RetryAfterUnavailable is the Retry-After of a 503: how long a caller
// should wait before retrying a request that failed because the store
// (etcd) could not be reached or did not answer.
const RetryAfterUnavailable = 2 * time.Second

// unavailableMessage is the body of a 503. Whether a write that failed so
// was applied is unknown until the store answers again; a retry sees the
// stored state then.
const unavailableMessage = "the store is unavailable (etcd could not be reached, or did not confirm the write in time); retry shortly"

// errorResponse maps an error to its status code and body, in one place.
func errorResponse(err error) (int, types.ErrorBody) {
	var ve *job.ValidationError
	var he *echo.HTTPError
	var pe *secagg.PeerError
	switch {
	case errors.Is(err, storage.ErrUnavailable):
		// First: whatever else the error wraps, the store did not answer.
		return http.StatusServiceUnavailable, types.ErrorBody{Error: unavailableMessage}
	case errors.As(err, &ve):
		return http.StatusBadRequest, types.ErrorBody{Error: ve.Error(), Field: ve.Field, Errors: ve.Errors()}
	case errors.As(err, &pe):
		return http.StatusBadRequest, types.ErrorBody{Error: pe.Error()}
	case errors.Is(err, job.ErrUnauthorized):
		return http.StatusUnauthorized, types.ErrorBody{Error: userMessage(err)}
	case errors.Is(err, job.ErrForbidden):
		return http.StatusForbidden, types.ErrorBody{Error: userMessage(err)}
	case errors.Is(err, storage.ErrNotFound):
		return http.StatusNotFound, types.ErrorBody{Error: userMessage(err)}
	case errors.Is(err, job.ErrCapacity):
		return http.StatusTooManyRequests, types.ErrorBody{Error: userMessage(err)}
	case errors.Is(err, job.ErrConflict), errors.Is(err, job.ErrBudget), errors.Is(err, storage.ErrExists), errors.Is(err, storage.ErrConflict):
		return http.StatusConflict, types.ErrorBody{Error: userMessage(err)}
	case errors.As(err, &he):
		msg, ok := he.Message.(string)
		if !ok {
			msg = http.StatusText(he.Code)
		}
		return he.Code, types.ErrorBody{Error: msg}
	}
	return http.StatusInternalServerError, types.ErrorBody{Error: http.StatusText(http.StatusInternalServerError)}
}

// redundantPrefixes are the leading words of wrapped errors that only
// repeat the status code ("conflict: …" under 409) or name the package
// that raised them ("storage: …").
var redundantPrefixes = []string{
	"storage: ",
	job.ErrConflict.Error() + ": ",
	job.ErrUnauthorized.Error() + ": ",
	job.ErrForbidden.Error() + ": ",
}

// userMessage is err's text for a caller: without redundantPrefixes, so
// a client shows "409 Conflict: job … is already completed", not
// "409 Conflict: conflict: storage: …".
func userMessage(err error) string {
	msg := strings.ReplaceAll(err.Error(), ": storage: ", ": ")
	for again := true; again; {
		again = false
		for _, p := range redundantPrefixes {
			if rest, ok := strings.CutPrefix(msg, p); ok && rest != "" {
				msg, again = rest, true
			}
		}
	}
	return msg
}
