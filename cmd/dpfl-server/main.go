// Command dpfl-server serves dpfl's REST API: it runs differentially private
// federated training jobs in the background and keeps jobs, metrics,
// checkpoints and the privacy ledger in a bbolt database.
//
//	dpfl-server [--addr 127.0.0.1:8080] [--db ./dpfl.db] [--data-dir DIR] [--token T]
//
// The bearer token comes from --token, else $DPFL_TOKEN, else the one stored
// in the database; on the very first start without either, a token is
// generated, stored and printed once.
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
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))

	db, err := storage.Open(*dbPath)
	if err != nil {
		return err
	}
	defer db.Close()
	tok, err := resolveToken(db, *token)
	if err != nil {
		return err
	}

	mgr := job.NewManager(db, job.Options{DataDir: *dataDir, Workers: *workers, Logger: log})
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
