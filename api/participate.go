package api

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/dpfl/dpfl/fl/job"
	"github.com/dpfl/dpfl/secagg"
)

// MaxUpdateBytes bounds a participant's message: a masked input is d ring
// elements in JSON, up to ~11 bytes each.
const MaxUpdateBytes = 64 << 20

// participate registers the routes a device uses to take part in the
// rounds of a devices job: the stages of secure aggregation (Bonawitz et
// al. 2017, Fig. 4) over HTTP. Every message after join carries the
// device's per-round credential in job.ClientTokenHeader.
func (h handlers) participate(g *echo.Group) {
	g.GET("/jobs/:id/participate", func(c echo.Context) error {
		st, err := h.m.DeviceRound(c.Param("id"))
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, st)
	})
	g.POST("/jobs/:id/participate/join", func(c echo.Context) error {
		info, err := h.m.Join(c.Param("id"))
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, info)
	})
	g.POST("/jobs/:id/participate/advertise", post(h.m, h.m.Advertise))
	g.GET("/jobs/:id/participate/keys", get(h.m.Keys))
	g.POST("/jobs/:id/participate/shares", post(h.m, h.m.ShareKeys))
	g.GET("/jobs/:id/participate/shares", get(h.m.Shares))
	g.POST("/jobs/:id/participate/masked-input", post(h.m, h.m.MaskedInput))
	g.GET("/jobs/:id/participate/unmask", get(h.m.UnmaskRequest))
	g.POST("/jobs/:id/participate/unmask", post(h.m, h.m.Unmask))
}

// post binds a protocol message strictly (an unknown field is a
// malformed message) and hands it to the manager.
func post[M any](m *job.Manager, accept func(jobID, token string, msg M) error) echo.HandlerFunc {
	return func(c echo.Context) error {
		jobID, token := c.Param("id"), c.Request().Header.Get(job.ClientTokenHeader)
		var msg M
		dec := json.NewDecoder(c.Request().Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&msg); err != nil {
			err = fmt.Errorf("malformed protocol message: %w", err)
			if id, ok := m.DeviceClient(jobID, token); ok {
				return &secagg.PeerError{Client: id, Err: err}
			}
			return &job.ValidationError{Field: "body", Rule: err.Error()}
		}
		if err := accept(jobID, token, msg); err != nil {
			return err
		}
		return c.NoContent(http.StatusNoContent)
	}
}

func get[M any](fetch func(jobID, token string) (M, error)) echo.HandlerFunc {
	return func(c echo.Context) error {
		msg, err := fetch(c.Param("id"), c.Request().Header.Get(job.ClientTokenHeader))
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, msg)
	}
}
