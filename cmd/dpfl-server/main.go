// Command dpfl-server serves dpfl's REST API: it runs differentially private
// federated training jobs in the background and keeps jobs, metrics,
// checkpoints and the privacy ledger in a bbolt database.
//
//	dpfl-server [--addr 127.0.0.1:8080] [--db ./dpfl.db | --store etcd://HOST:PORT,… --blob-dir DIR] [--data-dir DIR] [--token-file FILE]
//	            [--tls-cert FILE --tls-key FILE | --insecure-http] [--verify bounded|full] [--log-format text|json] [limits…]
//	dpfl-server token [--db ./dpfl.db | --store etcd://… --blob-dir DIR] [--role auditor|admin]
//
// The store (docs/ha.md) is the bbolt file --db by default. With --store
// etcd://host1:2379,host2:2379 it is kept in that etcd cluster under
// --store-prefix (default /dpfl/), with the checkpoints as files in
// --blob-dir (required then; optional with bbolt, which then keeps its
// checkpoints there too). While etcd cannot be reached or does not
// confirm a write, the API answers 503 with Retry-After.
//
// --data-dir was --data, which still works for this release and warns.
//
// API tokens (docs/deployment.md). The admin token comes from
// --token-file, else $DPFL_TOKEN, else the one whose hash is stored in
// the database; on the very first start without either, a token is
// generated, its SHA-256 hash stored and the token printed once. --token
// still works but warns: a command line is visible to every user in ps.
// An auditor token (read-only routes) comes from --auditor-token-file or
// $DPFL_AUDITOR_TOKEN, else the stored hash that 'dpfl-server token
// --role auditor' makes. The database holds only hashes; a plaintext
// token stored by an older version is converted at start.
//
// Transport. With --tls-cert and --tls-key the server speaks only TLS
// (1.2 or later). Without them it refuses to listen on anything but a
// loopback address unless --insecure-http is given: API tokens and device
// credentials would cross the network in cleartext.
//
// Transparency log (docs/auditing.md). Every ledger charge, committed
// round (with its model's hash) and privacy unit is a leaf of an
// append-only Merkle log in the database, and every append signs a new
// checkpoint with the server's Ed25519 key: --log-key, by default
// <db>.signing-key (with etcd, <blob-dir>/signing-key, so that every
// server sharing the blob directory signs with the same key), created at
// first start with mode 0600 (a key file
// that others may read is refused). Its public key is printed at every
// start, logged, and served at GET /v1/log/key.
//
// Before it resumes any job, the server checks the database (checkStore):
// every job record, privacy ledger, privacy unit and metrics row is
// checksummed, every DP job's ledger must hold an event for each of its
// committed rounds, and checkpoints are checksummed up to
// startCheckpointBytes (--verify full lifts the cap and adds bbolt's page
// check). On any fault it refuses to start and names what is corrupt:
// reported ε must rest on intact ledgers, and a job must not resume from a
// damaged state.
package main

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	gbytes "github.com/labstack/gommon/bytes"

	"github.com/dpfl/dpfl/api"
	"github.com/dpfl/dpfl/fl/data"
	"github.com/dpfl/dpfl/internal/cliflag"
	"github.com/dpfl/dpfl/job"
	"github.com/dpfl/dpfl/storage"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "dpfl-server:", err)
		}
		os.Exit(1)
	}
}

// The http.Server's timeouts. No route long-polls: every participate GET
// answers at once with the stage as it stands, and devices poll.
const (
	// readHeaderTimeout bounds a request's headers.
	readHeaderTimeout = 10 * time.Second
	// readTimeout bounds reading a whole request. The largest body, a
	// CNN's masked input (about 14 MB of JSON), takes about a minute at
	// the Field Guide's 0.25 MB/s device upload.
	readTimeout = 2 * time.Minute
	// writeTimeout bounds a request from the end of its headers to the
	// end of its response: reading the body (readTimeout), the handler (a
	// submit that loads a dataset takes seconds) and writing the largest
	// response (a CNN model or join, about 12 MB, some 16 s at 0.75 MB/s).
	writeTimeout = 3 * time.Minute
	// idleTimeout closes a keep-alive connection left idle.
	idleTimeout = 2 * time.Minute
)

// defaultMaxRunningJobs bounds the jobs running at once: each trains with
// every core, so more than a few per core only queue for them while
// holding their data in memory.
func defaultMaxRunningJobs() int { return 4 * runtime.GOMAXPROCS(0) }

// byteSize is a flag holding a byte count, as a number or with a unit
// ("8GiB", "512MB"; github.com/labstack/gommon/bytes).
type byteSize int64

func (b *byteSize) String() string { return fmt.Sprint(int64(*b)) }

func (b *byteSize) Set(s string) error {
	n, err := gbytes.Parse(s)
	if err != nil || n < 0 {
		return fmt.Errorf("want a byte count ≥ 0 such as 8589934592, 8GiB or 512MB, got %q", s)
	}
	*b = byteSize(n)
	return nil
}

func run(args []string, stdout io.Writer) error {
	if len(args) > 0 && args[0] == "token" {
		return tokenCommand(args[1:], stdout)
	}
	f, err := parseFlags(args)
	if err != nil {
		return err
	}
	log := newLogger(os.Stderr, f.logFormat)
	// Everything that needs no database first, so a misconfiguration
	// costs no start-up check.
	tlsCfg, err := f.transport(log)
	if err != nil {
		return err
	}
	admin, err := secretFrom("token", f.token, f.tokenSet, f.tokenFile, "DPFL_TOKEN", log)
	if err != nil {
		return err
	}
	auditor, err := secretFrom("auditor-token", "", false, f.auditorFile, "DPFL_AUDITOR_TOKEN", log)
	if err != nil {
		return err
	}
	db, err := f.st.open(context.Background())
	if err != nil {
		return err
	}
	defer db.Close()
	mgr, tokens, err := f.open(db, admin, auditor, log, stdout)
	if err != nil {
		return err
	}
	return f.serve(mgr, tokens, tlsCfg, log)
}

// serverFlags are dpfl-server's flags, parsed and checked.
type serverFlags struct {
	addr, dataDir, dataRoot, logKeyFile string
	// st is the store: --db, or --store, --store-prefix and --blob-dir
	// (store.go).
	st storeFlags
	// replica is this server's part among several over an etcd store
	// (replica.go), and lead the leadership built from it at open.
	replica replicaFlags
	lead    *job.Leadership
	// token is the deprecated --token; tokenSet says it was given.
	token                  string
	tokenSet               bool
	tokenFile, auditorFile string
	tlsCert, tlsKey        string
	insecure               bool
	workers, maxRunning    int
	verify                 string
	maxJobMemory           byteSize
	deviceRate             float64
	logFormat              logFormat // --log-format (logger.go)
}

// parseFlags parses and checks dpfl-server's flags (not 'token'). The
// deprecated --data sets --data-dir, with a warning on stderr.
func parseFlags(args []string) (*serverFlags, error) {
	f := &serverFlags{maxJobMemory: byteSize(job.DefaultMaxJobMemory()), logFormat: "text"}
	fs := flag.NewFlagSet("dpfl-server", flag.ContinueOnError)
	fs.StringVar(&f.addr, "addr", "127.0.0.1:8080", "listen address (host:port); a non-loopback one needs --tls-cert/--tls-key or --insecure-http")
	fs.StringVar(&f.st.dbPath, "db", "./dpfl.db", "bbolt database file (created if missing); not with --store etcd://…")
	f.st.register(fs)
	f.replica.register(fs)
	fs.StringVar(&f.dataDir, "data-dir", data.DefaultFashionMNISTDir, "directory holding the Fashion-MNIST IDX files")
	cliflag.Deprecated(fs, "data", "data-dir")
	fs.StringVar(&f.token, "token", "", "DEPRECATED (visible in ps): the admin API token; use $DPFL_TOKEN or --token-file")
	fs.StringVar(&f.tokenFile, "token-file", "", "file holding the admin API token (default $DPFL_TOKEN, else the hash stored in the db)")
	fs.StringVar(&f.auditorFile, "auditor-token-file", "", "file holding a read-only auditor token (default $DPFL_AUDITOR_TOKEN, else the hash 'dpfl-server token --role auditor' stored)")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "TLS certificate (PEM); with --tls-key the server speaks only HTTPS")
	fs.StringVar(&f.tlsKey, "tls-key", "", "TLS private key (PEM) for --tls-cert")
	fs.BoolVar(&f.insecure, "insecure-http", false, "allow plain HTTP on a non-loopback --addr (tokens and device credentials then cross the network in cleartext)")
	fs.IntVar(&f.workers, "workers", 0, "clients trained in parallel per job (0 = all cores)")
	fs.StringVar(&f.verify, "verify", "bounded", "start-up check of the database: bounded (checkpoints checksummed up to 256 MiB) or full (every checkpoint, and bbolt's page check)")
	fs.Var(&f.maxJobMemory, "max-job-memory", "refuse a job whose estimated peak memory exceeds this many bytes (e.g. 8GiB; 0 = no bound; default half of this machine's memory)")
	fs.IntVar(&f.maxRunning, "max-running-jobs", defaultMaxRunningJobs(), "refuse (429) a submission while this many jobs run (0 = no bound)")
	fs.StringVar(&f.dataRoot, "data-root", "", "the only directory whose datasets a job may name (leaf.train_dir, leaf.test_dir are relative to it); empty: none")
	fs.Float64Var(&f.deviceRate, "device-rate", api.DefaultDeviceRate, "requests per second one device may make to the participate routes (bursts of twice that)")
	fs.Var(&f.logFormat, "log-format", "log format on stderr: text (key=value lines) or json (one object per line)")
	fs.StringVar(&f.logKeyFile, "log-key", "", "Ed25519 key that signs the transparency log's checkpoints (created at first start, mode 0600; default <db>.signing-key, or <blob-dir>/signing-key with --store etcd://…)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	dbSet := false
	fs.Visit(func(fl *flag.Flag) {
		f.tokenSet = f.tokenSet || fl.Name == "token"
		dbSet = dbSet || fl.Name == "db"
	})
	switch {
	case fs.NArg() > 0:
		return nil, fmt.Errorf("unexpected argument %q (flags only; 'dpfl-server token' issues tokens)", fs.Arg(0))
	case f.verify != "bounded" && f.verify != "full":
		return nil, fmt.Errorf("--verify must be bounded or full, got %q", f.verify)
	case f.maxRunning < 0 || !(f.deviceRate > 0):
		return nil, fmt.Errorf("--max-running-jobs must be ≥ 0 and --device-rate > 0")
	}
	if err := f.st.check(); err != nil {
		return nil, err
	}
	if dbSet && f.st.etcd() {
		return nil, errors.New("--db names a bbolt file and --store etcd://… an etcd cluster: give one of them")
	}
	if f.logKeyFile == "" {
		f.logKeyFile = f.st.logKeyFile()
	}
	return f, nil
}

// transport loads the TLS configuration (nil: plain HTTP) and refuses
// plain HTTP where checkTransport does, warning when --insecure-http
// allows it on a non-loopback address.
func (f *serverFlags) transport(log *slog.Logger) (*tls.Config, error) {
	tlsCfg, err := serverTLS(f.tlsCert, f.tlsKey)
	if err != nil {
		return nil, err
	}
	if err := checkTransport(f.addr, tlsCfg != nil, f.insecure); err != nil {
		return nil, err
	}
	if err := f.replica.check(f.addr, tlsCfg != nil); err != nil {
		return nil, err
	}
	if host, _, _ := net.SplitHostPort(f.addr); tlsCfg == nil && f.insecure && !isLoopback(host) {
		log.Warn("serving plain HTTP on a non-loopback address (--insecure-http): API tokens and device credentials cross the network in cleartext")
	}
	return tlsCfg, nil
}

// open prepares db for serving, in the order that keeps a damaged file
// untouched: the log's signing key, the start-up check (checkStore),
// then the first writes (signing the log's head, the tokens) and the
// jobs' resumption. It returns the job manager and the API's tokens.
func (f *serverFlags) open(db *storage.DB, admin, auditor string, log *slog.Logger, stdout io.Writer) (*job.Manager, *api.Tokens, error) {
	logKey, err := loadLogKey(db, f.logKeyFile, log)
	if err != nil {
		return nil, nil, err
	}
	if f.lead, err = f.replica.leadership(db, f.st.prefix); err != nil {
		return nil, nil, err
	}
	mgr := job.NewManager(db, job.Options{
		DataDir: f.dataDir, Workers: f.workers, Logger: log,
		DataRoot: f.dataRoot, MaxJobMemory: int64(f.maxJobMemory), MaxRunningJobs: f.maxRunning,
		Leadership: f.lead,
	})
	// Check before anything writes to the file.
	if err := checkStore(db, mgr, f.verify == "full", log); err != nil {
		return nil, nil, err
	}
	if err := startLog(db, logKey, log, stdout); err != nil {
		return nil, nil, err
	}
	tokens, err := loadTokens(db, admin, auditor, log, stdout)
	if err != nil {
		return nil, nil, err
	}
	if err := mgr.Resume(); err != nil {
		return nil, nil, fmt.Errorf("resuming jobs: %w", err)
	}
	return mgr, tokens, nil
}

// serve listens on --addr and serves the API until SIGINT or SIGTERM,
// then shuts the HTTP server and the jobs down (they resume at the next
// start).
func (f *serverFlags) serve(mgr *job.Manager, tokens *api.Tokens, tlsCfg *tls.Config, log *slog.Logger) error {
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return err
	}
	// Bursts of twice the rate, at least one request.
	burst := max(1, int(math.Ceil(2*f.deviceRate)))
	srv := newHTTPServer(api.New(mgr, api.Config{Tokens: tokens, Logger: log, DeviceRate: f.deviceRate, DeviceBurst: burst, PeerCAs: f.replica.peerCAs}), tlsCfg, log)
	scheme := "http"
	if tlsCfg != nil {
		scheme = "https"
	}
	log.Info("dpfl-server listening", "addr", ln.Addr().String(), "scheme", scheme, "store", f.st.describe(), "data_dir", f.dataDir,
		"data_root", f.dataRoot, "max_job_memory", int64(f.maxJobMemory), "max_running_jobs", f.maxRunning)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() {
		if tlsCfg != nil {
			errc <- srv.ServeTLS(ln, "", "") // the certificate is in TLSConfig
		} else {
			errc <- srv.Serve(ln)
		}
	}()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down; running jobs will resume at the next start")
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error("http shutdown", "err", err)
	}
	err = mgr.Shutdown(sctx)
	if cerr := closeLeadership(f.lead); cerr != nil {
		log.Warn("revoking this replica's lease", "err", cerr)
	}
	return err
}

// newHTTPServer is the http.Server for h, with every timeout set.
func newHTTPServer(h http.Handler, tlsCfg *tls.Config, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		TLSConfig:         tlsCfg,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// serverTLS loads the certificate and key (both or neither) into a TLS
// configuration that refuses anything older than TLS 1.2; nil without
// them.
func serverTLS(certFile, keyFile string) (*tls.Config, error) {
	if certFile == "" && keyFile == "" {
		return nil, nil
	}
	if certFile == "" || keyFile == "" {
		return nil, errors.New("--tls-cert and --tls-key go together: give both, or neither")
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("loading the TLS certificate and key: %w", err)
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}, nil
}

// checkTransport refuses plain HTTP on an address that other machines
// can reach, unless insecure allows it: every request carries an API
// token or a device credential.
func checkTransport(addr string, tlsOn, insecure bool) error {
	if tlsOn || insecure {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--addr %q: %w", addr, err)
	}
	if isLoopback(host) {
		return nil
	}
	return fmt.Errorf("refusing to serve plain HTTP on %s, which other machines can reach: API tokens and device credentials would cross the network in cleartext. "+
		"Give --tls-cert and --tls-key (see docs/deployment.md), listen on a loopback address behind a TLS proxy, or pass --insecure-http if the network is trusted", addr)
}

// isLoopback reports whether host (from --addr) names only this machine:
// "localhost" or a loopback IP. An empty host is every interface.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// secretFrom returns a secret (a token) from, in order: the file named by
// --<name>-file, the deprecated --<name> flag (logged: a command line is
// visible to every user in ps), environment variable env. "" when none
// gives one.
func secretFrom(name, flagVal string, flagSet bool, file, env string, log *slog.Logger) (string, error) {
	if file != "" && flagSet {
		return "", fmt.Errorf("give --%s-file or --%s, not both", name, name)
	}
	switch {
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("--%s-file: %w", name, err)
		}
		tok := strings.TrimSpace(string(b))
		if tok == "" {
			return "", fmt.Errorf("--%s-file %s is empty", name, file)
		}
		if fi, err := os.Stat(file); err == nil && fi.Mode().Perm()&0o077 != 0 {
			log.Warn("token file is readable by other users; chmod 600 it", "file", file, "mode", fi.Mode().Perm().String())
		}
		return tok, nil
	case flagSet:
		if flagVal == "" {
			return "", fmt.Errorf("--%s is empty", name)
		}
		log.Warn("--" + name + " puts the secret on the command line, where every user of this machine sees it (ps, /proc); use $" + env + " or --" + name + "-file")
		return flagVal, nil
	}
	return os.Getenv(env), nil
}

// plaintextTokenKey is the settings key under which versions before
// hashed tokens kept the API token in plaintext.
const plaintextTokenKey = "api_token"

// tokenBytes is the length of a generated token: 256 random bits.
const tokenBytes = 32

func newToken() string {
	b := make([]byte, tokenBytes)
	_, _ = crand.Read(b) // crypto/rand.Read does not fail (Go ≥ 1.24)
	return hex.EncodeToString(b)
}

// loadTokens builds the API's token set. The admin token is admin when
// given, else the one whose hash the database holds, else a new one,
// whose hash it stores and which it prints to out, once. The auditor
// token is auditor when given, else the stored hash if any. A plaintext
// token left by an older version is first converted to its hash.
func loadTokens(db *storage.DB, admin, auditor string, log *slog.Logger, out io.Writer) (*api.Tokens, error) {
	migrated, err := db.MigratePlaintextToken(plaintextTokenKey, string(api.RoleAdmin))
	if err != nil {
		return nil, err
	}
	if migrated {
		log.Warn("converted the plaintext API token that an older version stored into its SHA-256 hash; the token still works. " +
			"bbolt may keep the old bytes in free pages of the file until they are reused: rotate the token with 'dpfl-server token --role admin'")
	}
	tokens := &api.Tokens{}
	for _, r := range api.Roles {
		given := map[api.Role]string{api.RoleAdmin: admin, api.RoleAuditor: auditor}[r]
		if given != "" {
			if len(given) < 16 {
				log.Warn("short API token: use at least 16 random characters (dpfl generates 64 hex digits)", "role", r)
			}
			tokens.Add(api.HashToken(given), r)
			continue
		}
		h, ok, err := db.TokenHash(string(r))
		if err != nil {
			return nil, err
		}
		if !ok && r == api.RoleAdmin {
			fresh := newToken()
			sum := api.HashToken(fresh)
			if h, err = db.SetTokenHashIfAbsent(string(r), sum[:]); err != nil {
				return nil, err
			}
			ok = true
			if bytes.Equal(h, sum[:]) {
				fmt.Fprintf(out, "generated admin API token (shown once; %s keeps only its SHA-256 hash): %s\n", db.Path(), fresh)
			}
		}
		if ok {
			if len(h) != len(api.HashToken("")) {
				return nil, fmt.Errorf("database %s: the stored %s token hash has %d bytes, not a SHA-256; issue a new one with 'dpfl-server token --role %s'", db.Path(), r, len(h), r)
			}
			tokens.Add([32]byte(h), r)
		}
	}
	return tokens, nil
}

// tokenCommand is 'dpfl-server token': it makes a fresh token for a role,
// stores its hash in the database (revoking the role's previous token)
// and prints the token on stdout, the one time it is shown. The server
// must be stopped: bbolt lets one process open the file.
func tokenCommand(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("dpfl-server token", flag.ContinueOnError)
	var st storeFlags
	fs.StringVar(&st.dbPath, "db", "./dpfl.db", "bbolt database file of the (stopped) server")
	st.register(fs)
	role := fs.String("role", string(api.RoleAuditor), "auditor (read-only routes) or admin (every route; replaces the admin token)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if !api.Role(*role).Valid() {
		return fmt.Errorf("--role must be auditor or admin, got %q", *role)
	}
	if err := st.check(); err != nil {
		return err
	}
	db, err := st.open(context.Background())
	if errors.Is(err, storage.ErrLocked) {
		return fmt.Errorf("%w (stop dpfl-server first: it holds the database)", err)
	} else if err != nil {
		return err
	}
	defer db.Close()
	if migrated, err := db.MigratePlaintextToken(plaintextTokenKey, string(api.RoleAdmin)); err != nil {
		return err
	} else if migrated {
		fmt.Fprintln(os.Stderr, "converted the plaintext admin token that an older version stored into its SHA-256 hash")
	}
	tok := newToken()
	sum := api.HashToken(tok)
	if err := db.SetTokenHash(*role, sum[:]); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "new %s token stored as its SHA-256 hash in %s (the previous %s token no longer works; $DPFL_TOKEN or --token-file given to the server take precedence). It is shown once:\n", *role, db.Path(), *role)
	fmt.Fprintln(stdout, tok)
	return nil
}

// startCheckpointBytes caps the checkpoint bytes the bounded start-up check
// reads: running jobs' checkpoints first (they are read to resume anyway),
// then the most recently updated.
const startCheckpointBytes = 256 << 20

// maxListed caps the faults a refused start lists one by one.
const maxListed = 20

// checkStore is the start-up check of the database: storage.DB.VerifyWith
// (bounded by startCheckpointBytes, or in full), then
// job.Manager.VerifyLedgers. Any fault refuses the start with an error that
// lists the faults (the first maxListed, then a count), each naming the
// job, ledger seq, unit or checkpoint at fault.
func checkStore(db *storage.DB, mgr *job.Manager, full bool, log *slog.Logger) error {
	opt := storage.VerifyOptions{CheckpointBytes: startCheckpointBytes}
	if full {
		opt = storage.VerifyOptions{Structure: true, CheckpointBytes: -1}
	}
	opt.LogKey = db.LogPublicKey()
	res, err := db.VerifyWith(opt)
	if err == nil {
		err = mgr.VerifyLedgers()
	}
	if err != nil {
		return fmt.Errorf("database %s failed its start-up check, so the server will not start (a reported ε must rest on intact ledgers); restore the file from a backup, or move it aside to start afresh:\n%s",
			db.Path(), listErrors(err))
	}
	log.Info("database checked", "jobs", res.Jobs, "ledger_entries", res.LedgerEntries, "log_leaves", res.LogLeaves, "units", res.Units,
		"metrics_rows", res.MetricsRounds, "checkpoints_verified", res.CheckpointsVerified,
		"checkpoints_header_only", res.CheckpointsSkipped, "page_check", res.Structure, "took", res.Duration)
	return nil
}

// listErrors lists the faults in err (errors.Join puts one a line), at
// most maxListed.
func listErrors(err error) string {
	lines := strings.Split(err.Error(), "\n")
	var b strings.Builder
	for i, l := range lines {
		if i == maxListed {
			fmt.Fprintf(&b, "  … and %d more\n", len(lines)-maxListed)
			break
		}
		fmt.Fprintf(&b, "  - %s\n", l)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// loadLogKey loads the transparency log's signing key from path,
// creating it at first start (named after this host: the log's origin),
// and gives it to db. It returns the verifier key.
func loadLogKey(db *storage.DB, path string, log *slog.Logger) (string, error) {
	skey, created, err := storage.LoadOrCreateLogKey(path, logName())
	if err != nil {
		return "", err
	}
	vkey, err := db.SetLogSigner(skey)
	if err != nil {
		return "", err
	}
	if created {
		log.Info("created the transparency log's signing key (keep it, and back it up: a new key cannot extend the old log's signatures)", "file", path)
	}
	return vkey, nil
}

// logName is the name of a new log signing key, which every checkpoint
// states as its origin: "dpfl/" and this host's name, reduced to the
// characters a note key name may hold.
func logName() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	host = strings.Map(func(r rune) rune {
		if r < 0x80 && (r == '.' || r == '-' || r == '_' || '0' <= r && r <= '9' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z') {
			return r
		}
		return '-'
	}, host)
	return "dpfl/" + host
}

// startLog signs the log's head if it is not yet signed by this key (a
// database whose log began without it), then prints and logs the public
// key and the head, so that an auditor can pin both.
func startLog(db *storage.DB, vkey string, log *slog.Logger, out io.Writer) error {
	signed, err := db.SignLogHead()
	if err != nil {
		return err
	}
	head, err := db.LogHead()
	if err != nil {
		return err
	}
	if signed && head.Size > 0 {
		log.Warn("signed the transparency log's unsigned head (a log started in a database that predates it)", "size", head.Size)
	}
	fmt.Fprintf(out, "transparency log public key (pin it to verify audit bundles): %s\n", vkey)
	log.Info("transparency log", "public_key", vkey, "size", head.Size, "root", head.Root.String())
	return nil
}
