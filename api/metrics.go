package api

import (
	"github.com/labstack/echo/v4"

	"github.com/dpfl/dpfl/job"
)

// observeHTTP installs the Prometheus instrumentation (issue 17): to be
// written.
func observeHTTP(e *echo.Echo, m *job.Manager, cfg Config) {}
