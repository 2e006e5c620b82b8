package api

import "github.com/labstack/echo/v4"

// serveOpenAPI serves the OpenAPI contract (issue 17): to be written.
func serveOpenAPI(e *echo.Echo) {}
