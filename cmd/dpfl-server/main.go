// Command dpfl-server serves dpfl's REST API: it runs differentially private
// federated training jobs in the background and keeps jobs, metrics,
// checkpoints and the privacy ledger in a bbolt database.
//
//	dpfl-server [--addr 127.0.0.1:8080] [--db ./dpfl.db] [--data-dir DIR] [--token T] [--verify bounded|full]
//
// The bearer token comes from --token, else $DPFL_TOKEN, else the one stored
// in the database; on the very first start without either, a token is
// generated, stored and printed once.
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
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/dpfl/dpfl/api"
	"github.com/dpfl/dpfl/fl/data"
	"github.com/dpfl/dpfl/fl/job"
	"github.com/dpfl/dpfl/storage"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "dpfl-server:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("dpfl-server", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8080", "listen address (host:port)")
	dbPath := fs.String("db", "./dpfl.db", "bbolt database file (created if missing)")
	dataDir := fs.String("data-dir", data.DefaultFashionMNISTDir, "directory holding the Fashion-MNIST IDX files")
	token := fs.String("token", os.Getenv("DPFL_TOKEN"), "API bearer token (default $DPFL_TOKEN, else stored in the db)")
	workers := fs.Int("workers", 0, "clients trained in parallel per job (0 = all cores)")
	verify := fs.String("verify", "bounded", "start-up check of the database: bounded (checkpoints checksummed up to 256 MiB) or full (every checkpoint, and bbolt's page check)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *verify != "bounded" && *verify != "full" {
		return fmt.Errorf("--verify must be bounded or full, got %q", *verify)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))

	db, err := storage.Open(*dbPath)
	if err != nil {
		return err
	}
	defer db.Close()
	mgr := job.NewManager(db, job.Options{DataDir: *dataDir, Workers: *workers, Logger: log})
	// Check before anything writes to the file.
	if err := checkStore(db, mgr, *verify == "full", log); err != nil {
		return err
	}
	tok, err := resolveToken(db, *token)
	if err != nil {
		return err
	}
	if err := mgr.Resume(); err != nil {
		return fmt.Errorf("resuming jobs: %w", err)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: api.New(mgr, tok, log), ReadHeaderTimeout: 10 * time.Second}
	log.Info("dpfl-server listening", "addr", ln.Addr().String(), "db", *dbPath, "data_dir", *dataDir)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
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
	return mgr.Shutdown(sctx)
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
	res, err := db.VerifyWith(opt)
	if err == nil {
		err = mgr.VerifyLedgers()
	}
	if err != nil {
		return fmt.Errorf("database %s failed its start-up check, so the server will not start (a reported ε must rest on intact ledgers); restore the file from a backup, or move it aside to start afresh:\n%s",
			db.Path(), listErrors(err))
	}
	log.Info("database checked", "jobs", res.Jobs, "ledger_entries", res.LedgerEntries, "units", res.Units,
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

// resolveToken returns the flag/env token, else the stored one, else a new
// one that it stores and prints once.
func resolveToken(db *storage.DB, given string) (string, error) {
	if given != "" {
		return given, nil
	}
	var b [24]byte
	if _, err := crand.Read(b[:]); err != nil {
		return "", err
	}
	fresh := hex.EncodeToString(b[:])
	tok, err := db.SetSettingIfAbsent("api_token", []byte(fresh))
	if err != nil {
		return "", err
	}
	if string(tok) == fresh {
		fmt.Printf("generated API token (shown once; it is stored in %s): %s\n", db.Path(), fresh)
	}
	return string(tok), nil
}
