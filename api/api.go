// Package api is dpfl's REST interface: JSON over HTTP, served with echo.
// Handlers are thin: bind, call the job manager (package fl/job), and map
// its errors to status codes in one place (errorResponse).
//
// Two kinds of caller authenticate with "Authorization: Bearer <secret>".
// The administrator's API token opens every route below except the
// participate routes. A device's credential, from enrolment (POST
// /v1/jobs/:id/devices), opens only the participate routes of the job it
// was enrolled for; the server stores only its SHA-256 hash. Neither
// secret opens the other's routes. /healthz needs none.
//
// Routes (API token):
//
//	GET  /healthz                 liveness, no auth
//	POST /v1/jobs                 create and start a job (body: job.Spec JSON)
//	GET  /v1/jobs                 list jobs
//	GET  /v1/jobs/:id             state, round, latest metrics
//	GET  /v1/jobs/:id/metrics     every committed round's metrics
//	GET  /v1/jobs/:id/rounds      per-round participation and estimated time
//	GET  /v1/jobs/:id/privacy     privacy ledger and ε at the job's δ
//	POST /v1/jobs/:id/cancel      stop a running job
//	GET  /v1/jobs/:id/model       latest global model parameters
//	PUT  /v1/budgets/:name        create a privacy unit {epsilon_budget, delta}
//	GET  /v1/budgets/:name        a privacy unit's jobs, spend and remaining ε
//	POST /v1/jobs/:id/devices     enroll a device for a devices job: its ID and credential, once
//	GET  /v1/jobs/:id/devices     the job's enrolled devices (IDs and enrolment times)
//
// A devices job's participants (participate.go) use, with their device
// credential,
//
//	GET  /v1/jobs/:id/participate                the open round and its stage
//	POST /v1/jobs/:id/participate/join           client ID, round token, model (once per device per attempt)
//	POST /v1/jobs/:id/participate/advertise      secagg.AdvertiseMsg
//	GET  /v1/jobs/:id/participate/keys           secagg.KeysMsg
//	POST /v1/jobs/:id/participate/shares         secagg.ShareKeysMsg
//	GET  /v1/jobs/:id/participate/shares         secagg.SharesMsg
//	POST /v1/jobs/:id/participate/masked-input   secagg.MaskedInputMsg
//	GET  /v1/jobs/:id/participate/unmask         secagg.UnmaskRequestMsg
//	POST /v1/jobs/:id/participate/unmask         secagg.UnmaskMsg
//
// Errors are {"error": message, "field": json-path} with 400 (bad input,
// naming the field and rule, or a protocol message refused, naming the
// client), 401 (missing or wrong API token or device credential), 403 (a
// round token of another device), 404 (unknown job), 409 (request does
// not fit the job's state, or a device's second join of one attempt), 500
// otherwise.
package api

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/dpfl/dpfl/fl/job"
	"github.com/dpfl/dpfl/secagg"
	"github.com/dpfl/dpfl/storage"
)

// ErrorBody is the JSON body of every error response.
type ErrorBody struct {
	Error string `json:"error"`
	// Field is the JSON path of the offending request field, if any.
	Field string `json:"field,omitempty"`
}

// MaxBodyBytes bounds a request body.
const MaxBodyBytes = 1 << 20

// New returns the HTTP handler serving jobs through m. The administrative
// routes are guarded by token (non-empty; compared in constant time), the
// participate routes by the credentials of the devices enrolled for each
// job (job.Manager.AuthenticateDevice).
func New(m *job.Manager, token string, log *slog.Logger) http.Handler {
	if token == "" {
		panic("api: empty token")
	}
	if log == nil {
		log = slog.Default()
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = func(err error, c echo.Context) {
		if c.Response().Committed {
			return
		}
		code, body := errorResponse(err)
		if code >= 500 {
			log.Error("request failed", "method", c.Request().Method, "path", c.Path(), "err", err)
		}
		_ = c.JSON(code, body)
	}
	e.Use(middleware.Recover())
	e.GET("/healthz", func(c echo.Context) error {
		return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
	})
	h := handlers{m}
	// Devices: only their own job's participate routes, only with a device
	// credential. These routes are more specific than the admin group's
	// catch-all, so the admin token never reaches them.
	h.participate(e.Group("/v1/jobs/:id/participate", deviceAuth(m),
		middleware.BodyLimit(fmt.Sprint(MaxUpdateBytes/(1<<20))+"M")))
	v1 := e.Group("/v1", middleware.KeyAuthWithConfig(middleware.KeyAuthConfig{
		KeyLookup:  "header:" + echo.HeaderAuthorization,
		AuthScheme: "Bearer",
		Validator: func(key string, _ echo.Context) (bool, error) {
			return subtle.ConstantTimeCompare([]byte(key), []byte(token)) == 1, nil
		},
		ErrorHandler: func(error, echo.Context) error {
			return echo.NewHTTPError(http.StatusUnauthorized, "missing or invalid bearer token (set --token or DPFL_TOKEN)")
		},
	}), middleware.BodyLimit("1M"))
	v1.POST("/jobs", h.create)
	v1.GET("/jobs", h.list)
	v1.GET("/jobs/:id", h.get)
	v1.GET("/jobs/:id/metrics", h.metrics)
	v1.GET("/jobs/:id/rounds", h.rounds)
	v1.GET("/jobs/:id/privacy", h.privacy)
	v1.POST("/jobs/:id/cancel", h.cancel)
	v1.GET("/jobs/:id/model", h.model)
	v1.PUT("/budgets/:name", h.createBudget)
	v1.GET("/budgets/:name", h.budget)
	v1.POST("/jobs/:id/devices", h.enroll)
	v1.GET("/jobs/:id/devices", h.devices)
	return e
}

type handlers struct{ m *job.Manager }

func (h handlers) create(c echo.Context) error {
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		return &job.ValidationError{Field: "body", Rule: "unreadable: " + err.Error()}
	}
	spec, err := job.ParseSpec(body)
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
	return c.JSON(http.StatusCreated, st)
}

func (h handlers) list(c echo.Context) error {
	jobs, err := h.m.List()
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"jobs": jobs})
}

func (h handlers) get(c echo.Context) error {
	st, err := h.m.Get(c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, st)
}

func (h handlers) metrics(c echo.Context) error {
	met, err := h.m.Metrics(c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"job_id": c.Param("id"), "rounds": met})
}

func (h handlers) rounds(c echo.Context) error {
	rs, err := h.m.Rounds(c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"job_id": c.Param("id"), "rounds": rs})
}

func (h handlers) privacy(c echo.Context) error {
	rep, err := h.m.Privacy(c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, rep)
}

func (h handlers) cancel(c echo.Context) error {
	if _, err := h.m.Cancel(c.Param("id")); err != nil {
		return err
	}
	st, err := h.m.Get(c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, st)
}

func (h handlers) model(c echo.Context) error {
	mod, err := h.m.Model(c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, mod)
}

// BudgetRequest is the body of PUT /v1/budgets/:name.
type BudgetRequest struct {
	EpsilonBudget float64 `json:"epsilon_budget"`
	Delta         float64 `json:"delta"`
}

func (h handlers) createBudget(c echo.Context) error {
	var req BudgetRequest
	dec := json.NewDecoder(c.Request().Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return &job.ValidationError{Field: "body", Rule: "must be {\"epsilon_budget\": ε, \"delta\": δ}: " + err.Error()}
	}
	if _, err := h.m.CreateUnit(c.Param("name"), req.EpsilonBudget, req.Delta); err != nil {
		return err
	}
	rep, err := h.m.Unit(c.Param("name"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, rep)
}

func (h handlers) enroll(c echo.Context) error {
	en, err := h.m.Enroll(c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, en)
}

func (h handlers) devices(c echo.Context) error {
	ds, err := h.m.Devices(c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"job_id": c.Param("id"), "devices": ds})
}

func (h handlers) budget(c echo.Context) error {
	rep, err := h.m.Unit(c.Param("name"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, rep)
}

// errorResponse maps an error to its status code and body, in one place.
func errorResponse(err error) (int, ErrorBody) {
	var ve *job.ValidationError
	var he *echo.HTTPError
	var pe *secagg.PeerError
	switch {
	case errors.As(err, &ve):
		return http.StatusBadRequest, ErrorBody{Error: ve.Error(), Field: ve.Field}
	case errors.As(err, &pe):
		return http.StatusBadRequest, ErrorBody{Error: pe.Error()}
	case errors.Is(err, job.ErrUnauthorized):
		return http.StatusUnauthorized, ErrorBody{Error: err.Error()}
	case errors.Is(err, job.ErrForbidden):
		return http.StatusForbidden, ErrorBody{Error: err.Error()}
	case errors.Is(err, storage.ErrNotFound):
		return http.StatusNotFound, ErrorBody{Error: err.Error()}
	case errors.Is(err, job.ErrCapacity):
		return http.StatusTooManyRequests, ErrorBody{Error: err.Error()}
	case errors.Is(err, job.ErrConflict), errors.Is(err, job.ErrBudget), errors.Is(err, storage.ErrExists), errors.Is(err, storage.ErrConflict):
		return http.StatusConflict, ErrorBody{Error: err.Error()}
	case errors.As(err, &he):
		msg, ok := he.Message.(string)
		if !ok {
			msg = http.StatusText(he.Code)
		}
		return he.Code, ErrorBody{Error: msg}
	}
	return http.StatusInternalServerError, ErrorBody{Error: err.Error()}
}
