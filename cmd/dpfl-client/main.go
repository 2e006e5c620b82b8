// Command dpfl-client is the command-line client of dpfl-server.
//
//	dpfl-client submit [--file job.json|job.yaml] [--watch] [overrides…]
//	dpfl-client watch JOB
//	dpfl-client list
//	dpfl-client status JOB
//	dpfl-client privacy JOB [--json]
//	dpfl-client privacy compute --sampling-rate Q --noise-multiplier Z --rounds T --delta D
//	dpfl-client privacy calibrate --target-epsilon E --delta D --sampling-rate Q --rounds T
//	dpfl-client audit JOB [--bundle FILE [--since-checkpoint FILE]]
//	dpfl-client verify FILE [--key PUB] [--model MODEL.json]
//	dpfl-client budget create NAME --epsilon-budget E --delta D
//	dpfl-client budget NAME
//	dpfl-client cancel JOB
//	dpfl-client model JOB [--format json|onnx|safetensors] [--out FILE]
//	dpfl-client devices enroll JOB [--json]
//	dpfl-client devices list JOB
//	dpfl-client participate JOB --data-dir DIR [--credential-file F] [--rounds N] [--save-inputs DIR]
//	dpfl-client rounds JOB [--plot FILE]
//
// Every command takes --server (default $DPFL_SERVER, else
// http://127.0.0.1:8080), --ca FILE (default $DPFL_CA: PEM certificates
// to trust for an https:// server) and the API token: $DPFL_TOKEN or
// --token-file FILE (--token T still works but warns, as a command line
// is visible to every user in ps). An auditor's token serves the
// commands that only read. participate authenticates with the device's
// credential instead ($DPFL_DEVICE_CREDENTIAL or --credential-file),
// which 'devices enroll' prints once.
//
// Flags of earlier releases (--clients, --q, --cohort, --clip, --z,
// --noise, --steps, --epsilon, --data) still work for one release, with a
// warning naming the flag that replaces them.
//
// watch (and submit --watch) ends with an error, rather than waiting
// forever, when the server fails to answer or the job makes no progress
// for --stall-timeout.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dpfl/dpfl/api/client"
)

const usage = `usage: dpfl-client COMMAND [flags] [JOB]

commands:
  submit    create a job from --file and/or flags (see 'dpfl-client submit -h')
  watch     show a live progress bar of a job until it ends
  list      list jobs
  status    show a job's state and latest metrics
  privacy   show a job's privacy ledger and ε; 'privacy compute' and
            'privacy calibrate' work offline (see 'dpfl-client privacy compute -h')
  audit     print a job's privacy ledger as a table; --bundle FILE writes its
            audit bundle (transparency log entries, proofs, signed checkpoint)
  verify    check an audit bundle or a model file offline (see 'dpfl-client verify -h')
  budget    'budget create NAME --epsilon-budget E --delta D' makes a shared
            privacy budget (jobs join it with dp.budget, or submit --budget);
            'budget NAME' shows its spend
  cancel    stop a running job
  model     download a job's latest global model: JSON (the default), or
            --format onnx|safetensors with its privacy certificate (--out FILE)
  rounds    per-round participation and estimated time on devices; --plot FILE
            draws test accuracy against it (PNG)
  devices   'devices enroll JOB' enrolls a device for a devices job and prints
            its credential (once); 'devices list JOB' lists the enrolled devices
  participate  take part in a devices job's rounds as one device with the
            local data in --data-dir DIR (IDX files), over secure aggregation;
            authenticates with --credential C (or $DPFL_DEVICE_CREDENTIAL)

common flags: --server URL (or $DPFL_SERVER), --ca FILE (or $DPFL_CA) to trust
  an https:// server's certificate, --token-file FILE (or $DPFL_TOKEN)
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "dpfl-client:", err)
		}
		os.Exit(1)
	}
}

// command is one subcommand's parsed flags and arguments.
type command struct {
	fs        *flag.FlagSet
	server    *string
	token     *string
	tokenFile *string
	ca        *string
	stderr    io.Writer
}

func newCommand(name string, stderr io.Writer) *command {
	fs := flag.NewFlagSet("dpfl-client "+name, flag.ContinueOnError)
	server := os.Getenv("DPFL_SERVER")
	if server == "" {
		server = "http://127.0.0.1:8080"
	}
	return &command{
		fs:        fs,
		server:    fs.String("server", server, "dpfl-server base URL"),
		token:     fs.String("token", "", "DEPRECATED (visible in ps): the API token; use $DPFL_TOKEN or --token-file"),
		tokenFile: fs.String("token-file", "", "file holding the API token (default $DPFL_TOKEN)"),
		ca:        fs.String("ca", os.Getenv("DPFL_CA"), "PEM file of the certificate authority (or self-signed certificate) to trust for an https:// server (default $DPFL_CA)"),
		stderr:    stderr,
	}
}

// isSet reports whether flag name was given on the command line.
func (c *command) isSet(name string) bool {
	set := false
	c.fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// deprecatedFlag makes --old, the name of an earlier release, set flag
// --name (already defined) with a warning on stderr. It stays for one
// release.
func (c *command) deprecatedFlag(old, name string) {
	c.fs.Func(old, "deprecated: use --"+name, func(v string) error {
		fmt.Fprintf(c.stderr, "flag --%s is deprecated; use --%s\n", old, name)
		return c.fs.Set(name, v)
	})
}

// secret returns a secret from, in order, --<name>-file, the --<name>
// flag (with a warning: a command line is visible to every user in ps),
// and environment variable env.
func (c *command) secret(name, flagVal, file, env string) (string, error) {
	switch {
	case file != "" && c.isSet(name):
		return "", fmt.Errorf("give --%s-file or --%s, not both", name, name)
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("--%s-file: %w", name, err)
		}
		s := strings.TrimSpace(string(b))
		if s == "" {
			return "", fmt.Errorf("--%s-file %s is empty", name, file)
		}
		return s, nil
	case c.isSet(name):
		fmt.Fprintf(c.stderr, "dpfl-client: warning: --%s puts the secret on the command line, where every user of this machine sees it (ps); use $%s or --%s-file\n", name, env, name)
		return flagVal, nil
	}
	return os.Getenv(env), nil
}

// connect returns a client for the server with secret (the API token or
// a device credential), trusting --ca if given.
func (c *command) connect(secret string) (*client.Client, error) {
	var opts []client.Option
	if *c.ca != "" {
		pool, err := client.LoadCA(*c.ca)
		if err != nil {
			return nil, err
		}
		opts = append(opts, client.WithRootCAs(pool))
	}
	return client.New(*c.server, secret, opts...), nil
}

// client returns a client with the API token. Call it after parsing.
func (c *command) client() (*client.Client, error) {
	tok, err := c.secret("token", *c.token, *c.tokenFile, "DPFL_TOKEN")
	if err != nil {
		return nil, err
	}
	return c.connect(tok)
}

// positional parses flags and returns the positional arguments. Flags may
// come before or after them ('rounds JOB --plot f.png').
func (c *command) positional(args []string) ([]string, error) {
	if err := c.fs.Parse(args); err != nil {
		return nil, err
	}
	var pos []string
	for c.fs.NArg() > 0 {
		pos = append(pos, c.fs.Arg(0))
		if err := c.fs.Parse(c.fs.Args()[1:]); err != nil {
			return nil, err
		}
	}
	return pos, nil
}

// jobArg parses flags and returns the single JOB argument.
func (c *command) jobArg(args []string) (string, error) {
	pos, err := c.positional(args)
	if err != nil {
		return "", err
	}
	if len(pos) != 1 {
		return "", fmt.Errorf("%s: want exactly one JOB id, got %d arguments", c.fs.Name(), len(pos))
	}
	return pos[0], nil
}

func run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(out, usage)
		if len(args) == 0 {
			return errors.New("no command given")
		}
		return nil
	}
	name, rest := args[0], args[1:]
	cmd, ok := subcommands[name]
	if !ok {
		fmt.Fprint(os.Stderr, usage)
		return fmt.Errorf("unknown command %q", name)
	}
	return cmd(ctx, newCommand(name, os.Stderr), rest, out)
}

// subcommand runs one command with its flag set c and its arguments.
type subcommand func(ctx context.Context, c *command, args []string, out io.Writer) error

// subcommands are the commands of usage, by name.
var subcommands = map[string]subcommand{
	"submit":      submit,
	"participate": participate,
	"devices":     devices,
	"rounds":      rounds,
	"watch":       watchJob,
	"list":        listJobs,
	"status":      status,
	"privacy":     privacyCmd,
	"budget":      budget,
	"audit":       auditCmd,
	"verify":      func(_ context.Context, c *command, args []string, out io.Writer) error { return verify(c, args, out) },
	"cancel":      cancel,
	"model":       modelCmd,
}

// jobClient parses the flags and the single JOB argument and connects
// with the API token.
func (c *command) jobClient(args []string) (string, *client.Client, error) {
	id, err := c.jobArg(args)
	if err != nil {
		return "", nil, err
	}
	cl, err := c.client()
	return id, cl, err
}

func watchJob(ctx context.Context, c *command, args []string, out io.Writer) error {
	stall := stallFlag(c.fs)
	id, cl, err := c.jobClient(args)
	if err != nil {
		return err
	}
	return watch(ctx, cl, id, *stall, out)
}

func listJobs(ctx context.Context, c *command, args []string, out io.Writer) error {
	if err := c.fs.Parse(args); err != nil {
		return err
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	return list(ctx, cl, out)
}

func status(ctx context.Context, c *command, args []string, out io.Writer) error {
	id, cl, err := c.jobClient(args)
	if err != nil {
		return err
	}
	st, err := cl.Job(ctx, id)
	if err != nil {
		return err
	}
	return printJSON(out, st)
}

func privacyCmd(ctx context.Context, c *command, args []string, out io.Writer) error {
	if len(args) > 0 && (args[0] == "compute" || args[0] == "calibrate") {
		return privacyOffline(c, args[0], args[1:], out)
	}
	asJSON := c.fs.Bool("json", false, "print the full report as JSON")
	id, cl, err := c.jobClient(args)
	if err != nil {
		return err
	}
	return privacy(ctx, cl, id, *asJSON, out)
}

func auditCmd(ctx context.Context, c *command, args []string, out io.Writer) error {
	bundle := c.fs.String("bundle", "", "write the job's audit bundle (log entries, proofs, signed checkpoint, claim) to this file")
	since := c.fs.String("since-checkpoint", "", "with --bundle: an earlier bundle or checkpoint note you kept; the bundle then proves the log only grew since")
	id, cl, err := c.jobClient(args)
	if err != nil {
		return err
	}
	if *bundle != "" {
		return auditBundle(ctx, cl, id, *bundle, *since, out)
	}
	if *since != "" {
		return errors.New("audit: --since-checkpoint goes with --bundle")
	}
	return audit(ctx, cl, id, out)
}

func cancel(ctx context.Context, c *command, args []string, out io.Writer) error {
	id, cl, err := c.jobClient(args)
	if err != nil {
		return err
	}
	st, err := cl.Cancel(ctx, id)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s %s after %d rounds\n", st.ID, st.State, st.Round)
	return nil
}

func printJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func list(ctx context.Context, cl *client.Client, out io.Writer) error {
	jobs, err := cl.List(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tSTATE\tROUND\tMODEL\tCLIENTS\tCREATED")
	for _, j := range jobs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\t%d\t%s\n", j.ID, j.Spec.Name, j.State, j.Round, j.Spec.Rounds,
			j.Spec.Model, j.Spec.Population.Size, j.CreatedAt.Local().Format(time.DateTime))
	}
	return tw.Flush()
}
