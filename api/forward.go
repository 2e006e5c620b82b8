package api

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/job"
)

// Several replicas over one etcd store (docs/ha.md): a devices job's
// rounds run on its leader, the only replica that holds the live round
// (its devices' round tokens and the protocol's state). Any replica
// answers the round's status (GET …/participate, from memory); a join or
// a protocol message that reaches a replica that does not lead the job is
// forwarded to the leader with httputil.ReverseProxy, after this replica
// authenticated the device, rate-limited it and checked the body against
// the job's limit. The leader sees the device's own request (its
// Authorization and round token headers, the body) and authenticates it
// again; the device gets the leader's answer, status and body unchanged.
// A forwarded request carries ForwardedHeader, and a replica never
// forwards such a request again: if it no longer leads the job, it
// answers 503. When no replica leads the job, or the leader cannot be
// reached, the answer is 503 with Retry-After: devices need no change.

// ForwardedHeader marks a participate request that a replica forwarded to
// the job's leader; its value is the forwarding replica's ID.
const ForwardedHeader = "X-Dpfl-Forwarded-By"

// RetryAfterNoLeader is the Retry-After of a 503 for a device's request
// that no replica can handle now (no leader, or the leader unreachable):
// a new leader is elected within a lease TTL (seconds).
const RetryAfterNoLeader = time.Second

// newForwardTransport carries the forwarded requests to the leaders,
// trusting cas for an https leader (nil: the system's roots).
func newForwardTransport(cas *x509.CertPool) http.RoundTripper {
	return &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   5 * time.Second,
		ResponseHeaderTimeout: 60 * time.Second,
		TLSClientConfig:       &tls.Config{RootCAs: cas, MinVersion: tls.VersionTLS12},
	}
}

// toLeader is the middleware of the participate routes that need the live
// round (join and the protocol's stages): it lets the request through when
// this replica leads the job (or is the only server), and otherwise
// forwards it to the leader.
func (h *handlers) toLeader(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		id := c.Param("id")
		leaderURL, err := h.m.DeviceLeader(id)
		forwarded := c.Request().Header.Get(ForwardedHeader) != ""
		switch {
		case err == nil && leaderURL == "":
			return next(c)
		case err == nil && forwarded:
			// Forwarded to a replica that no longer leads the job.
			return noLeader(c, fmt.Sprintf("this replica no longer leads job %s; retry shortly", id))
		case errors.Is(err, job.ErrNoLeader):
			return noLeader(c, fmt.Sprintf("no replica leads job %s right now; retry shortly", id))
		case err != nil:
			return err
		}
		target, err := url.Parse(leaderURL)
		if err != nil || (target.Scheme != "http" && target.Scheme != "https") || target.Host == "" {
			return fmt.Errorf("job %s: the leader's address %q is not an http(s) URL", id, leaderURL)
		}
		// The body within the job's limit (limitBody), read here so that
		// a body over it is this replica's 413, as without forwarding.
		body, err := readBody(c)
		if err != nil {
			return err
		}
		req := c.Request()
		req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		self := h.m.ReplicaID()
		proxy := &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				pr.SetURL(target)
				pr.SetXForwarded()
				pr.Out.Header.Set(ForwardedHeader, self)
			},
			Transport: h.forward,
			ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
				if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
					return // the device went away
				}
				h.log.Warn("forwarding a device's request to the job's leader failed", "job", id, "leader", leaderURL, "path", c.Path(), "err", err)
				_ = noLeader(c, fmt.Sprintf("the leader of job %s could not be reached; retry shortly", id))
			},
		}
		proxy.ServeHTTP(c.Response(), req)
		return nil
	}
}

// noLeader answers 503 with Retry-After: no replica can handle a device's
// request for the job now.
func noLeader(c echo.Context, msg string) error {
	c.Response().Header().Set("Retry-After", fmt.Sprint(int(RetryAfterNoLeader/time.Second)))
	return c.JSON(http.StatusServiceUnavailable, types.ErrorBody{Error: msg})
}
