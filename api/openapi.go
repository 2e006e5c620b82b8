package api

import (
	_ "embed"
	"net/http"

	"github.com/labstack/echo/v4"
)

// openAPIDocument is the OpenAPI 3.0 contract of every route New serves
// (api/openapi.json). It is embedded rather than generated at run time so
// that the bytes a client fetches are exactly the ones kept, reviewed and
// tested in the repository: openapi_test.go checks that the document
// names every registered route and validates every request and response
// of the API's end-to-end tests against it.
//
//go:embed openapi.json
var openAPIDocument []byte

// OpenAPIDocument is the embedded OpenAPI contract (api/openapi.json), the
// bytes GET /v1/openapi.json serves. The caller must not change them.
func OpenAPIDocument() []byte { return openAPIDocument }

// serveOpenAPI serves the contract at GET /v1/openapi.json. It needs no
// token: the contract says nothing about any job, and a client (or a code
// generator) needs it before it holds a secret. The route is registered on
// e itself, outside the /v1 group and its token check; echo's router
// prefers this static path to the group's catch-all.
func serveOpenAPI(e *echo.Echo) {
	e.GET("/v1/openapi.json", func(c echo.Context) error {
		return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, openAPIDocument)
	})
}
