package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/dpfl/dpfl/fl/job"
	"github.com/dpfl/dpfl/secagg"
)

// MaxUpdateBytes bounds a participant's message: a masked input is d ring
// elements in JSON, up to ~11 bytes each.
const MaxUpdateBytes = 64 << 20

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
// Fig. 4) over HTTP. Every message after join carries the device's
// per-round token in job.ClientTokenHeader, which must be the one join
// gave this device.
func (h handlers) participate(g *echo.Group) {
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
	})
	g.POST("/advertise", post(h.m, h.m.Advertise))
	g.GET("/keys", get(h.m.Keys))
	g.POST("/shares", post(h.m, h.m.ShareKeys))
	g.GET("/shares", get(h.m.Shares))
	g.POST("/masked-input", post(h.m, h.m.MaskedInput))
	g.GET("/unmask", get(h.m.UnmaskRequest))
	g.POST("/unmask", post(h.m, h.m.Unmask))
}

// post binds a protocol message strictly (an unknown field is a
// malformed message) and hands it to the manager.
func post[M any](m *job.Manager, accept func(jobID, deviceID, token string, msg M) error) echo.HandlerFunc {
	return func(c echo.Context) error {
		jobID, dev, token := c.Param("id"), device(c), c.Request().Header.Get(job.ClientTokenHeader)
		var msg M
		dec := json.NewDecoder(c.Request().Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&msg); err != nil {
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
		msg, err := fetch(c.Param("id"), device(c), c.Request().Header.Get(job.ClientTokenHeader))
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, msg)
	}
}
