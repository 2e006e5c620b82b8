// Command dpfl-client is the command-line client of dpfl-server.
//
//	dpfl-client submit [--file job.json|job.yaml] [--watch] [overrides…]
//	dpfl-client watch JOB
//	dpfl-client list
//	dpfl-client status JOB
//	dpfl-client privacy JOB [--json]
//	dpfl-client privacy compute --q Q --noise Z --steps N --delta D
//	dpfl-client privacy calibrate --epsilon E --delta D --q Q --steps N
//	dpfl-client audit JOB
//	dpfl-client budget create NAME --epsilon E --delta D
//	dpfl-client budget NAME
//	dpfl-client cancel JOB
//	dpfl-client model JOB [--out FILE]
//	dpfl-client devices enroll JOB [--json]
//	dpfl-client devices list JOB
//	dpfl-client participate JOB --data DIR [--credential C] [--rounds N] [--save-inputs DIR]
//	dpfl-client rounds JOB [--plot FILE]
//
// Every command takes --server (default $DPFL_SERVER, else
// http://127.0.0.1:8080) and --token (default $DPFL_TOKEN), the API
// token. participate authenticates with the device's credential instead
// (--credential, default $DPFL_DEVICE_CREDENTIAL), which 'devices enroll'
// prints once.
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
  audit     print a job's privacy ledger as a table
  budget    'budget create NAME --epsilon E --delta D' makes a shared privacy
            unit (jobs join it with dp.privacy_unit); 'budget NAME' shows its spend
  cancel    stop a running job
  model     download a job's latest global model (JSON)
  rounds    per-round participation and estimated time on devices; --plot FILE
            draws test accuracy against it (PNG)
  devices   'devices enroll JOB' enrolls a device for a devices job and prints
            its credential (once); 'devices list JOB' lists the enrolled devices
  participate  take part in a devices job's rounds as one device with the
            local data in --data DIR (IDX files), over secure aggregation;
            authenticates with --credential C (or $DPFL_DEVICE_CREDENTIAL)

common flags: --server URL (or $DPFL_SERVER), --token T (or $DPFL_TOKEN)
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
	fs     *flag.FlagSet
	server *string
	token  *string
}

func newCommand(name string) *command {
	fs := flag.NewFlagSet("dpfl-client "+name, flag.ContinueOnError)
	server := os.Getenv("DPFL_SERVER")
	if server == "" {
		server = "http://127.0.0.1:8080"
	}
	return &command{
		fs:     fs,
		server: fs.String("server", server, "dpfl-server base URL"),
		token:  fs.String("token", os.Getenv("DPFL_TOKEN"), "API bearer token"),
	}
}

func (c *command) client() *client.Client { return client.New(*c.server, *c.token) }

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
	c := newCommand(name)
	switch name {
	case "submit":
		return submit(ctx, c, rest, out)
	case "participate":
		return participate(ctx, c, rest, out)
	case "devices":
		return devices(ctx, c, rest, out)
	case "rounds":
		return rounds(ctx, c, rest, out)
	case "watch":
		id, err := c.jobArg(rest)
		if err != nil {
			return err
		}
		return watch(ctx, c.client(), id, out)
	case "list":
		if err := c.fs.Parse(rest); err != nil {
			return err
		}
		return list(ctx, c.client(), out)
	case "status":
		id, err := c.jobArg(rest)
		if err != nil {
			return err
		}
		st, err := c.client().Job(ctx, id)
		if err != nil {
			return err
		}
		return printJSON(out, st)
	case "privacy":
		if len(rest) > 0 && (rest[0] == "compute" || rest[0] == "calibrate") {
			return privacyOffline(c.fs, rest[0], rest[1:], out)
		}
		asJSON := c.fs.Bool("json", false, "print the full report as JSON")
		id, err := c.jobArg(rest)
		if err != nil {
			return err
		}
		return privacy(ctx, c.client(), id, *asJSON, out)
	case "budget":
		return budget(ctx, c, rest, out)
	case "audit":
		id, err := c.jobArg(rest)
		if err != nil {
			return err
		}
		return audit(ctx, c.client(), id, out)
	case "cancel":
		id, err := c.jobArg(rest)
		if err != nil {
			return err
		}
		st, err := c.client().Cancel(ctx, id)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s %s after %d rounds\n", st.ID, st.State, st.Round)
		return nil
	case "model":
		path := c.fs.String("out", "", "write the model JSON to this file (default stdout)")
		id, err := c.jobArg(rest)
		if err != nil {
			return err
		}
		m, err := c.client().Model(ctx, id)
		if err != nil {
			return err
		}
		if *path == "" {
			return printJSON(out, m)
		}
		b, err := json.Marshal(m)
		if err != nil {
			return err
		}
		if err := os.WriteFile(*path, b, 0o644); err != nil {
			return err
		}
		fmt.Fprintf(out, "wrote %s: %s, %d parameters, round %d\n", *path, m.Model, m.NumParams, m.Round)
		return nil
	}
	fmt.Fprint(os.Stderr, usage)
	return fmt.Errorf("unknown command %q", name)
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
			j.Spec.Model, j.Spec.Population.Clients, j.CreatedAt.Local().Format(time.DateTime))
	}
	return tw.Flush()
}
