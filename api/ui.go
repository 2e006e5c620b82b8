package api

import "github.com/labstack/echo/v4"

// serveUI serves the web dashboard (issue 17): to be written.
func serveUI(e *echo.Echo) {}
