package api

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
)

// The web dashboard (issue 17; docs/dashboard.md): static files embedded
// in the binary and served at /ui/ without authentication. The page
// holds no data of its own: it calls the public JSON API (/v1/...) with
// the API token its user types in, kept in the tab's sessionStorage and
// sent as "Authorization: Bearer". The charts are uPlot's (MIT), vendored
// under ui/static/vendor/uplot with its license; nothing is fetched from
// another origin, so the page works offline.

//go:embed ui/static
var uiEmbed embed.FS

// UIContentSecurityPolicy is the dashboard's Content-Security-Policy:
// scripts, styles, images and API calls from the server's own origin
// only, no inline script or style, no plugins, no framing, and no form
// submission (the login form is handled by script, so a token can never
// end up in a URL).
const UIContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// uiHeaders are the security headers of every answer under /ui.
var uiHeaders = [][2]string{
	{"Content-Security-Policy", UIContentSecurityPolicy},
	{"X-Content-Type-Options", "nosniff"},
	{"X-Frame-Options", "DENY"},
	{"Referrer-Policy", "no-referrer"},
	{"Cross-Origin-Opener-Policy", "same-origin"},
	{"Cross-Origin-Resource-Policy", "same-origin"},
	{"Permissions-Policy", "camera=(), microphone=(), geolocation=(), payment=(), usb=()"},
	// Revalidate every time (the ETag makes that cheap), so that a new
	// server binary's page is never mixed with an old cached script.
	{"Cache-Control", "no-cache"},
}

// uiAsset is one embedded file, read once.
type uiAsset struct {
	body  []byte
	etag  string
	ctype string
}

// loadUIAssets reads every embedded file under ui/static, keyed by its
// path below it ("index.html", "vendor/uplot/uPlot.min.css").
func loadUIAssets() map[string]uiAsset {
	root, err := fs.Sub(uiEmbed, "ui/static")
	if err != nil {
		panic("api: embedded dashboard: " + err.Error())
	}
	assets := map[string]uiAsset{}
	err = fs.WalkDir(root, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(root, name)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		ctype := mime.TypeByExtension(path.Ext(name))
		if ctype == "" {
			ctype = "text/plain; charset=utf-8" // LICENSE
		}
		assets[name] = uiAsset{body: b, etag: `"` + hex.EncodeToString(sum[:16]) + `"`, ctype: ctype}
		return nil
	})
	if err != nil {
		panic("api: embedded dashboard: " + err.Error())
	}
	if _, ok := assets["index.html"]; !ok {
		panic("api: embedded dashboard has no index.html")
	}
	return assets
}

// serveUI serves the dashboard: /ui redirects to /ui/ (so that the page's
// relative links resolve), /ui/ is index.html, and /ui/<file> an embedded
// file; anything else under /ui is 404 (no directory listings).
func serveUI(e *echo.Echo) {
	assets := loadUIAssets()
	withHeaders := func(c echo.Context) {
		h := c.Response().Header()
		for _, kv := range uiHeaders {
			h.Set(kv[0], kv[1])
		}
	}
	methods := []string{http.MethodGet, http.MethodHead}
	e.Match(methods, "/ui", func(c echo.Context) error {
		withHeaders(c)
		return c.Redirect(http.StatusMovedPermanently, "/ui/")
	})
	e.Match(methods, "/ui/*", func(c echo.Context) error {
		withHeaders(c)
		name := strings.TrimPrefix(path.Clean("/"+c.Param("*")), "/")
		if name == "" {
			name = "index.html"
		}
		a, ok := assets[name]
		if !ok {
			return echo.ErrNotFound
		}
		w := c.Response()
		w.Header().Set("Content-Type", a.ctype)
		w.Header().Set("ETag", a.etag)
		// ServeContent answers If-None-Match with 304, HEAD and ranges.
		http.ServeContent(w, c.Request(), name, time.Time{}, bytes.NewReader(a.body))
		return nil
	})
}
