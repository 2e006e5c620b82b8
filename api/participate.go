package api

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"golang.org/x/time/rate"

	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/fl/model"
	"github.com/dpfl/dpfl/internal/strictjson"
	"github.com/dpfl/dpfl/job"
	"github.com/dpfl/dpfl/secagg"
)

// A masked input is d ring elements in JSON, each at most 10 digits and a
// comma; every other protocol message is small next to
// participateOverhead, which leaves room for a cohort's worth of
// encrypted shares (a few hundred bytes each).
const (
	bytesPerElement     = 11
	participateOverhead = 1 << 20
)

// Devices jobs train on Fashion-MNIST's shape: a device's model has the
// parameters of the job's model on 28×28 inputs and 10 classes (the
// server validates devices jobs to dataset fashion-mnist).
const deviceInputDim, deviceClasses = 28 * 28, 10

// ParticipateBodyLimit is the largest body a device may send for a job of
// model name: a masked input of that model's dimension plus
// participateOverhead. For the largest model, the CNN (about 1.2M
// parameters), it is about 14 MB; for logreg about 1.1 MB. An unknown
// model gets the overhead alone.
func ParticipateBodyLimit(name string) int64 {
	m, err := model.New(name, deviceInputDim, deviceClasses)
	if err != nil {
		return participateOverhead
	}
	return int64(m.NumParams())*bytesPerElement + participateOverhead
}

// participateLimit is ParticipateBodyLimit for job id's model, cached per
// job. deviceAuth has admitted the request, so id is a devices job that
// exists; if it cannot be read now, the limit is the overhead alone and
// is not cached.
func (h *handlers) participateLimit(id string) int64 {
	if n, ok := h.limits.Load(id); ok {
		return n.(int64)
	}
	st, err := h.m.Get(id)
	if err != nil {
		return participateOverhead
	}
	n := ParticipateBodyLimit(st.Spec.Model)
	h.limits.Store(id, n)
	return n
}

// DefaultDeviceRate and DefaultDeviceBurst are the participate routes'
// rate limit per device. A device polls its round every 200 ms
// (dpfl-client participate --poll) and sends four messages a round: 10
// requests a second with bursts of 20 leave it twice that, and stop a
// runaway or hostile device from monopolising the server.
const (
	DefaultDeviceRate  = 10
	DefaultDeviceBurst = 20
)

// deviceRateLimit limits each device, keyed by the job and the device
// that deviceAuth admitted (one credential), with echo's rate limiter
// over golang.org/x/time/rate; beyond the limit a request is 429 with
// Retry-After.
func deviceRateLimit(perSecond float64, burst int) echo.MiddlewareFunc {
	if perSecond <= 0 {
		perSecond = DefaultDeviceRate
	}
	if burst <= 0 {
		burst = DefaultDeviceBurst
	}
	return middleware.RateLimiterWithConfig(middleware.RateLimiterConfig{
		Store: middleware.NewRateLimiterMemoryStoreWithConfig(middleware.RateLimiterMemoryStoreConfig{
			Rate: rate.Limit(perSecond), Burst: burst, ExpiresIn: 3 * time.Minute,
		}),
		IdentifierExtractor: func(c echo.Context) (string, error) {
			return c.Param("id") + "/" + device(c), nil
		},
		DenyHandler: func(c echo.Context, _ string, _ error) error {
			c.Response().Header().Set("Retry-After", "1")
			return echo.NewHTTPError(http.StatusTooManyRequests, fmt.Sprintf("rate limit: at most %g requests a second per device (bursts of %d); slow down and retry", perSecond, burst))
		},
	})
}

// deviceKey is the echo context key under which deviceAuth leaves the
// authenticated device's ID.
const deviceKey = "dpfl.device"

// deviceAuth admits a request to a job's participate routes only with the
// credential of a device enrolled for that job (:id), and records the
// device's ID for the handlers. Anything else, the API token included,
// is 401.
func deviceAuth(m *job.Manager) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			scheme, cred, _ := strings.Cut(c.Request().Header.Get(echo.HeaderAuthorization), " ")
			if !strings.EqualFold(scheme, "Bearer") || cred == "" {
				return fmt.Errorf("%w: missing device credential: send \"Authorization: Bearer <credential>\" with the credential from enrolment (dpfl-client devices enroll JOB)", job.ErrUnauthorized)
			}
			id, err := m.AuthenticateDevice(c.Param("id"), cred)
			if err != nil {
				return err
			}
			c.Set(deviceKey, id)
			return next(c)
		}
	}
}

// device is the ID of the device that deviceAuth admitted.
func device(c echo.Context) string {
	id, _ := c.Get(deviceKey).(string)
	return id
}

// participate registers, on g (prefix /v1/jobs/:id/participate, behind
// deviceAuth), the routes a device uses to take part in the rounds of a
// devices job: the stages of secure aggregation (Bonawitz et al. 2017,
// Fig. 4, secagg.Stage) over HTTP, the server's end of the transport that
// api/client.Participation is the device's end of. Every message after join carries the device's
// per-round token in types.ClientTokenHeader, which must be the one join
// gave this device. With several replicas, any replica answers the
// round's status, and the others (join, the stages) go to the job's
// leader (toLeader, forward.go).
func (h *handlers) participate(g *echo.Group) {
	g.GET("", func(c echo.Context) error {
		st, err := h.m.DeviceRound(c.Param("id"))
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, st)
	})
	g.POST("/join", func(c echo.Context) error {
		info, err := h.m.Join(c.Param("id"), device(c))
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, info)
	}, h.toLeader)
	// One route per protocol stage, named as the stage (secagg.Stage):
	// GET is the server's request to this device, POST its message.
	g.POST("/advertise_keys", post(h.m, h.m.AdvertiseKeys), h.toLeader)
	g.GET("/share_keys", get(h.m.ShareKeysRequest), h.toLeader)
	g.POST("/share_keys", post(h.m, h.m.ShareKeys), h.toLeader)
	g.GET("/masked_input", get(h.m.MaskedInputRequest), h.toLeader)
	g.POST("/masked_input", post(h.m, h.m.MaskedInput), h.toLeader)
	g.GET("/unmask", get(h.m.UnmaskRequest), h.toLeader)
	g.POST("/unmask", post(h.m, h.m.Unmask), h.toLeader)
	// The routes of the previous release, for devices built from it
	// (deprecated; to be removed in the next release).
	g.POST("/advertise", post(h.m, h.m.AdvertiseKeys), h.toLeader)
	g.GET("/keys", get(h.m.ShareKeysRequest), h.toLeader)
	g.POST("/shares", post(h.m, h.m.ShareKeys), h.toLeader)
	g.GET("/shares", get(h.m.MaskedInputRequest), h.toLeader)
	g.POST("/masked-input", post(h.m, h.m.MaskedInput), h.toLeader)
}

// post binds a protocol message strictly (strictjson.Decode: an unknown
// field, a repeated key or trailing data is a malformed message) and
// hands it to the manager.
func post[M any](m *job.Manager, accept func(jobID, deviceID, token string, msg M) error) echo.HandlerFunc {
	return func(c echo.Context) error {
		jobID, dev, token := c.Param("id"), device(c), c.Request().Header.Get(types.ClientTokenHeader)
		body, err := readBody(c)
		if err != nil {
			return err
		}
		var msg M
		if err := strictjson.Decode(body, &msg); err != nil {
			err = fmt.Errorf("malformed protocol message: %w", err)
			if id, ok := m.DeviceClient(jobID, dev, token); ok {
				return &secagg.PeerError{Client: id, Err: err}
			}
			return &job.ValidationError{Field: "body", Rule: err.Error()}
		}
		if err := accept(jobID, dev, token, msg); err != nil {
			return err
		}
		return c.NoContent(http.StatusNoContent)
	}
}

func get[M any](fetch func(jobID, deviceID, token string) (M, error)) echo.HandlerFunc {
	return func(c echo.Context) error {
		msg, err := fetch(c.Param("id"), device(c), c.Request().Header.Get(types.ClientTokenHeader))
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, msg)
	}
}
