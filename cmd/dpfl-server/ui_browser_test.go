package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/dpfl/dpfl/api"
	"github.com/dpfl/dpfl/api/client"
)

// The dashboard (/ui, api/ui.go, docs/dashboard.md): TestUIAssets checks
// what the server sends, without a browser; TestUIBrowser loads the page
// in headless Chromium against a real server running a small DP job.

// TestUIAssets: /ui is served without a token, with the security
// headers, from the binary's embedded files only: every script and
// stylesheet index.html names is local and served, no script is inline,
// and nothing outside the embedded files is reachable under /ui.
func TestUIAssets(t *testing.T) {
	s := startServer(t, filepath.Join(t.TempDir(), "dpfl.db"), "tok")
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path string, header ...string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, s.addr+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		res, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return res, string(b)
	}
	secure := func(path string, res *http.Response) {
		t.Helper()
		for k, want := range map[string]string{
			"Content-Security-Policy": api.UIContentSecurityPolicy,
			"X-Content-Type-Options":  "nosniff",
			"X-Frame-Options":         "DENY",
			"Referrer-Policy":         "no-referrer",
		} {
			if got := res.Header.Get(k); got != want {
				t.Errorf("%s: %s is %q, want %q", path, k, got, want)
			}
		}
	}
	for _, dir := range []string{"frame-ancestors 'none'", "script-src 'self'", "default-src 'none'"} {
		if !strings.Contains(api.UIContentSecurityPolicy, dir) {
			t.Errorf("CSP %q lacks %q", api.UIContentSecurityPolicy, dir)
		}
	}
	if strings.Contains(api.UIContentSecurityPolicy, "unsafe-") {
		t.Errorf("CSP %q allows something unsafe", api.UIContentSecurityPolicy)
	}

	res, _ := get("/ui")
	if res.StatusCode != http.StatusMovedPermanently || res.Header.Get("Location") != "/ui/" {
		t.Fatalf("/ui: %s to %q, want 301 to /ui/", res.Status, res.Header.Get("Location"))
	}
	secure("/ui", res)
	res, index := get("/ui/")
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("/ui/: %s, %s", res.Status, res.Header.Get("Content-Type"))
	}
	secure("/ui/", res)
	if res2, _ := get("/ui/", "If-None-Match", res.Header.Get("ETag")); res2.StatusCode != http.StatusNotModified {
		t.Errorf("/ui/ with its ETag: %s, want 304", res2.Status)
	}
	if regexp.MustCompile(`<script(\s[^>]*)?>\s*[^<\s]`).MatchString(index) || !strings.Contains(index, "<script src=") {
		t.Errorf("index.html has an inline script (the CSP forbids it)")
	}
	if regexp.MustCompile(`\sstyle=|<style`).MatchString(index) || regexp.MustCompile(`\son[a-z]+=`).MatchString(index) {
		t.Errorf("index.html has an inline style or event handler (the CSP forbids them)")
	}
	refs := regexp.MustCompile(`(?:src|href)="([^"#]+)"`).FindAllStringSubmatch(index, -1)
	want := map[string]string{".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}
	assets := 0
	for _, m := range refs {
		ref := m[1]
		if strings.Contains(ref, ":") || strings.HasPrefix(ref, "/") {
			t.Errorf("index.html loads %q: only files of its own directory are allowed (no CDN, works offline)", ref)
			continue
		}
		res, body := get("/ui/" + ref)
		ctype := want[filepath.Ext(ref)]
		if res.StatusCode != http.StatusOK || ctype == "" || !strings.HasPrefix(res.Header.Get("Content-Type"), ctype) || len(body) == 0 {
			t.Errorf("/ui/%s: %s, %q, %d bytes", ref, res.Status, res.Header.Get("Content-Type"), len(body))
		}
		secure("/ui/"+ref, res)
		assets++
	}
	if assets < 5 { // favicon, uPlot's js and css, app.js, app.css
		t.Errorf("index.html names %d assets: %v", assets, refs)
	}
	if res, body := get("/ui/vendor/uplot/LICENSE"); res.StatusCode != http.StatusOK || !strings.Contains(body, "MIT") {
		t.Errorf("uPlot's license: %s", res.Status)
	}
	// No directory listings, no way out of the embedded files, and the
	// API behind /ui still wants its token.
	for _, p := range []string{"/ui/vendor/", "/ui/vendor/uplot", "/ui/nope.js", "/ui/../v1/jobs", "/ui/%2e%2e/v1/jobs", "/ui/..%2fv1%2fjobs"} {
		if res, _ := get(p); res.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %s, want 404", p, res.Status)
		}
	}
	if res, _ := get("/v1/jobs"); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("/v1/jobs without a token: %s", res.Status)
	}
}

// uiJob is the dashboard test's DP job: long enough (40 rounds) to be
// seen running, short enough for a test (a few seconds on two cores).
const uiJob = `{
  "name": "dashboard demo",
  "model": "logreg",
  "population": {"size": 600, "partition": "dirichlet", "dirichlet_alpha": 1.0},
  "sampling": {"scheme": "poisson", "rate": 0.1},
  "rounds": 40,
  "client": {"epochs": 1, "batch_size": 20, "lr": 0.1},
  "dp": {"enabled": true, "clip_norm": 0.5, "noise_multiplier": 1.1, "delta": 1e-5, "budget": "ui-demo"},
  "eval_every": 4
}`

// chromium finds the browser: $DPFL_CHROMIUM, else chromium on $PATH.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("DPFL_CHROMIUM"); p != "" {
		if _, err := exec.LookPath(p); err != nil {
			t.Fatalf("DPFL_CHROMIUM=%s: %v", p, err)
		}
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("the dashboard's browser test needs Chromium: apt-get install chromium (or set DPFL_CHROMIUM to its path)")
	return ""
}

// uiMonitor runs in the page before its own scripts (devtools'
// addScriptToEvaluateOnNewDocument, which the CSP does not govern) and
// records what must not happen: CSP violations, uncaught errors,
// resources that fail to load, unhandled promise rejections.
const uiMonitor = `
window.__uiProblems = [];
document.addEventListener('securitypolicyviolation', (e) =>
  window.__uiProblems.push('CSP violation: ' + e.violatedDirective + ' blocked ' + e.blockedURI));
window.addEventListener('error', (e) =>
  window.__uiProblems.push(e.message ? 'error: ' + e.message + ' at ' + e.filename + ':' + e.lineno
    : 'failed to load ' + (e.target && (e.target.src || e.target.href))), true);
window.addEventListener('unhandledrejection', (e) => window.__uiProblems.push('unhandled rejection: ' + e.reason));
`

// TestUIBrowser drives the dashboard in headless Chromium against a real
// dpfl-server: a wrong token is refused at the login, the right one shows
// the jobs, the running job's row reaches "completed" by the page's own
// polling, and the job's charts, privacy ledger and shared budget match
// what the API answers. It saves a full-page screenshot
// ($DPFL_UI_SCREENSHOT, else in a temporary directory). It runs with
// DPFL_UI_TEST=1 only (scripts/test-ui.sh), and then fails, not skips,
// without Chromium or Fashion-MNIST.
func TestUIBrowser(t *testing.T) {
	if os.Getenv("DPFL_UI_TEST") != "1" {
		t.Skip("the dashboard's browser test runs with DPFL_UI_TEST=1: bash scripts/test-ui.sh (installs chromium when root)")
	}
	chrome := chromium(t)
	needData(t)
	const token = "ui-secret-token"
	s := startServer(t, filepath.Join(t.TempDir(), "dpfl.db"), token)
	cl := client.New(s.addr, token)
	ctx := context.Background()

	// A shared budget, a job without DP (whose participation counts are
	// released) and a job cancelled at once.
	if _, err := cl.CreateBudget(ctx, "ui-demo", 8, 1e-5); err != nil {
		t.Fatal(err)
	}
	plain, err := cl.Submit(ctx, []byte(`{"name": "no DP", "model": "logreg", "rounds": 6, "eval_every": 3,
	  "population": {"size": 600}, "sampling": {"scheme": "fixed", "cohort_size": 30}, "dp": {"enabled": false}}`))
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancelWait := context.WithTimeout(ctx, time.Minute)
	defer cancelWait()
	if plain, err = cl.Wait(wctx, plain.ID, 50*time.Millisecond, nil); err != nil || plain.State != "completed" {
		t.Fatalf("the job without DP: %v, %s %s", err, plain.State, plain.Message)
	}
	other, err := cl.Submit(ctx, []byte(`{"name": "cancelled early", "model": "logreg", "rounds": 500,
	  "population": {"size": 600}, "dp": {"enabled": true, "noise_multiplier": 1.0, "delta": 1e-5}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Cancel(ctx, other.ID); err != nil {
		t.Fatal(err)
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome),
		chromedp.WindowSize(1360, 900),
		chromedp.DisableGPU,
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("lang", "en-US"),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses to run as root with its sandbox
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	defer cancelBrowser()
	start := time.Now()
	if err := chromedp.Do(bctx); err != nil { // the browser, without a deadline
		t.Fatalf("starting %s: %v", chrome, err)
	}
	t.Logf("chromium started in %v", time.Since(start).Round(time.Millisecond))
	bctx, cancel := context.WithTimeout(bctx, 90*time.Second)
	defer cancel()

	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(bctx, steps...); err != nil {
			t.Fatalf("%s: %v\npage text:\n%s", what, err, pageText(bctx))
		}
	}
	// wait polls a JavaScript predicate until it is true.
	wait := func(what, expr string, timeout time.Duration) {
		t.Helper()
		_, err := chromedp.Run(bctx, chromedp.Poll[chromedp.Void](expr,
			chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(timeout)))
		if err != nil {
			t.Fatalf("waiting for %s (%s): %v\npage text:\n%s", what, expr, err, pageText(bctx))
		}
	}
	do("installing the page monitor", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: uiMonitor})
		return err
	}))

	// The login form; a wrong token is refused there and not kept.
	do("loading /ui", chromedp.Navigate(s.addr+"/ui"), chromedp.WaitVisible(chromedp.ID("login-form")))
	if u := evalJS[string](t, bctx, `location.pathname`); u != "/ui/" {
		t.Errorf("/ui landed on %s", u)
	}
	do("signing in with a wrong token", chromedp.SendKeys(chromedp.ID("token"), "not-the-token"), chromedp.Click(chromedp.ID("login-submit")))
	wait("the login error", `!document.querySelector('#login-error').hidden`, 10*time.Second)
	if msg := evalJS[string](t, bctx, `document.querySelector('#login-error').textContent`); !strings.Contains(msg, "401") {
		t.Errorf("login error %q does not say 401", msg)
	}
	if evalJS[bool](t, bctx, `!document.querySelector('#app').hidden || sessionStorage.length > 0 || localStorage.length > 0`) {
		t.Fatal("a wrong token opened the dashboard or was stored")
	}

	// The right token: the jobs list, with the cancelled job.
	do("signing in", chromedp.Evaluate[chromedp.Void](`document.getElementById('token').value = ''`), chromedp.SendKeys(chromedp.ID("token"), token),
		chromedp.Click(chromedp.ID("login-submit")))
	wait("the jobs list", fmt.Sprintf(`document.querySelector('#jobs tr[data-id=%q]')`, other.ID), 10*time.Second)
	if !evalJS[bool](t, bctx, fmt.Sprintf(`sessionStorage.getItem('dpfl.token') === %q && localStorage.length === 0`, token)) {
		t.Error("the token is not in sessionStorage (only)")
	}
	if st := evalJS[string](t, bctx, fmt.Sprintf(`document.querySelector('#jobs tr[data-id=%q]').dataset.state`, other.ID)); st != "cancelled" {
		t.Errorf("the cancelled job shows as %q", st)
	}

	// A job submitted now appears at the next refresh (the button), and
	// the page's own polling then follows it to the end.
	st, err := cl.Submit(ctx, []byte(uiJob))
	if err != nil {
		t.Fatal(err)
	}
	row := fmt.Sprintf(`document.querySelector('#jobs tr[data-id=%q]')`, st.ID)
	do("refreshing", chromedp.Click(chromedp.ID("refresh")))
	wait("the new job's row", row, 10*time.Second)
	// Each row carries the number of the refresh that drew it, set in the
	// same render as its state and read with it (the page's refresh counter
	// is bumped only after a refresh's last request, so it lags a render).
	first, drawnBy, _ := strings.Cut(evalJS[string](t, bctx, row+`.dataset.state + ' ' + `+row+`.dataset.refresh`), " ")
	if first != "pending" && first != "running" {
		t.Errorf("the new job first shows as %q, want pending or running (the test wants to see the polling)", first)
	}
	wait("the job to complete in the list, by polling alone", row+`.dataset.state === 'completed'`, 60*time.Second)
	if now := evalJS[string](t, bctx, row+`.dataset.refresh`); now == drawnBy {
		t.Error("the page did not poll: the completed row was drawn by the refresh that first showed the job")
	}
	final, err := cl.Job(ctx, st.ID)
	if err != nil {
		t.Fatal(err)
	}
	if final.State != "completed" {
		t.Fatalf("job ended %s: %s", final.State, final.Message)
	}
	if got, want := evalJS[string](t, bctx, row+`.querySelector('.rounds').textContent`), fmt.Sprintf("%d / %d", final.Round, final.Spec.Rounds); got != want {
		t.Errorf("progress %q, want %q", got, want)
	}
	jobs, err := cl.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := evalJS[int](t, bctx, `document.querySelectorAll('#jobs tbody tr[data-id]').length`); n != len(jobs) {
		t.Errorf("%d job rows, the API lists %d jobs", n, len(jobs))
	}
	if got, want := evalJS[string](t, bctx, row+`.querySelector('.eps').textContent`), fmt.Sprintf("%.3f", *final.Latest.Epsilon); got != want {
		t.Errorf("the list shows ε %s, the API %s", got, want)
	}

	// The job without DP: participation per round is drawn, ε is not.
	do("opening the job without DP", chromedp.Click(chromedp.CSS(fmt.Sprintf(`#jobs tr[data-id=%q] a`, plain.ID))))
	wait("the job without DP", fmt.Sprintf(`document.body.dataset.job === %q`, plain.ID), 15*time.Second)
	if got := evalJS[int](t, bctx, chartPoints("chart-participation")); got != plain.Round {
		t.Errorf("participation chart of the job without DP: %d points for %d rounds", got, plain.Round)
	}
	if !evalJS[bool](t, bctx, `document.getElementById('chart-epsilon').hidden && /without DP/.test(document.getElementById('chart-epsilon-note').textContent)`) {
		t.Error("the job without DP has an ε chart, or no note saying why not")
	}

	// The job's page: charts, privacy facts and the ledger, as the API
	// has them.
	rep, err := cl.Privacy(ctx, st.ID)
	if err != nil {
		t.Fatal(err)
	}
	met, err := cl.Metrics(ctx, st.ID)
	if err != nil {
		t.Fatal(err)
	}
	evals, epsRounds := 0, 0
	for _, m := range met {
		if m.Test != nil {
			evals++
		}
		if m.Epsilon != nil {
			epsRounds++
		}
	}
	do("opening the job", chromedp.Click(chromedp.CSS(fmt.Sprintf(`#jobs tr[data-id=%q] a`, st.ID))))
	wait("the job's ledger", fmt.Sprintf(`document.body.dataset.job === %q && document.querySelectorAll('#ledger tbody tr.entry').length === %d`,
		st.ID, len(rep.Events)), 15*time.Second)
	for _, c := range []struct {
		id     string
		points int
	}{{"chart-accuracy", evals}, {"chart-epsilon", epsRounds}} {
		if got := evalJS[int](t, bctx, chartPoints(c.id)); got != c.points {
			t.Errorf("%s: %d points drawn, the API has %d", c.id, got, c.points)
		}
	}
	if evals < 10 || epsRounds != final.Round || len(rep.Events) != final.Round {
		t.Errorf("API: %d evaluations, %d rounds with ε, %d ledger events for %d rounds", evals, epsRounds, len(rep.Events), final.Round)
	}
	// Under DP with Poisson sampling /rounds releases no count: the page
	// says so instead of drawing an empty chart.
	if evalJS[bool](t, bctx, `!document.getElementById('chart-participation').hidden || document.getElementById('chart-participation-note').hidden`) {
		t.Error("the participation chart of a Poisson DP job is drawn, or its note is missing")
	}
	lastSeq := evalJS[string](t, bctx, `[...document.querySelectorAll('#ledger tbody tr.entry')].pop().dataset.seq`)
	if want := strconv.FormatUint(rep.Events[len(rep.Events)-1].Seq, 10); lastSeq != want {
		t.Errorf("last ledger row is seq %s, want %s", lastSeq, want)
	}
	facts := evalJS[string](t, bctx, `document.getElementById('privacy-facts').textContent`)
	if rep.Epsilon == nil || !strings.Contains(facts, fmt.Sprintf("%.3f", *rep.Epsilon)) {
		t.Errorf("privacy facts %q lack ε = %v", facts, rep.Epsilon)
	}
	// The shared budget's remaining ε.
	bud, err := cl.Budget(ctx, "ui-demo")
	if err != nil {
		t.Fatal(err)
	}
	rem, err := strconv.ParseFloat(evalJS[string](t, bctx, `document.querySelector('#budgets tr[data-budget="ui-demo"]').dataset.remaining`), 64)
	if err != nil || math.Abs(rem-bud.Remaining) > 1e-9 || !(bud.Remaining > 0 && bud.Remaining < 8) {
		t.Errorf("budget row: remaining %v (%v), the API says %v", rem, err, bud.Remaining)
	}

	if problems := evalJS[[]string](t, bctx, `window.__uiProblems`); len(problems) > 0 {
		t.Errorf("the page reported problems:\n%s", strings.Join(problems, "\n"))
	}

	// The screenshot, of the completed job's page.
	png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	shot := os.Getenv("DPFL_UI_SCREENSHOT")
	if shot == "" {
		shot = filepath.Join(t.TempDir(), "dashboard.png")
	}
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d KiB)", shot, len(png)/1024)

	// A token the server stops accepting mid-session (here: replaced)
	// returns the page to the login, saying why.
	do("replacing the token", chromedp.Evaluate[chromedp.Void](`sessionStorage.setItem('dpfl.token', 'revoked')`),
		chromedp.Click(chromedp.ID("refresh")))
	wait("the login after a 401", `!document.querySelector('#login').hidden && document.querySelector('#app').hidden &&
		/401/.test(document.querySelector('#login-error').textContent) && sessionStorage.getItem('dpfl.token') === null`, 10*time.Second)
}

// chartPoints is a JavaScript expression: the number of points the chart
// in the element id holds (the page's data-points), or -1 when it has no
// drawn canvas.
func chartPoints(id string) string {
	return fmt.Sprintf(`(() => { const b = document.getElementById(%q), c = b.querySelector('canvas');
		return !b.hidden && c && c.width > 100 && c.height > 100 ? Number(b.dataset.points) : -1 })()`, id)
}

// evalJS evaluates a JavaScript expression in the page and decodes its
// value, failing t on error.
func evalJS[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluating %s: %v\npage text:\n%s", expr, err, pageText(ctx))
	}
	return v
}

// pageText is the page's visible text, for failure messages.
func pageText(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ''`))
	if err != nil {
		return "(" + err.Error() + ")"
	}
	return s
}
