package main

import (
	"crypto/x509"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"time"

	"github.com/dpfl/dpfl/internal/leader"
	"github.com/dpfl/dpfl/job"
	"github.com/dpfl/dpfl/storage"
)

// replicaFlags configure this server as one replica of several over an
// etcd store (docs/ha.md): each job is run by the replica that wins its
// election, on a lease of --lease-ttl.
type replicaFlags struct {
	id       string        // --replica-id
	leaseTTL time.Duration // --lease-ttl
	url      string        // --advertise-url
	peerCA   string        // --peer-ca
	// peerCAs is --peer-ca loaded by check (nil: the system's roots).
	peerCAs *x509.CertPool
}

func (r *replicaFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&r.id, "replica-id", "", "this replica's name in the jobs' elections (with --store etcd://…; default <hostname>/<--addr>); unique among the replicas")
	fs.DurationVar(&r.leaseTTL, "lease-ttl", leader.DefaultTTL, "lease of this replica's leadership (with --store etcd://…): a replica that stops renewing it loses its jobs this long after, and another takes them over (at least 2s)")
	fs.StringVar(&r.url, "advertise-url", "", "the URL at which devices and the other replicas reach this replica (with --store etcd://…; default http(s)://<--addr>)")
	fs.StringVar(&r.peerCA, "peer-ca", "", "PEM certificates of the authorities that sign the other replicas' TLS certificates, trusted when a device's request is forwarded to its job's leader (default: the system's roots)")
}

// check fills in the defaults from --addr and whether TLS is on.
func (r *replicaFlags) check(addr string, tlsOn bool) error {
	if r.leaseTTL < leader.MinTTL {
		return fmt.Errorf("--lease-ttl %v: at least %v (etcd counts leases in whole seconds)", r.leaseTTL, leader.MinTTL)
	}
	if r.id == "" {
		host, _ := os.Hostname()
		r.id = host + "/" + addr
	}
	if r.url == "" {
		scheme := "http"
		if tlsOn {
			scheme = "https"
		}
		r.url = scheme + "://" + addr
		if h, p, err := net.SplitHostPort(addr); err == nil && (h == "" || h == "0.0.0.0" || h == "::") {
			host, _ := os.Hostname()
			r.url = scheme + "://" + net.JoinHostPort(host, p)
		}
	}
	if u, err := url.Parse(r.url); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--advertise-url %q: want http(s)://host:port", r.url)
	}
	if r.peerCA != "" {
		pem, err := os.ReadFile(r.peerCA)
		if err != nil {
			return fmt.Errorf("--peer-ca: %w", err)
		}
		r.peerCAs = x509.NewCertPool()
		if !r.peerCAs.AppendCertsFromPEM(pem) {
			return fmt.Errorf("--peer-ca %s: no PEM certificate in it", r.peerCA)
		}
	}
	return nil
}

// leadership elects this replica per job over db's etcd store, or returns
// nil for a bbolt store (one server runs every job). The caller closes the
// Elector after the manager's Shutdown.
func (r *replicaFlags) leadership(db *storage.DB, storePrefix string) (*job.Leadership, error) {
	cli := db.EtcdClient()
	if cli == nil {
		return nil, nil
	}
	el, err := leader.New(cli, storePrefix+"leader/", r.id, r.leaseTTL)
	if err != nil {
		return nil, err
	}
	return &job.Leadership{Elector: el, URL: r.url}, nil
}

// closeLeadership ends l's elector (revoking its lease: other replicas take
// the jobs over at once); nil l is a no-op.
func closeLeadership(l *job.Leadership) error {
	if l == nil {
		return nil
	}
	return l.Elector.Close()
}
